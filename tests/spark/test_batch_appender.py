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
