"""RecordAccumulator: how many batches of one partition may be in flight at once."""
import pytest

from raftkafka.client.accumulator import RecordAccumulator
from raftkafka.client.producer import Producer
from tests.client.memnet import MemEnv
from tests.client.mini_broker import MiniCluster
from wire.error_codes import ErrorCode
from wire.protocol import ApiKey

TP = ("t", 0)


def _fill(acc: RecordAccumulator, batches: int) -> None:
    for i in range(batches):
        acc.append(TP, (None, b"x" * 100, (), 0), 121, now=0.0)


def test_a_partition_is_muted_at_max_in_flight_and_unmuted_by_an_answer():
    acc = RecordAccumulator(batch_size=100, linger=1.0, max_in_flight=2)
    _fill(acc, 4)  # each record fills its own batch
    first = acc.drain(TP)
    assert acc.ready(0.0, False)[0] == [TP]  # one in flight, a second may go
    acc.drain(TP)
    assert acc.ready(0.0, False)[0] == []  # two in flight: muted
    acc.finished(first)
    assert acc.ready(0.0, False)[0] == [TP]
    acc.finished(first)  # a second answer for the same batch changes nothing
    acc.drain(TP)
    assert acc.ready(0.0, False)[0] == []


def test_finishing_a_batch_that_was_never_sent_does_not_unmute():
    acc = RecordAccumulator(batch_size=100, linger=1.0, max_in_flight=1)
    _fill(acc, 2)
    acc.drain(TP)
    expired = acc.expire(now=10.0, delivery_timeout=5.0)  # the queued one times out
    assert len(expired) == 1
    acc.finished(expired[0])
    _fill(acc, 1)
    assert acc.ready(0.0, False)[0] == []  # the drained batch is still unanswered


def _count_most_in_flight(acc: RecordAccumulator) -> list[int]:
    """[the most batches of a partition in flight at once so far], kept up to date by drain()."""
    most, drain = [0], acc.drain

    def counting_drain(tp):
        batch = drain(tp)
        most[0] = max(most[0], acc._in_flight[tp])
        return batch

    acc.drain = counting_drain
    return most


async def test_pipelined_batches_of_a_partition_keep_their_order(nursery, autojump_clock):
    env = MemEnv()
    mini = MiniCluster(env, (1,))
    await mini.serve_all(nursery)
    mini.create_topic("t", 1)
    async with Producer(env, "b1:9092", acks=1, linger_ms=0, batch_size=200,
                        max_in_flight_requests_per_connection=5) as producer:
        most = _count_most_in_flight(producer.accumulator)
        futures = [await producer.send("t", b"v%03d" % i + b"x" * 60) for i in range(300)]
        results = [await f for f in futures]
    assert [r.offset for r in results] == list(range(300))
    assert [r.value[:4] for r in mini.records("t", 0)] == [b"v%03d" % i for i in range(300)]
    assert len(mini.topics["t"][0].batches) > 50
    assert 1 < most[0] <= 5  # batches of the partition were pipelined, within the limit


def test_retried_batches_go_back_in_sequence_order():
    acc = RecordAccumulator(batch_size=100, linger=1.0, max_in_flight=5)
    _fill(acc, 4)
    drained = [acc.drain(TP) for _ in range(3)]
    for sequence, batch in enumerate(drained):
        batch.attempts, batch.producer_id, batch.base_sequence = 1, 7, sequence
    for batch in (drained[1], drained[0], drained[2]):  # answers handled in any order
        acc.reenqueue(batch, retry_at=0.5)
    queue = acc._queues[TP]
    assert [b.base_sequence for b in queue] == [0, 1, 2, -1]  # then the batch never sent


async def test_idempotent_batches_in_flight_behind_a_failed_one_are_resent_in_order(nursery, autojump_clock):
    # The first batch fails (retriable); the broker refuses those pipelined behind it with
    # OUT_OF_ORDER_SEQUENCE_NUMBER; all are resent in order and written once.
    env = MemEnv()
    mini = MiniCluster(env, (1,))
    await mini.serve_all(nursery)
    mini.create_topic("t", 1)
    mini.fail_next(ApiKey.PRODUCE, ErrorCode.NOT_ENOUGH_REPLICAS, 1)
    async with Producer(env, "b1:9092", linger_ms=0, batch_size=200) as producer:
        assert producer.idempotent
        most = _count_most_in_flight(producer.accumulator)
        futures = [await producer.send("t", b"v%03d" % i + b"x" * 60) for i in range(100)]
        results = [await f for f in futures]
        assert producer.producer_id >= 0
    assert [r.offset for r in results] == list(range(100))
    assert [r.value[:4] for r in mini.records("t", 0)] == [b"v%03d" % i for i in range(100)]
    assert 1 < most[0] <= 5
    assert len(mini.records("t", 0)) == 100


def test_idempotence_allows_at_most_five_in_flight():
    env = MemEnv()
    with pytest.raises(ValueError):
        Producer(env, "b1:9092", enable_idempotence=True, max_in_flight_requests_per_connection=6)
    assert not Producer(env, "b1:9092", max_in_flight_requests_per_connection=6).idempotent  # as Kafka: off
