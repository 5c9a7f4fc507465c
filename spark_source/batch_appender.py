"""Idempotent appends of whole record batches over a client `Cluster` (the sink's write path).

The sink encodes its rows into record sections itself (`arrow_encode`), so it needs no
per-record producer, only what makes a re-sent batch harmless: one producer id
(InitProducerId, no transactional id) and, per partition, consecutive sequence numbers.

Appends go in rounds: each round sends every partition's next batches, up to 5 of each
(the last 5 are what the broker deduplicates, Kafka's limit for an idempotent producer),
in up to 5 Produce requests per leader: request i holds the i-th batch of each of that
leader's partitions, and they go on the leader's connection in that order, each sent
before the next is written (the broker answers a connection's requests in order).
Sections may also keep arriving while earlier ones are in flight (`append_from`: the sink
appends a task's first rows while Spark still hands it the rest); each round takes what
has arrived. After a retriable error or a lost answer the same bytes (same producer id and
sequence) go again in the next round, to the leader of the moment, until
`delivery_timeout_s` has passed, with the partition's batches behind it (the broker
refuses those with OUT_OF_ORDER_SEQUENCE_NUMBER while the earlier one is missing): a copy
that had landed is dropped by the broker, which answers DUPLICATE_SEQUENCE_NUMBER (success
here). A batch that cannot be delivered ends that partition's appends (sections that
arrive for it later are dropped) and the call raises AmbiguousWriteError (its outcome is
unknown); the producer id is given up, as a later batch under it would follow a gap in
the sequence.

With idempotence off (the sink's `kafka.enable.idempotence=false`, or acks other than
all) batches carry no producer id, one batch of a partition is in flight at a time (so a
retry keeps their order) and they are still re-sent on retriable errors, as Kafka's
producer does then: a lost answer may duplicate a batch.
"""
from __future__ import annotations

import math
from collections import deque

import trio

from raftkafka.client.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError, error_for
from wire import records
from wire.compression import Compression
from wire.error_codes import ErrorCode
from wire.protocol import InitProducerIdRequest, ProduceRequest

__all__ = ["AmbiguousWriteError", "BatchAppender", "Section", "seal_batch"]

Section = tuple[tuple[str, int], bytes | memoryview, int]  # (topic partition, records section, record count)
# Batches of a partition in flight at once (idempotent): the last 5 are what the broker deduplicates.
_PIPELINE = 5


class AmbiguousWriteError(KafkaError):
    """Some records of a write were not acknowledged: they may or may not have been appended."""


class BatchAppender:
    def __init__(self, *, acks: int = -1, idempotent: bool = True, compression: Compression = Compression.NONE,
                 request_timeout_s: float = 30.0, delivery_timeout_s: float = 120.0, retry_backoff_s: float = 0.1):
        self.acks, self.idempotent, self.compression = acks, idempotent, compression
        self.request_timeout_s, self.delivery_timeout_s = request_timeout_s, delivery_timeout_s
        self.retry_backoff_s = retry_backoff_s
        self._identity: tuple[int, int] | None = None  # (producer id, epoch)
        self._sequences: dict[tuple[str, int], int] = {}
        self._identity_lock: trio.Lock | None = None

    async def append(self, cluster, sections: list[Section], timestamp_ms: int) -> None:
        """Append each section as one batch to its partition (in the given order per partition)."""
        send, receive = trio.open_memory_channel(math.inf)
        for section in sections:
            send.send_nowait(section)
        send.close()
        await self.append_from(cluster, receive, timestamp_ms)

    async def append_from(self, cluster, incoming: trio.MemoryReceiveChannel, timestamp_ms: int) -> None:
        """As `append`, for sections that arrive on `incoming` until it is closed, while earlier ones
        are in flight: each round sends what has arrived by then."""
        queued: dict[tuple[str, int], deque[tuple[bytes, int]]] = {}
        depth = _PIPELINE if self.idempotent else 1
        sending: dict[tuple[str, int], list[_Batch]] = {}  # per partition, in sequence order
        failures: list[str] = []
        given_up: set[tuple[str, int]] = set()  # partitions whose later sections would follow a gap
        arriving = True
        while arriving or queued or sending:
            while arriving:  # take what has arrived; wait for more only when nothing else is to be done
                try:
                    tp, section, count = incoming.receive_nowait() if queued or sending else await incoming.receive()
                except trio.WouldBlock:
                    break
                except trio.EndOfChannel:
                    arriving = False
                    break
                if tp not in given_up:
                    queued.setdefault(tp, deque()).append((section, count))
            for tp in sorted(queued):
                window = sending.setdefault(tp, [])
                while len(window) < depth and tp in queued:
                    section, count = queued[tp].popleft()
                    if not queued[tp]:
                        del queued[tp]
                    window.append(await self._seal(cluster, tp, section, count, timestamp_ms))
            errors = await self._send_round(cluster, sending)
            retry = False
            for tp in sorted(sending):
                kept: list[_Batch] = []
                for i, batch in enumerate(sending[tp]):
                    error = errors[(tp, i)]
                    if error is None:
                        continue  # acknowledged (or a duplicate of a copy that had landed)
                    behind = bool(kept) and error.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
                    if (_retriable(error) or behind) and trio.current_time() < batch.deadline:
                        kept.append(batch)  # again next round, in sequence order
                        continue
                    kept = []  # the rest would follow a gap: not sent again
                    queued.pop(tp, None)
                    given_up.add(tp)
                    if self._identity is not None and self._identity[0] == batch.producer_id:
                        self._identity = None
                    failures.append(f"{tp[0]}-{tp[1]}: {error}")
                    break
                if kept:
                    sending[tp] = kept
                    retry = True
                else:
                    del sending[tp]
            if retry:
                await trio.sleep(self.retry_backoff_s)
                try:
                    await cluster.refresh()
                except KafkaError:
                    pass  # the next round looks again
        if failures:
            raise AmbiguousWriteError(f"{len(failures)} partition(s) not fully acknowledged: {failures[0]}")

    async def _seal(self, cluster, tp, section: bytes | memoryview, count: int, timestamp_ms: int) -> "_Batch":
        producer_id, epoch, sequence = await self._next_sequence(cluster, tp, count)
        data = seal_batch(section, count, timestamp_ms=timestamp_ms, producer_id=producer_id, producer_epoch=epoch,
                          base_sequence=sequence, compression=self.compression)
        return _Batch(data, producer_id, trio.current_time() + self.delivery_timeout_s)

    async def _send_round(self, cluster, sending: dict) -> dict[tuple[tuple[str, int], int], KafkaError | None]:
        """Each partition's batches to its leader, all leaders at once: the outcome of the i-th
        batch of partition tp under (tp, i)."""
        errors: dict[tuple[tuple[str, int], int], KafkaError | None] = {}
        by_leader: dict[int, list[tuple[str, int]]] = {}
        for tp in sorted(sending):
            try:
                await cluster.topic(tp[0])
            except KafkaError as exc:
                errors.update(((tp, i), exc) for i in range(len(sending[tp])))
                continue
            leader = cluster.leader(*tp)
            if leader < 0:
                error = KafkaConnectionError(f"{tp[0]}-{tp[1]} has no leader now")
                errors.update(((tp, i), error) for i in range(len(sending[tp])))
            else:
                by_leader.setdefault(leader, []).append(tp)
        async with trio.open_nursery() as nursery:
            for leader, tps in sorted(by_leader.items()):
                requests = [{tp: sending[tp][i].data for tp in tps if i < len(sending[tp])}
                            for i in range(max(len(sending[tp]) for tp in tps))]
                nursery.start_soon(self._send_in_order, cluster, leader, requests, errors)
        return errors

    async def _send_in_order(self, cluster, leader: int, requests: list[dict], errors: dict) -> None:
        """The leader's requests on its connection in order: each one written before the next starts."""
        async with trio.open_nursery() as nursery:
            for i, batches in enumerate(requests):
                sent = trio.Event()
                nursery.start_soon(self._send_to, cluster, leader, i, batches, errors, sent)
                await sent.wait()

    async def _next_sequence(self, cluster, tp, count: int) -> tuple[int, int, int]:
        if not self.idempotent:
            return -1, -1, -1
        if self._identity_lock is None:
            self._identity_lock = trio.Lock()
        async with self._identity_lock:
            if self._identity is None:
                response = await cluster.request_any(
                    InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000))
                if response.error_code:
                    raise error_for(response.error_code, context="InitProducerId")
                self._identity = (response.producer_id, response.producer_epoch)
                self._sequences.clear()
        sequence = self._sequences.get(tp, 0)
        self._sequences[tp] = (sequence + count) & 0x7FFFFFFF
        return (*self._identity, sequence)

    async def _send_to(self, cluster, leader: int, index: int, batches: dict, errors: dict,
                       sent: trio.Event) -> None:
        topics: dict[str, list] = {}
        for (topic, partition), data in sorted(batches.items()):
            topics.setdefault(topic, []).append(ProduceRequest.PartitionProduceData(index=partition, records=data))
        request = ProduceRequest(transactional_id=None, acks=self.acks, timeout_ms=int(self.request_timeout_s * 1000),
                                 topic_data=[ProduceRequest.TopicProduceData(name=t, partition_data=p)
                                             for t, p in topics.items()])
        try:
            connection = await cluster.connection(leader)
            if self.acks == 0:
                await connection.request(request, expect_response=False, sent=sent)
                errors.update(((tp, index), None) for tp in batches)
                return
            response = await connection.request(request, sent=sent)
        except KafkaError as exc:
            errors.update(((tp, index), exc) for tp in batches)
            return
        finally:
            sent.set()  # also when it failed before the request went out
        answers = {(t.name, p.index): p for t in response.responses for p in t.partition_responses}
        for tp in batches:
            answer = answers.get(tp)
            if answer is None:
                errors[(tp, index)] = error_for(ErrorCode.UNKNOWN_SERVER_ERROR, "no answer for the partition",
                                                f"{tp[0]}-{tp[1]}")
            elif answer.error_code in (ErrorCode.NONE, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
                errors[(tp, index)] = None
            else:
                errors[(tp, index)] = error_for(answer.error_code, answer.error_message, f"{tp[0]}-{tp[1]}")


class _Batch:
    """A sealed batch in flight: its bytes are re-sent unchanged until answered or out of time."""

    def __init__(self, data: bytes, producer_id: int, deadline: float):
        self.data, self.producer_id, self.deadline = data, producer_id, deadline


def _retriable(error: KafkaError) -> bool:
    return isinstance(error, (KafkaConnectionError, KafkaTimeoutError)) or bool(getattr(error, "retriable", False))


def seal_batch(section: bytes | memoryview, count: int, *, timestamp_ms: int, producer_id: int = -1,
               producer_epoch: int = -1, base_sequence: int = -1, compression: Compression = Compression.NONE) -> bytes:
    """A whole RecordBatch v2 (base offset 0, CreateTime) around a records section of the shape
    `arrow_encode.encode_records` writes: every timestamp `timestamp_ms`, offset deltas 0..count-1."""
    return records.seal_batch(section, count, last_offset_delta=count - 1, base_timestamp=timestamp_ms,
                              max_timestamp=timestamp_ms, producer_id=producer_id, producer_epoch=producer_epoch,
                              base_sequence=base_sequence, compression=compression)
