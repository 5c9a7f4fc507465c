"""The transactional producer's transaction manager (KIP-98, KIP-447), as Kafka's Java producer.

    producer = Producer(env, servers, transactional_id="app-1")
    async with producer:
        await producer.init_transactions()
        await producer.begin_transaction()
        await producer.send("out", b"v", partition=0)
        await producer.send_offsets_to_transaction({("in", 0): 42}, consumer.group_metadata())
        await producer.commit_transaction()          # or abort_transaction()

The producer consults its `TransactionManager`: `send()` asks it first (`before_send`), which
adds the partition to the transaction with AddPartitionsToTxn before the first record for it
is queued (partitions asked for meanwhile ride in the same request); every failed batch is
reported to it (`batch_failed`). States are the Java client's: READY, IN_TRANSACTION,
COMMITTING, ABORTING, ABORTABLE_ERROR, FATAL_ERROR.

Errors, as the Java producer classifies them:
- retriable (coordinator moved or loading, CONCURRENT_TRANSACTIONS, connection loss): the call
  retries, finding the coordinator again, until `max_block_ms` has passed; a timed-out
  init/commit/abort may simply be called again;
- abortable (a batch failed, a partition or the offsets could not be added): the transaction
  can only be aborted; `commit_transaction` raises the error and `abort_transaction` then
  starts over. A batch that failed may have left a sequence gap, so the abort is followed by
  a new InitProducerId (epoch bump) before the next transaction;
- fatal (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH, TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
  ...): another producer took over the transactional id, or this one may not use it; every
  later call raises it and the producer must be closed.
"""
from __future__ import annotations

from dataclasses import dataclass

import trio

from raftkafka.client.errors import (
    KafkaConnectionError, KafkaError, KafkaTimeoutError, error_for, raise_for_code,
)
from wire.error_codes import ErrorCode
from wire.protocol import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    TxnOffsetCommitRequest,
)

__all__ = ["TransactionManager", "ConsumerGroupMetadata", "TransactionAbortedError", "FATAL_ERRORS"]

TopicPartition = tuple[str, int]
_GROUP_KEY, _TRANSACTION_KEY = 0, 1
_CLIENT_ADD_PARTITIONS = 3  # v4+ is the brokers' batched form (KIP-890), not for producers
_COORDINATOR_ERRORS = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})
_RETRY_ERRORS = frozenset({ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.CONCURRENT_TRANSACTIONS,
                           ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.REQUEST_TIMED_OUT})
# The producer can do nothing more with its transactional id (the Java client's fatal errors).
FATAL_ERRORS = frozenset({
    ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.INVALID_PRODUCER_ID_MAPPING,
    ErrorCode.TRANSACTION_COORDINATOR_FENCED, ErrorCode.INVALID_TRANSACTION_TIMEOUT,
    ErrorCode.UNSUPPORTED_VERSION, ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, ErrorCode.INVALID_TXN_STATE,
})

READY, IN_TRANSACTION, COMMITTING, ABORTING = "READY", "IN_TRANSACTION", "COMMITTING", "ABORTING"
UNINITIALIZED, ABORTABLE_ERROR, FATAL_ERROR = "UNINITIALIZED", "ABORTABLE_ERROR", "FATAL_ERROR"


class TransactionAbortedError(KafkaError):
    """The record's transaction was aborted before the record was sent."""


@dataclass(frozen=True)
class ConsumerGroupMetadata:
    """What `send_offsets_to_transaction` needs of the consumer (Consumer.group_metadata())."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


class TransactionManager:
    def __init__(self, producer, transactional_id: str, transaction_timeout_ms: int):
        if not transactional_id:
            raise ValueError("transactional_id must not be empty")
        self.producer = producer
        self.env = producer.env
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = int(transaction_timeout_ms)
        self.state = UNINITIALIZED
        self.error: KafkaError | None = None  # the abortable or fatal error
        self.partitions: set[TopicPartition] = set()  # in the coordinator's transaction
        self._pending: set[TopicPartition] = set()  # asked for, not yet added
        self._add_lock = trio.Lock()
        self._offsets_added = False  # AddOffsetsToTxn done: EndTxn is needed even with no partitions
        self._needs_epoch_bump = False  # a batch failed: its sequence may be missing from the log
        self._coordinator: int | None = None

    # ------------------------------------------------------------------ the application's calls

    async def init_transactions(self) -> None:
        """Get the producer id and epoch of the transactional id, fencing any older producer of it
        (the coordinator aborts a transaction it left open)."""
        self._require(UNINITIALIZED, READY)
        await self._init_producer_id()
        self.state = READY

    def begin_transaction(self) -> None:
        self._require(READY)
        self.partitions.clear()
        self._pending.clear()
        self._offsets_added = False
        self.state = IN_TRANSACTION

    async def send_offsets(self, offsets: dict, group) -> None:
        """AddOffsetsToTxn, then TxnOffsetCommit to the group coordinator: the offsets become the
        group's committed offsets if and only if the transaction commits."""
        self._require(IN_TRANSACTION)
        group = ConsumerGroupMetadata(group) if isinstance(group, str) else group
        group_id = group.group_id
        try:
            response = await self._call(lambda: AddOffsetsToTxnRequest(
                transactional_id=self.transactional_id, producer_id=self.producer.producer_id,
                producer_epoch=self.producer.producer_epoch, group_id=group_id), "AddOffsetsToTxn")
            raise_for_code(response.error_code, context="AddOffsetsToTxn")
            self._offsets_added = True
            await self._txn_offset_commit(offsets, group)
        except KafkaError as exc:
            self._fail(exc)
            raise

    async def commit(self) -> None:
        if self.state == IN_TRANSACTION:
            await self.producer.flush()  # every record of the transaction has its answer
            if self.state == ABORTABLE_ERROR:
                raise self.error
            self.state = COMMITTING
        self._require(COMMITTING)
        await self._end(True)
        self.state = READY

    async def abort(self) -> None:
        if self.state in (IN_TRANSACTION, ABORTABLE_ERROR):
            self.state = ABORTING
        self._require(ABORTING)
        await self._drop_unsent()
        await self._end(False)  # a retried abort after a timeout resends it: the coordinator answers NONE
        if self._needs_epoch_bump:
            await self._init_producer_id()
        self.state = READY

    # ------------------------------------------------------------------ the producer's hooks

    async def before_send(self, topic: str, partition: int) -> None:
        """Called by send(): the partition must be in the transaction before its first record."""
        self._require(IN_TRANSACTION)
        tp = (topic, partition)
        if tp in self.partitions:
            return
        self._pending.add(tp)
        async with self._add_lock:  # the holder's request carries every partition pending by then
            if tp in self.partitions:
                return
            self._require(IN_TRANSACTION)
            adding = sorted(self._pending)
            try:
                await self._add_partitions(adding)
            except KafkaError as exc:
                self._fail(exc)
                raise
            self.partitions.update(adding)
            self._pending.difference_update(adding)

    def batch_failed(self, batch, error: BaseException) -> None:
        """A batch of the transaction failed (after its retries, or dropped by an abort)."""
        if batch.producer_id >= 0:  # it had a sequence: the log may or may not hold it
            self._needs_epoch_bump = True
        if self.state != ABORTING:
            self._fail(error if isinstance(error, KafkaError) else KafkaError(str(error)))

    # ------------------------------------------------------------------ requests

    async def _init_producer_id(self) -> None:
        response = await self._call(lambda: InitProducerIdRequest(
            transactional_id=self.transactional_id, transaction_timeout_ms=self.transaction_timeout_ms),
            "InitProducerId")
        if response.error_code:
            error = error_for(response.error_code, context=f"InitProducerId {self.transactional_id}")
            self._fail(error)
            raise error
        self.producer.producer_id, self.producer.producer_epoch = response.producer_id, response.producer_epoch
        self.producer._sequences.clear()
        self._needs_epoch_bump = False

    async def _add_partitions(self, partitions: list[TopicPartition]) -> None:
        topics: dict[str, list[int]] = {}
        for topic, partition in partitions:
            topics.setdefault(topic, []).append(partition)
        response = await self._call(lambda: AddPartitionsToTxnRequest(
            transactional_id=self.transactional_id, producer_id=self.producer.producer_id,
            producer_epoch=self.producer.producer_epoch,
            topics=[AddPartitionsToTxnRequest.V3AndBelowTopic(name=t, partitions=ps)
                    for t, ps in sorted(topics.items())]), "AddPartitionsToTxn", version=_CLIENT_ADD_PARTITIONS,
            error_of=lambda r: _worst(p.error_code for t in r.results for p in t.results))
        for t in response.results:
            for p in t.results:
                raise_for_code(p.error_code, context=f"AddPartitionsToTxn {t.name}-{p.partition_index}")

    async def _end(self, commit: bool) -> None:
        if self.partitions or self._offsets_added:  # else the coordinator knows of no transaction
            response = await self._call(lambda: EndTxnRequest(
                transactional_id=self.transactional_id, producer_id=self.producer.producer_id,
                producer_epoch=self.producer.producer_epoch, committed=commit), "EndTxn")
            if response.error_code:
                error = error_for(response.error_code, context=f"EndTxn {'commit' if commit else 'abort'}")
                self._fail(error)
                raise error

    async def _txn_offset_commit(self, offsets: dict, group: "ConsumerGroupMetadata") -> None:
        """v3+ (KIP-447) also names the consumer's generation and member: the group coordinator
        refuses the offsets of a consumer that a rebalance has replaced."""
        group_id = group.group_id
        topics: dict[str, list] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            topics.setdefault(topic, []).append(TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                partition_index=partition, committed_offset=offset, committed_metadata=""))
        response = await self._call(lambda: TxnOffsetCommitRequest(
            transactional_id=self.transactional_id, group_id=group_id, producer_id=self.producer.producer_id,
            producer_epoch=self.producer.producer_epoch, generation_id=group.generation_id,
            member_id=group.member_id, group_instance_id=group.group_instance_id,
            topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=t, partitions=ps)
                    for t, ps in sorted(topics.items())]), "TxnOffsetCommit", key=group_id, key_type=_GROUP_KEY,
            error_of=lambda r: _worst(p.error_code for t in r.topics for p in t.partitions))
        for t in response.topics:
            for p in t.partitions:
                raise_for_code(p.error_code, context=f"TxnOffsetCommit {t.name}-{p.partition_index}")

    async def _call(self, build, name: str, *, key: str | None = None, key_type: int = _TRANSACTION_KEY,
                    error_of=lambda r: r.error_code, version: int | None = None):
        """Send to the coordinator of `key` (the transactional id), finding it first; retries a
        moved or loading coordinator, CONCURRENT_TRANSACTIONS and lost connections until max_block."""
        key = self.transactional_id if key is None else key
        coordinator = self._coordinator if key_type == _TRANSACTION_KEY else None
        deadline = self.env.now() + self.producer.max_block
        last = ""
        while True:
            try:
                if coordinator is None:
                    coordinator = await self._find_coordinator(key, key_type)
                connection = await self.producer.cluster.connection(coordinator)
                body = build()
                response = await connection.request(body, version=None if version is None else
                                                    connection.version_for(body.API_KEY, version))
                code = ErrorCode.of(error_of(response))
                if code not in _COORDINATOR_ERRORS and code not in _RETRY_ERRORS:
                    if key_type == _TRANSACTION_KEY:
                        self._coordinator = coordinator
                    return response
                last = code.name
                if code in _COORDINATOR_ERRORS:
                    coordinator = None
            except KafkaConnectionError as exc:
                coordinator, last = None, str(exc)
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                coordinator, last = None, str(exc)
            if key_type == _TRANSACTION_KEY:
                self._coordinator = None
            if self.env.now() >= deadline:
                raise KafkaTimeoutError(f"{name} {self.transactional_id}: no answer within max_block_ms ({last})")
            await self.env.sleep(self.producer.retry_backoff)

    async def _find_coordinator(self, key: str, key_type: int) -> int:
        response = await self.producer.cluster.request_any(FindCoordinatorRequest(key=key, key_type=key_type))
        if response.error_code:
            raise error_for(response.error_code, response.error_message, f"FindCoordinator {key}")
        if response.node_id not in self.producer.cluster.brokers:
            await self.producer.cluster.refresh()
        return response.node_id

    # ------------------------------------------------------------------ state

    async def _drop_unsent(self) -> None:
        """Fail the batches not yet sent (they belong to the aborted transaction) and wait for the
        ones in flight, whose answers could otherwise arrive in the next transaction."""
        producer = self.producer
        while True:
            for batch in producer.accumulator.drop_all():
                producer.accumulator.finished(batch)
                producer._fail(batch, TransactionAbortedError(
                    f"{batch.topic}-{batch.partition}: transaction aborted before the record was sent"))
            if not producer._in_flight:
                return
            await producer._progress.wait()

    def _require(self, *states: str) -> None:
        if self.state in (FATAL_ERROR, ABORTABLE_ERROR) and self.state not in states:
            raise self.error
        if self.state not in states:
            raise KafkaError(f"transactional producer {self.transactional_id} is {self.state}, "
                             f"not {' or '.join(states)}", ErrorCode.INVALID_TXN_STATE)

    def _fail(self, error: KafkaError) -> None:
        """Move to the abortable or the fatal error state (a fatal error stays)."""
        if self.state == FATAL_ERROR:
            return
        fatal = error.code in FATAL_ERRORS and not isinstance(error, TransactionAbortedError)
        if fatal:
            self.state, self.error = FATAL_ERROR, error
        elif self.state in (IN_TRANSACTION, COMMITTING):  # an abort that failed may be retried
            self.state, self.error = ABORTABLE_ERROR, error


def _worst(codes) -> int:
    """One partition-level code for the retry decision: a retriable one if any, else the first error."""
    codes = [c for c in codes if c]
    for code in codes:
        if code in _COORDINATOR_ERRORS or code in _RETRY_ERRORS:
            return code
    return codes[0] if codes else 0
