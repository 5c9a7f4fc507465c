"""The sink's `BatchAppender` against the client tests' in-memory broker: several idempotent
batches of a partition in flight, and a failed one resent with those behind it."""
from __future__ import annotations

import pytest
import trio.testing

from raftkafka.client.cluster import Cluster
from spark_source.batch_appender import AmbiguousWriteError, BatchAppender
from tests.client.memnet import MemEnv
from tests.client.mini_broker import MiniCluster
from wire.error_codes import ErrorCode
from wire.protocol import ApiKey
from wire.records_fast import encode_records


@pytest.fixture
def autojump_clock():
    return trio.testing.MockClock(autojump_threshold=0)


async def _setup(nursery):
    env = MemEnv()
    mini = MiniCluster(env, (1,))
    await mini.serve_all(nursery)
    mini.create_topic("t", 2)
    return mini, Cluster(env, nursery, "b1:9092")


def _sections(batches: int):
    return [(("t", p), encode_records([(None, b"p%d-%d" % (p, i), (), 1000)], 1000), 1)
            for i in range(batches) for p in (0, 1)]


def _produce_requests(mini) -> int:
    return sum(1 for r in mini.requests if r[1] == ApiKey.PRODUCE)


async def test_batches_go_five_at_a_time_and_a_failed_one_is_resent_with_those_behind_it(nursery, autojump_clock):
    mini, cluster = await _setup(nursery)
    await BatchAppender().append(cluster, _sections(12), 1000)
    for p in (0, 1):
        assert [r.value for r in mini.records("t", p)] == [b"p%d-%d" % (p, i) for i in range(12)]
    assert _produce_requests(mini) == 12  # request i of a round: the i-th batch of both partitions

    mini, cluster = await _setup(nursery)
    mini.fail_next(ApiKey.PRODUCE, ErrorCode.NOT_LEADER_OR_FOLLOWER)  # the first request of the first round
    await BatchAppender(retry_backoff_s=0.01).append(cluster, _sections(7), 1000)
    for p in (0, 1):  # those behind it were refused out of order and went again after it, once each
        assert [r.value for r in mini.records("t", p)] == [b"p%d-%d" % (p, i) for i in range(7)]
    assert _produce_requests(mini) == 5 + 7


async def test_a_batch_that_cannot_be_delivered_stops_its_partition_and_is_ambiguous(nursery, autojump_clock):
    mini, cluster = await _setup(nursery)
    mini.fail_next(ApiKey.PRODUCE, ErrorCode.INVALID_TOPIC_EXCEPTION)  # partition 0's first batch
    with pytest.raises(AmbiguousWriteError, match="t-0"):
        await BatchAppender().append(cluster, _sections(3), 1000)
    assert mini.records("t", 0) == []  # those behind it were refused and not sent again
    assert [r.value for r in mini.records("t", 1)] == [b"p1-%d" % i for i in range(3)]


async def test_sections_arriving_while_others_are_in_flight_keep_their_order(nursery, autojump_clock):
    mini, cluster = await _setup(nursery)
    sections = _sections(9)
    send, receive = trio.open_memory_channel(100)
    appender = BatchAppender()
    done = trio.Event()

    async def append():
        await appender.append_from(cluster, receive, 1000)
        done.set()

    nursery.start_soon(append)
    for start, end in ((0, 4), (4, 10), (10, 18)):  # three arrivals, the later ones while earlier ones are in flight
        for section in sections[start:end]:
            await send.send(section)
        await trio.sleep(0)
        if start == 0:
            await trio.sleep(1)  # the first arrival is appended before the rest is given
            assert [r.value for r in mini.records("t", 0)] == [b"p0-0", b"p0-1"]
    assert not done.is_set()  # open input: the appender waits for more
    await send.aclose()
    await done.wait()
    for p in (0, 1):
        assert [r.value for r in mini.records("t", p)] == [b"p%d-%d" % (p, i) for i in range(9)]


async def test_a_partition_given_up_drops_what_arrives_for_it_later(nursery, autojump_clock):
    mini, cluster = await _setup(nursery)
    mini.fail_next(ApiKey.PRODUCE, ErrorCode.INVALID_TOPIC_EXCEPTION)  # partition 0's first batch
    send, receive = trio.open_memory_channel(100)
    for section in _sections(2):
        send.send_nowait(section)
    outcome = []

    async def append():
        try:
            await BatchAppender().append_from(cluster, receive, 1000)
        except AmbiguousWriteError as exc:
            outcome.append(exc)

    async with trio.open_nursery() as inner:
        inner.start_soon(append)
        await trio.sleep(1)  # the first round is answered: partition 0 is given up
        for section in _sections(4)[4:]:  # the 3rd and 4th batch of each partition
            await send.send(section)
        await send.aclose()
    assert outcome and "t-0" in str(outcome[0])
    assert mini.records("t", 0) == []
    assert [r.value for r in mini.records("t", 1)] == [b"p1-%d" % i for i in range(4)]
