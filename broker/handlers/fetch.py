"""Fetch v4-16: long-poll reads of whole batches, sent zero-copy from the segment files.

For each partition (in request order) the read starts at the batch holding
fetch_offset and returns whole batches up to min(partition_max_bytes, what is
left of max_bytes); the first partition with data always gets at least one
whole batch even if it is larger (KIP-74), so a big batch never stalls a
consumer. Consumers read up to the high watermark (read_uncommitted) or the
last stable offset (read_committed, answered with the aborted transactions the
records read may hold, which the client drops along with the control batches);
follower replicas (replica_id >= 0) up to the log end — and a follower's fetch
offset is its log end, which the leader records (Partition.on_follower_fetch: ISR
expansion, HW advance) before its first read, so the answer carries the HW this very fetch may have moved; the
re-reads of a parked follower fetch record nothing (the follower may be gone).

If fewer than min_bytes are available and no partition has an error, the
request waits in the fetch purgatory until a change touches one of its
partitions or max_wait_ms passes. Woken, it re-reads only the partitions that
fired, and only when one may add to its answer (records past its fetch offset,
or an error), so a parked fetch over many partitions shrugs off the rest; at
the deadline it re-reads the ones that fired meanwhile (a moved HW, say).

A fetcher that sends the epoch of its last record (v12+ `last_fetched_epoch`) is checked
against this leader's epoch cache first (broker.fetch_divergence): if its log diverges, the
answer is the diverging epoch and its end offset, with no records, at once, and the fetch
does not count as a follower's progress.

Versions: v12 is flexible; v13 names topics by id (an id that names no topic is answered
UNKNOWN_TOPIC_ID; a local replica of an older topic of the same name, INCONSISTENT_TOPIC_ID);
v15 carries a follower's id in the tagged replica state; v16 answers NOT_LEADER_OR_FOLLOWER
and FENCED_LEADER_EPOCH with the partition's current leader and its endpoint (KIP-951,
broker.leader_hints).

Fetch sessions (KIP-227, broker.fetch_session): v7+ requests may open a
session; an incremental request then reads every partition of its session
(each one's cached fetch offset is recorded as a follower fetch, which keeps
the ISR's caught-up times fresh) and answers only the partitions with
something new. A parked incremental fetch answers with that same view when it
wakes.
"""
from __future__ import annotations

import uuid

from broker.authorization import cluster_allowed, topic_allowed
from broker.fetch_divergence import diverging_epoch
from broker.leader_hints import add_fetch_leader_hints
from broker.records_slice import RecordsSlice
from broker.replication_throttle import LEADER
from metadata.acls import AclOperation
from broker.request_caps import Pacer
from storage.log import OffsetOutOfRangeError
from wire.error_codes import ErrorCode
from wire.protocol import FetchResponse

__all__ = ["handle", "error_response", "check_leader_epoch", "replica_topic_error"]

R = FetchResponse
READ_COMMITTED = 1
NO_EPOCH = -1
REPLICA_STATE_VERSION = 15  # the follower's id moves into the tagged replica state
LEADER_HINTS_VERSION = 16
NO_TOPIC_ID = uuid.UUID(int=0)


def _error_partition(index: int, code: int) -> R.PartitionData:
    return R.PartitionData(partition_index=index, error_code=code, high_watermark=-1, last_stable_offset=-1,
                           log_start_offset=-1, aborted_transactions=None, preferred_read_replica=-1,
                           records=b"")


def _now_ms(env) -> int:
    return int(env.now() * 1000)


async def handle(broker, header, request) -> FetchResponse:
    env = broker.env
    now = env.now()
    version = header.api_version
    if version >= REPLICA_STATE_VERSION:
        request.replica_id = request.replica_state.replica_id
    context = broker.fetch_sessions.new_context(request, version, int(now * 1000),
                                                privileged=request.replica_id >= 0)
    if context.error:
        return R(throttle_time_ms=0, error_code=context.error, session_id=0, responses=[])
    if request.replica_id >= 0 and not cluster_allowed(broker, AclOperation.CLUSTER_ACTION):
        return error_response(broker, header, request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    answer = _Answer(broker, request, _named(broker, context), now + max(0, request.max_wait_ms) / 1000,
                     incremental=context.incremental)
    await answer.read_all()
    if not answer.ready():
        await _park(answer)
    session_id, responses = context.respond(answer.responses(), _now_ms(env))
    follower = request.replica_id >= 0
    for t in responses:
        if t.topic:
            broker.metrics.fetched(t.topic, sum(len(p.records) for p in t.partitions), follower=follower)
    response = R(throttle_time_ms=0, error_code=ErrorCode.NONE, session_id=session_id, responses=responses)
    if version >= LEADER_HINTS_VERSION:
        add_fetch_leader_hints(broker, response)
    return response


def _named(broker, context) -> list:
    """[(name or None, topic id, items)] for the context's topics: a v13+ request names them
    by id (None: no topic has that id), an older one by name."""
    image = broker.metadata.image
    out = []
    for key, items in context.topics:
        if context.by_id:
            topic = image.topics_by_id.get(key)
            out.append((None if topic is None else topic.name, key, items))
        else:
            topic = image.topics_by_name.get(key)
            out.append((key, NO_TOPIC_ID if topic is None else topic.topic_id, items))
    return out


async def _park(answer: "_Answer") -> None:
    """Wait in the purgatory; re-read a partition that fired only when it may add to the
    answer (new data past its offset, or an error to report).

    The purgatory serves the deadline (no cancel scope per wait). A re-read is not cut
    short by it: it can only wait in leader_partition, itself bounded by the deadline."""
    broker = answer.broker
    watched, follower, committed = answer.watched, answer.follower, answer.committed

    def may_answer(key) -> bool:
        seen = watched.get(key)
        return seen is not None and _may_answer(broker, key, seen, follower, committed)

    # The purgatory asks may_answer before waking us: most changes (an HW move to a
    # follower, an append below the HW to a consumer) bring this fetch nothing.
    watch = broker.purgatory.watch(watched, wake_on=may_answer)
    stale: dict = {}  # fired, not re-read: their HW or LSO may have moved
    try:
        while await watch.wait_fired(answer.deadline):
            fired = watch.take_fired()
            stale.update(dict.fromkeys(fired))
            if not any(may_answer(key) for key in fired):  # it may have changed back since
                continue
            await answer.reread(stale)
            stale.clear()
            if answer.ready():
                return
        stale.update(dict.fromkeys(watch.take_fired()))  # fired without waking us
    finally:
        watch.close()
    await answer.reread(stale)


def _may_answer(broker, key, seen, follower: bool, committed: bool) -> bool:
    """Whether partition `key` may now add to this fetch's answer: records past the fetch
    offset, or a change (leadership, log start) that turns it into an error."""
    partition, epoch, offset = seen
    current = broker.replicas.get(*key)
    if current is not partition or not current.is_leader or current.leader_epoch != epoch:
        return True
    log = current.log
    if log.log_start_offset > offset:
        return True
    if follower:
        end = log.log_end_offset
    elif committed:
        end = current.last_stable_offset
    else:
        end = log.high_watermark
    return end > offset


class _Answer:
    """The partitions one fetch reads and what it has read of each so far."""

    def __init__(self, broker, request, topics: list, deadline: float, *, incremental: bool = False):
        self.broker = broker
        self.incremental = incremental  # items are the session's CachedPartitions
        self.deadline = deadline
        self.replica_id = request.replica_id
        self.follower = request.replica_id >= 0
        self.committed = request.isolation_level == READ_COMMITTED
        self.max_bytes = request.max_bytes if request.max_bytes > 0 else 0
        self.min_bytes = request.min_bytes
        self.topics = topics  # [(name or None, topic id, [items with partition / fetch_offset / ...])]
        self.parts: list[list] = [[None] * len(items) for _, _, items in topics]
        self.total = 0
        self.errors = 0  # partitions answered with an error or a diverging epoch: answer at once
        self.watched: dict = {}  # key -> (partition, leader epoch, fetch offset) of those read without error
        self._where: dict = {}  # key -> (topic position, partition position)
        self._readable: dict[str, bool] = {}  # topic -> READ allowed (a follower was checked up front)

    def _may_read(self, name: str) -> bool:
        if self.follower:
            return True
        allowed = self._readable.get(name)
        if allowed is None:
            allowed = self._readable[name] = topic_allowed(self.broker, AclOperation.READ, name)
        return allowed

    def ready(self) -> bool:
        return (self.total >= self.min_bytes or self.errors > 0 or not self.watched
                or self.broker.env.now() >= self.deadline)

    def responses(self) -> list:
        """What was read; partitions left unread as unchanged (`_unchanged`) are not in it."""
        return [R.FetchableTopicResponse(topic=name or "", topic_id=topic_id,
                                         partitions=[pd for pd in parts if pd is not None])
                for (name, topic_id, _), parts in zip(self.topics, self.parts)]

    async def read_all(self) -> None:
        pacer = Pacer()
        for ti, (name, _, items) in enumerate(self.topics):
            for pi, item in enumerate(items):
                await pacer.step()
                key = (name, item.partition)
                self._where[key] = (ti, pi)
                if self.incremental and self._unchanged(name, item):
                    partition = item.served[1]
                    self.watched[key] = (partition, partition.leader_epoch, item.fetch_offset)
                else:
                    await self._read(ti, pi, first=True)

    def _unchanged(self, name: str, cached) -> bool:
        """An incremental fetch's fast path: the partition is as its last answer left it (same
        metadata and leader, the fetcher at the log end, HW / LSO / log start as sent), so its
        answer would be "no news" and need not be built. A follower's fetch is still recorded
        (the ISR's caught-up time)."""
        served = cached.served
        if served is None or name is None or not self._may_read(name):
            return False
        topic_image, partition, fetch_offset, leader_epoch, last_fetched_epoch = served
        if (fetch_offset != cached.fetch_offset or leader_epoch != cached.current_leader_epoch
                or last_fetched_epoch != cached.last_fetched_epoch
                or self.broker.metadata.topic(name) is not topic_image
                or self.broker.replicas.get(name, cached.partition) is not partition
                or not partition.is_leader):
            return False
        log = partition.log
        if (log.log_end_offset != fetch_offset or log.high_watermark != cached.high_watermark
                or partition.last_stable_offset != cached.last_stable_offset
                or log.log_start_offset != cached.leader_log_start_offset):
            return False
        return not self.follower or partition.on_follower_fetch(self.replica_id, fetch_offset,
                                                                  log_start_offset=cached.log_start_offset)

    async def reread(self, keys) -> None:
        for key in keys:
            where = self._where.get(key)
            if where is not None and key in self.watched:
                await self._read(*where, first=False)

    async def _read(self, ti: int, pi: int, *, first: bool) -> None:
        name, _, items = self.topics[ti]
        item = items[pi]
        old = self.parts[ti][pi]
        # A re-read replaces what was read before: its bytes do not count against the limit.
        # Nothing changes before the read returns, so a cancelled re-read leaves the answer whole.
        total = self.total if old is None else self.total - len(old.records)
        pd, partition = await self._read_partition(name, item, first, total)
        self.parts[ti][pi] = pd
        self.total = total
        key = (name, item.partition)
        if pd.error_code != ErrorCode.NONE or pd.diverging_epoch.end_offset >= 0:
            self.errors += 1
            self.watched.pop(key, None)
            if self.incremental:
                item.served = None
        else:
            self.total += len(pd.records)
            self.watched[key] = (partition, partition.leader_epoch, item.fetch_offset)
            if self.incremental:
                item.served = (self.broker.metadata.topic(name), partition, item.fetch_offset,
                               item.current_leader_epoch, item.last_fetched_epoch)

    async def _read_partition(self, name: str, p, first: bool, total: int):
        """One partition's answer, `total` bytes being in the answer already (without it)."""
        if name is None:
            return _error_partition(p.partition, ErrorCode.UNKNOWN_TOPIC_ID), None
        if not self._may_read(name):
            return _error_partition(p.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED), None
        found = await self.broker.leader_partition(name, p.partition, self.deadline)
        if isinstance(found, int):
            return _error_partition(p.partition, replica_topic_error(self.broker, name, p.partition, found)), None
        partition = found
        epoch_error = check_leader_epoch(p.current_leader_epoch, partition.leader_epoch)
        if epoch_error:
            return _error_partition(p.partition, epoch_error), None
        log = partition.log
        diverged = diverging_epoch(log, p.last_fetched_epoch, p.fetch_offset)
        if isinstance(diverged, int):
            return _error_partition(p.partition, diverged), None
        if diverged is not None:
            return self._diverging(p.partition, partition, *diverged), partition
        if self.follower:
            max_offset = None
        elif self.committed:
            max_offset = partition.last_stable_offset
        else:
            max_offset = log.high_watermark
        if not log.log_start_offset <= p.fetch_offset <= log.log_end_offset:
            return _error_partition(p.partition, ErrorCode.OFFSET_OUT_OF_RANGE), None
        if self.follower and not partition.on_follower_fetch(self.replica_id, p.fetch_offset, record=first,
                                                             log_start_offset=p.log_start_offset):
            # Not one of this partition's replicas: it must not count toward the ISR or HW.
            return _error_partition(p.partition, ErrorCode.NOT_LEADER_OR_FOLLOWER), None
        limit = max(0, min(p.partition_max_bytes, self.max_bytes - total))
        # Kafka's shouldLeaderThrottle: a throttled follower out of the ISR gets nothing for now.
        throttled = self.follower and self.broker.throttles.should_throttle(
            LEADER, name, p.partition, in_sync=self.replica_id in partition.isr)
        data = None
        # Once the response is full, later partitions get nothing; at the log end there is
        # nothing to read (an idle follower's every partition: skip the read).
        if (limit > 0 or total == 0) and p.fetch_offset < log.log_end_offset and not throttled:
            try:
                data = partition.read(p.fetch_offset, limit, max_offset=max_offset, min_one_batch=total == 0)
            except OffsetOutOfRangeError:  # retention moved the log start meanwhile
                return _error_partition(p.partition, ErrorCode.OFFSET_OUT_OF_RANGE), None
        size = 0 if data is None else data.size
        if self.follower:
            self.broker.throttles.record(LEADER, name, p.partition, size)
        aborted = None
        if self.committed:
            # Those the records read may belong to; the LSO bounds the read (Kafka's upper bound
            # when the read's own end is not known).
            aborted = [R.AbortedTransaction(producer_id=a.producer_id, first_offset=a.first_offset)
                       for a in self.broker.producer_states.aborted_transactions(
                           partition, p.fetch_offset, max_offset)] if size else []
        return R.PartitionData(
            partition_index=p.partition, error_code=ErrorCode.NONE,
            high_watermark=log.high_watermark, last_stable_offset=partition.last_stable_offset,
            log_start_offset=log.log_start_offset,
            aborted_transactions=aborted, preferred_read_replica=-1,
            records=RecordsSlice(data) if size else b""), partition


    @staticmethod
    def _diverging(index: int, partition, epoch: int, end_offset: int) -> R.PartitionData:
        log = partition.log
        pd = R.PartitionData(partition_index=index, error_code=ErrorCode.NONE, high_watermark=log.high_watermark,
                             last_stable_offset=partition.last_stable_offset, log_start_offset=log.log_start_offset,
                             aborted_transactions=None, preferred_read_replica=-1, records=b"")
        pd.diverging_epoch = R.EpochEndOffset(epoch=epoch, end_offset=end_offset)
        return pd


def replica_topic_error(broker, name: str, index: int, code: int) -> int:
    """`code` (leader_partition's refusal), or INCONSISTENT_TOPIC_ID as Kafka answers when the
    replica here belongs to an older topic of that name (deleted and created again, and this
    broker has not caught up)."""
    replica = broker.replicas.get(name, index)
    topic = broker.metadata.topic(name)
    if (code == ErrorCode.NOT_LEADER_OR_FOLLOWER and replica is not None and topic is not None
            and replica.topic_id != topic.topic_id):
        return ErrorCode.INCONSISTENT_TOPIC_ID
    return code


def check_leader_epoch(requested: int, current: int) -> int:
    """KIP-320 fencing: an older epoch is fenced, a newer one is not known here yet."""
    if requested == NO_EPOCH or requested == current:
        return ErrorCode.NONE
    return ErrorCode.FENCED_LEADER_EPOCH if requested < current else ErrorCode.UNKNOWN_LEADER_EPOCH


def error_response(broker, header, request, code: int) -> FetchResponse:
    return R(throttle_time_ms=0, error_code=code, session_id=0, responses=[
        R.FetchableTopicResponse(topic=t.topic, topic_id=t.topic_id,
                                 partitions=[_error_partition(p.partition, code) for p in t.partitions])
        for t in request.topics])
