"""`run_in_loop`: a routine runs against the async client inside the wrapper's loop thread."""
from __future__ import annotations

import threading

import pytest

from raftkafka.client.blocking import BlockingAdmin, BlockingConsumer, BlockingProducer
from raftkafka.client.errors import BrokerResponseError
from tests.client.served import ServedMiniCluster


@pytest.fixture
def served():
    with ServedMiniCluster((1,)) as served:
        yield served


def test_run_in_loop_sends_many_and_reads_a_range_in_one_hop_each(served):
    with BlockingAdmin(served.bootstrap) as admin:
        admin.create_topic("hop", 1)

    async def send_all(producer, values):
        futures = [await producer.send("hop", v, partition=0) for v in values]
        await producer.flush()
        return [(await f).offset for f in futures]

    with BlockingProducer(served.bootstrap, linger_ms=1) as producer:
        assert producer.run_in_loop(send_all, [b"%d" % i for i in range(20)]) == list(range(20))

    async def read_from(consumer, offset):
        consumer.assign([("hop", 0)])
        consumer.seek(("hop", 0), offset)
        records = []
        while len(records) < 20 - offset:
            records += await consumer.poll(1.0)
        return [r.value for r in records], await consumer.position(("hop", 0))

    with BlockingConsumer(served.bootstrap, auto_offset_reset="none", fetch_max_wait_ms=50) as consumer:
        values, position = consumer.run_in_loop(read_from, 15)
        assert values == [b"%d" % i for i in range(15, 20)] and position == 20
        # a plain function runs in the loop thread too, with the async client itself
        name, client = consumer.run_in_loop(lambda c: (threading.current_thread().name, c))
        assert name == "raftkafka-consumer" and client.group_id is None


def test_run_in_loop_raises_the_routines_error(served):
    async def describe_missing(admin):
        return await admin.describe_topics(["missing"])

    with BlockingAdmin(served.bootstrap, request_timeout_ms=2000) as admin:
        with pytest.raises(BrokerResponseError, match="UNKNOWN_TOPIC_OR_PARTITION"):
            admin.run_in_loop(describe_missing)
        assert admin.list_topics() == {}  # the wrapper still works afterwards
