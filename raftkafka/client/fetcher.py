"""Consumer fetch state, sans-IO: positions, fetch requests, response parsing.

`FetchState` knows each assigned partition's position (next offset to return),
whether it is paused, and what was fetched but not yet handed out. It builds
one Fetch request per leader and turns a Fetch response into buffered
records, skipping control batches and records below the position (a batch
may start before the offset asked for). With isolation level read_committed it
also drops the batches of the aborted transactions the broker lists, as Kafka's
consumer: a producer's transactional batches are dropped from the first offset of
its aborted transaction until its ABORT marker. A partition is fetched again, from the
end of its buffer, once fewer than `prefetch_below` records wait there, so the
next answer is on its way while the application works through the last ones.
Errors come back as a per-partition verdict for the driver: reset the offset,
refresh metadata, or raise.

A request names each topic both ways, by name and by id, so it is good for any version:
Fetch v13+ (topics by id) when every topic's id is known from Metadata, else v11. From v16 a
NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH answer names the partition's new leader and its
endpoint (KIP-951): `leader_hints` reads them for the cluster's metadata. Like Kafka's
consumer, we send no last fetched epoch (our positions are validated through Metadata's
leader epochs, KIP-320).
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from itertools import repeat
from typing import NamedTuple

from raftkafka.client.errors import KafkaError, error_for
from wire.batch_header import HEADER_SIZE, iter_batches
from wire.error_codes import ErrorCode
from wire.errors import DecodeError
from wire.protocol import FetchRequest
from wire.records import ControlType, decode_records, parse_control_record
from wire.records_fast import decode_columns

__all__ = ["ConsumerRecord", "PartitionState", "FetchState", "TopicPartition", "LeaderHint", "FETCH_MAX_VERSION",
           "FETCH_BY_NAME_MAX_VERSION", "fetch_max_version", "leader_hints"]

FETCH_MAX_VERSION = 16
FETCH_BY_NAME_MAX_VERSION = 11  # for a request with a topic whose id we do not know
NO_TOPIC_ID = FetchRequest.FetchTopic().topic_id  # the all-zero id: none
HINTED = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH)

TopicPartition = tuple[str, int]


class LeaderHint(NamedTuple):
    leader_id: int
    leader_epoch: int
    endpoint: tuple[str, int, str | None] | None  # (host, port, rack) if the answer carried it


class ConsumerRecord(NamedTuple):  # a tuple: one is made per record, at C speed
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int  # 0 = CreateTime, 1 = LogAppendTime
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


@dataclass(slots=True)
class PartitionState:
    position: int | None = None  # None: to be resolved (committed offset or reset policy)
    reset: str | None = None  # "earliest"/"latest": resolve with ListOffsets, not the committed offset
    paused: bool = False
    high_watermark: int = -1
    log_start_offset: int = -1
    buffered: deque = field(default_factory=deque)
    buffered_end: int = -1  # the position once `buffered` is consumed

    def fetch_position(self) -> int | None:
        """Where the next fetch starts: after what is buffered."""
        return self.buffered_end if self.buffered else self.position


class FetchState:
    def __init__(self, *, max_partition_bytes: int = 1_048_576, isolation_level: int = 0, prefetch_below: int = 1):
        self.max_partition_bytes = max_partition_bytes
        self.prefetch_below = prefetch_below
        self.isolation_level = isolation_level
        self.partitions: dict[TopicPartition, PartitionState] = {}

    # ------------------------------------------------------------------ assignment and positions

    def assign(self, partitions) -> None:
        """Set the assignment; kept partitions keep their position."""
        wanted = set(partitions)
        self.partitions = {tp: self.partitions.get(tp) or PartitionState() for tp in sorted(wanted)}

    def seek(self, tp: TopicPartition, offset: int | None, reset: str | None = None) -> None:
        state = self._state(tp)
        state.position, state.reset = offset, reset
        state.buffered.clear()
        state.buffered_end = -1

    def _state(self, tp: TopicPartition) -> PartitionState:
        state = self.partitions.get(tp)
        if state is None:
            raise KafkaError(f"{tp[0]}-{tp[1]} is not assigned to this consumer", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return state

    def unresolved(self) -> list[TopicPartition]:
        return [tp for tp, s in self.partitions.items() if s.position is None]

    def fetchable(self) -> list[TopicPartition]:
        return [tp for tp, s in self.partitions.items()
                if s.position is not None and not s.paused and len(s.buffered) < self.prefetch_below]

    # ------------------------------------------------------------------ requests

    def build_request(self, partitions: list[TopicPartition], *, max_wait_ms: int, min_bytes: int,
                      max_bytes: int, leader_epoch=lambda topic, partition: -1,
                      topic_id=lambda topic: None) -> FetchRequest:
        """`leader_epoch(topic, partition)`: the epoch of the leader we mean to fetch from; a
        broker whose own epoch differs answers FENCED/UNKNOWN_LEADER_EPOCH instead of serving
        (KIP-320), so a stale leader can neither feed us nor send us back with OUT_OF_RANGE.
        `topic_id(topic)`: the topic's id (None: not known; see `fetch_max_version`)."""
        topics: dict[str, list] = {}
        for topic, partition in sorted(partitions):
            topics.setdefault(topic, []).append(FetchRequest.FetchPartition(
                partition=partition, current_leader_epoch=leader_epoch(topic, partition),
                fetch_offset=self.partitions[(topic, partition)].fetch_position(),
                partition_max_bytes=self.max_partition_bytes))
        return FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
                            isolation_level=self.isolation_level,
                            topics=[FetchRequest.FetchTopic(topic=t, topic_id=topic_id(t) or NO_TOPIC_ID, partitions=ps)
                                    for t, ps in topics.items()])

    def handle_response(self, request: FetchRequest, response) -> tuple[int, list[TopicPartition], list[KafkaError]]:
        """Buffer what came back. Returns (records buffered, partitions whose leader moved, fatal errors).

        Answers for partitions whose position changed meanwhile (seek, reassignment) are dropped.
        """
        asked = {(t.topic, p.partition): p.fetch_offset for t in request.topics for p in t.partitions}
        count, stale, errors = 0, [], []
        if response.error_code:
            return 0, sorted(asked), [error_for(response.error_code, context="Fetch")]
        names = _names(request)
        for t in response.responses:
            for p in t.partitions:
                tp = (t.topic or names.get(t.topic_id, ""), p.partition_index)
                state = self.partitions.get(tp)
                if state is None or tp not in asked or state.position is None \
                        or state.fetch_position() != asked[tp]:
                    continue
                code = ErrorCode.of(p.error_code)
                if code == ErrorCode.NONE:
                    state.high_watermark, state.log_start_offset = p.high_watermark, p.log_start_offset
                    try:
                        aborted = p.aborted_transactions if self.isolation_level == 1 else None
                        count += self._buffer(tp, state, p.records, aborted)
                    except DecodeError as exc:
                        errors.append(KafkaError(f"{tp[0]}-{tp[1]}: cannot decode the record batch at or after "
                                                 f"offset {state.position}: {exc}; seek past it to continue",
                                                 ErrorCode.CORRUPT_MESSAGE))
                elif code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    if not state.buffered:  # else the fetch after the buffer is read meets it again
                        state.position, state.reset = None, "default"
                elif code.invalid_metadata or code.retriable:
                    stale.append(tp)
                else:
                    errors.append(error_for(code, context=f"Fetch {tp[0]}-{tp[1]}"))
        return count, stale, errors

    def _buffer(self, tp: TopicPartition, state: PartitionState, records, aborted=None) -> int:
        if not records:
            return 0
        buf = memoryview(records)  # batches are sliced out of it without copies
        topic, partition = tp
        position = state.fetch_position()
        end = position
        buffered = state.buffered
        # (first offset, producer id) of aborted transactions not yet reached, and the producers
        # whose aborted transaction the batches are in now.
        upcoming = sorted((a.first_offset, a.producer_id) for a in aborted or ())
        aborting: set[int] = set()
        try:
            for pos, header in iter_batches(buf):
                next_offset = header.base_offset + header.last_offset_delta + 1
                while upcoming and upcoming[0][0] <= next_offset - 1:
                    aborting.add(upcoming.pop(0)[1])
                if header.producer_id in aborting and header.is_transactional:
                    if header.is_control and _is_abort_marker(header, buf[pos + HEADER_SIZE:pos + header.size]):
                        aborting.discard(header.producer_id)
                    end = max(end, next_offset)
                    continue
                if next_offset <= position:
                    continue
                if not header.is_control:
                    offsets, timestamps, keys, values, headers = decode_columns(
                        header, buf[pos + HEADER_SIZE:pos + header.size], min_offset=position)
                    # ConsumerRecords built in C: the tuple of each record's fields made by zip
                    # becomes the NamedTuple without its Python-level __new__.
                    buffered.extend(map(tuple.__new__, repeat(ConsumerRecord), zip(
                        repeat(topic), repeat(partition), offsets, timestamps,
                        repeat(1 if header.log_append_time else 0), keys, values, headers)))
                end = max(end, next_offset)
        except DecodeError:
            # Hand out the records before the bad batch (decoded whole or not at all); the next
            # fetch starts at that batch and raises. Nothing before it: raise now.
            if not buffered:
                raise
        state.buffered_end = end
        if not buffered:
            state.position = end  # only control or compacted-away records: move past them
            state.buffered_end = -1
        return len(buffered)

    # ------------------------------------------------------------------ handing out

    def take(self, max_records: int) -> list[ConsumerRecord]:
        out: list[ConsumerRecord] = []
        for state in self.partitions.values():
            if state.paused:
                continue
            buffered = state.buffered
            if buffered:
                wanted = max_records - len(out)
                if wanted >= len(buffered):
                    out += buffered
                    buffered.clear()
                else:
                    popleft = buffered.popleft
                    out += [popleft() for _ in range(wanted)]
                state.position = out[-1].offset + 1
            if not buffered and state.buffered_end >= 0:
                state.position = max(state.position, state.buffered_end)
                state.buffered_end = -1
            if len(out) >= max_records:
                break
        return out


def _is_abort_marker(header, body: bytes) -> bool:
    records = decode_records(header, body)
    return bool(records) and parse_control_record(records[0]).type == ControlType.ABORT


def _names(request: FetchRequest) -> dict:
    """Topic id -> name for the topics `request` asks for (an answer of v13+ names only ids)."""
    return {t.topic_id: t.topic for t in request.topics if t.topic_id != NO_TOPIC_ID}


def fetch_max_version(request: FetchRequest) -> int:
    """The newest Fetch version `request` is good for: by id only when every topic has one."""
    if all(t.topic_id != NO_TOPIC_ID for t in request.topics):
        return FETCH_MAX_VERSION
    return FETCH_BY_NAME_MAX_VERSION


def leader_hints(request: FetchRequest, response) -> dict[TopicPartition, LeaderHint]:
    """KIP-951 (Fetch v16+): the new leader each refused partition's answer names."""
    names = _names(request)
    endpoints = {e.node_id: (e.host, e.port, e.rack) for e in response.node_endpoints or ()}
    hints = {}
    for t in response.responses:
        for p in t.partitions:
            leader = p.current_leader
            if p.error_code in HINTED and leader.leader_id >= 0 and leader.leader_epoch >= 0:
                hints[(t.topic or names.get(t.topic_id, ""), p.partition_index)] = LeaderHint(
                    leader.leader_id, leader.leader_epoch, endpoints.get(leader.leader_id))
    return hints
