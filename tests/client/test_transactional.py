"""The transaction manager's states and error classes (raftkafka/client/transactional.py), with
the coordinator's answers given by a stub: partitions asked for while an AddPartitionsToTxn is
out ride in the next one, a failed batch makes the transaction abortable and its abort bumps
the epoch, a fencing error is fatal for good. The whole path against real brokers:
tests/e2e/test_transactions.py."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import trio

from raftkafka.client.accumulator import RecordAccumulator
from raftkafka.client.errors import KafkaError, error_for
from raftkafka.client.transactional import ConsumerGroupMetadata, TransactionManager
from wire.error_codes import ErrorCode


class StubProducer:
    def __init__(self):
        self.env = SimpleNamespace(now=trio.current_time, sleep=trio.sleep)
        self.producer_id, self.producer_epoch = -1, -1
        self._sequences = {("t", 0): 5}
        self.accumulator = RecordAccumulator(16384, 0.0)
        self._in_flight = 0
        self._progress = trio.Event()
        self.max_block, self.retry_backoff = 1.0, 0.01

    async def flush(self):
        pass

    def _fail(self, batch, error):
        pass


def manager(answers: dict):
    """answers: request name -> list of error codes, answered in turn (then NONE)."""
    producer = StubProducer()
    txm = TransactionManager(producer, "app", 60_000)
    sent = []

    async def call(build, name, **kwargs):
        request = build()
        sent.append((name, request))
        code = (answers.get(name) or [0]).pop(0) if answers.get(name) else 0
        await trio.lowlevel.checkpoint()
        if name == "InitProducerId":
            epoch = sum(1 for n, _ in sent if n == "InitProducerId") - 1
            return SimpleNamespace(error_code=code, producer_id=7, producer_epoch=epoch)
        if name == "AddPartitionsToTxn":
            return SimpleNamespace(results=[SimpleNamespace(name=t.name, results=[
                SimpleNamespace(partition_index=p, error_code=code) for p in t.partitions]) for t in request.topics])
        if name == "TxnOffsetCommit":
            return SimpleNamespace(topics=[SimpleNamespace(name=t.name, partitions=[
                SimpleNamespace(partition_index=p.partition_index, error_code=code) for p in t.partitions])
                for t in request.topics])
        return SimpleNamespace(error_code=code)

    txm._call = call
    return txm, producer, sent


async def test_partitions_asked_for_meanwhile_ride_in_one_request_and_commit_ends_the_transaction():
    txm, producer, sent = manager({})
    await txm.init_transactions()
    assert (producer.producer_id, producer.producer_epoch) == (7, 0) and producer._sequences == {}
    txm.begin_transaction()
    async with trio.open_nursery() as nursery:
        for p in range(3):
            nursery.start_soon(txm.before_send, "t", p)
    await txm.before_send("t", 1)  # already in the transaction: no request
    adds = [sorted((t.name, p) for t in r.topics for p in t.partitions) for n, r in sent if n == "AddPartitionsToTxn"]
    assert sorted(tp for add in adds for tp in add) == [("t", 0), ("t", 1), ("t", 2)] and len(adds) < 3
    await txm.commit()
    assert txm.state == "READY" and [n for n, _ in sent][-1] == "EndTxn" and sent[-1][1].committed


async def test_a_failed_batch_makes_the_transaction_abortable_and_its_abort_bumps_the_epoch():
    txm, producer, sent = manager({})
    await txm.init_transactions()
    txm.begin_transaction()
    await txm.before_send("t", 0)
    txm.batch_failed(SimpleNamespace(producer_id=7), error_for(ErrorCode.REQUEST_TIMED_OUT))
    with pytest.raises(KafkaError, match="REQUEST_TIMED_OUT"):
        await txm.commit()
    with pytest.raises(KafkaError):
        await txm.before_send("t", 1)
    await txm.abort()
    assert [n for n, _ in sent][-2:] == ["EndTxn", "InitProducerId"] and not sent[-2][1].committed
    assert txm.state == "READY" and producer.producer_epoch == 1
    txm.begin_transaction()
    await txm.commit()  # nothing added: no EndTxn
    assert [n for n, _ in sent][-1] == "InitProducerId"


async def test_fencing_is_fatal_for_good():
    txm, producer, sent = manager({"EndTxn": [ErrorCode.PRODUCER_FENCED]})
    await txm.init_transactions()
    txm.begin_transaction()
    await txm.before_send("t", 0)
    with pytest.raises(KafkaError, match="PRODUCER_FENCED"):
        await txm.commit()
    for call in (txm.begin_transaction, txm.abort):
        with pytest.raises(KafkaError, match="PRODUCER_FENCED"):
            result = call()
            if result is not None:
                await result
    assert txm.state == "FATAL_ERROR"


async def test_a_partition_that_could_not_be_added_makes_the_transaction_abortable():
    txm, producer, sent = manager({"AddPartitionsToTxn": [ErrorCode.TOPIC_AUTHORIZATION_FAILED]})
    await txm.init_transactions()
    txm.begin_transaction()
    with pytest.raises(KafkaError, match="TOPIC_AUTHORIZATION_FAILED"):
        await txm.before_send("t", 0)
    assert txm.state == "ABORTABLE_ERROR"
    await txm.abort()  # nothing was added: no EndTxn, and no sequence was used
    assert [n for n, _ in sent] == ["InitProducerId", "AddPartitionsToTxn"] and txm.state == "READY"


async def test_offsets_carry_the_consumers_membership_and_a_stale_one_makes_the_transaction_abortable():
    txm, producer, sent = manager({"TxnOffsetCommit": [0, ErrorCode.ILLEGAL_GENERATION]})
    await txm.init_transactions()
    txm.begin_transaction()
    await txm.send_offsets({("in", 0): 5}, ConsumerGroupMetadata("g", 4, "member-1", "i-1"))
    commit = sent[-1][1]
    assert (commit.group_id, commit.generation_id, commit.member_id, commit.group_instance_id) == (
        "g", 4, "member-1", "i-1")  # KIP-447 (TxnOffsetCommit v3+)
    with pytest.raises(KafkaError, match="ILLEGAL_GENERATION"):  # the coordinator fenced the member
        await txm.send_offsets({("in", 0): 6}, "g")  # a group id alone names no member
    assert (sent[-1][1].generation_id, sent[-1][1].member_id) == (-1, "")
    with pytest.raises(KafkaError, match="ILLEGAL_GENERATION"):
        await txm.commit()  # abortable: the transaction must be aborted
    await txm.abort()
    assert txm.state == "READY"
