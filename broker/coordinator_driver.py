"""The trio driver shared by the sans-IO coordinators that keep their state in an internal
topic: the group coordinator on `__consumer_offsets` (broker.group_driver) and the
transaction coordinator on `__transaction_state` (broker.txn_driver). Requests, timers,
appends, and loading on leadership changes.

    driver = SubclassDriver(broker)          # Broker builds one of each
    broker.publish(...) -> driver.publish    # a metadata publisher (after the replica manager)
    await nursery.start(driver.run)

Handlers call `await driver.call(lambda token, now: coordinator.<api>(token, ..., now=now))`
for requests that may be held or must wait for their records, and the coordinator's
plain methods (with `driver.now()`) for the rest. `now` is a broker.groups.timers.Now:
the Env's monotonic clock (env.now(), in ms) for every deadline the coordinator keeps,
its wall clock (env.wall_ms()) for the timestamps it writes, as Kafka splits them; a
stepped wall clock moves no timer.

The coordinator core offers: partition_for(key), partitions (index -> PartitionStatus),
config.num_partitions, begin_loading, load_partition(index, records, now, on_skip) (may
return an Output), unload_partition, append_done, next_deadline, tick; the group
coordinator also load_pending_transactions.

Appends: each `PendingAppend` becomes one RecordBatch appended to this broker's leader
replica of the topic's partition (refused up front with NOT_ENOUGH_REPLICAS when the ISR
is below min.insync.replicas, as an acks=all produce would be), and is reported
committed once the partition's high watermark passes it — at once for a lone replica,
when followers catch up with replication — or failed when leadership moves or
the commit timeout passes. Appends of one partition complete in log order.

Leadership: when the image makes us leader of partition p (at some leader epoch) the
coordinator starts LOADING p (clients get COORDINATOR_LOAD_IN_PROGRESS), waits for the
replica manager to have the replica, replays the log to its end and serves — once the
high watermark has reached that end. A new leader's log may end in records its
predecessor appended but never committed (a commit that timed out, say): until the HW
passes them another failover may still drop them, and state served from them could
go back (Kafka's coordinator runtime likewise reads at the last committed offset).
Losing leadership (or a new leader epoch, i.e. someone else led in between) unloads p
first, failing what it held with NOT_COORDINATOR.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass, replace
from typing import Callable

import trio

from broker.controller_channel import CreatableTopic
from broker.groups import Output, PartitionStatus, PendingAppend
from broker.groups.timers import Now
from broker.log_scan import iter_log_batches, marker_commit
from metadata.controller.dynamic_configs import effective_topic_value
from metadata.delta import MetadataDelta
from metadata.image import EMPTY_IMAGE, MetadataImage
from storage.log import LogError, RecordTooLargeError
from wire.batch_header import HEADER_SIZE
from wire.error_codes import ErrorCode
from wire.errors import DecodeError
from wire.records import SimpleRecord, build_batch, decode_records

__all__ = ["CoordinatorDriver"]


_WAKE_KEY = ("", -1)  # a purgatory key no partition has: "the set of pending appends changed"
_NOT_READY_RETRY_S = 0.05
_NOT_READY_GIVE_UP_S = 5.0  # then the other partitions load, and this one is retried
_LOAD_RETRY_S = 1.0


@dataclass(slots=True)
class _InFlight:
    append_id: int
    last_offset: int
    deadline: float  # trio clock


class _Slot:
    __slots__ = ("event", "response")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.response: object = None


class CoordinatorDriver:
    name = "coordinator"
    topic = ""  # the coordinator's internal topic

    def __init__(self, broker, coordinator, *, commit_timeout_ms: int, load_yield_batches: int = 256):
        self.broker = broker
        self.env = broker.env
        self.log = logging.getLogger(type(self).__module__)
        self.coordinator = coordinator
        self.commit_timeout_ms = commit_timeout_ms  # how long an append may wait for the HW
        self.load_yield_batches = load_yield_batches  # batches replayed between yields to the event loop
        self.image: MetadataImage = EMPTY_IMAGE
        self._waiting: dict[int, _Slot] = {}
        self._next_token = 1
        self._pending: dict[int, list[_InFlight]] = {}   # topic partition -> appends, log order
        self._served: dict[int, int] = {}                # topic partition -> leader epoch we serve
        self._wanted: dict[int, int] = {}                # ... that the latest image says we lead
        self._leadership_changed = trio.Event()
        self._timers_changed = trio.Event()
        self._appended = trio.Event()
        self._creating_topic = False
        self._retry_scheduled = False
        self._awaiting_hw: set[int] = set()             # loaded partitions waiting for the HW
        self._nursery: trio.Nursery | None = None
        self.loads_completed = 0

    def now(self) -> Now:
        """Both clocks, as the coordinator takes them."""
        return Now(monotonic_ms=round(self.env.now() * 1000), wall_ms=self.env.wall_ms())

    def wake_time(self, deadline_ms: int) -> float:
        """The Env clock time (seconds) of a coordinator deadline (monotonic ms)."""
        return deadline_ms / 1000

    # -- metadata publisher -------------------------------------------------------
    def publish(self, delta: MetadataDelta, image: MetadataImage) -> None:
        self.image = image
        topic = image.topics_by_name.get(self.topic)
        wanted: dict[int, int] = {}
        if topic is not None:
            count = len(topic.partitions)
            if count and count != self.coordinator.config.num_partitions and not self.coordinator.partitions:
                # Kafka hashes over the topic's real partition count once it exists.
                self.coordinator.config = replace(self.coordinator.config, num_partitions=count)
            for index in sorted(topic.partitions):
                reg = topic.partitions[index]
                if reg.leader == self.broker.node_id:
                    wanted[index] = reg.leader_epoch
        if wanted != self._wanted:
            self._wanted = wanted
            self._leadership_changed.set()

    # -- lifecycle -----------------------------------------------------------------
    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._leadership_loop)
            nursery.start_soon(self._timer_loop)
            nursery.start_soon(self._commit_loop)
            task_status.started()

    # -- requests --------------------------------------------------------------------
    async def call(self, request: Callable[[int, Now], Output]) -> object:
        """Run `request(token, now)` on the coordinator and wait for the answer to `token`."""
        token = self._next_token
        self._next_token += 1
        slot = self._waiting[token] = _Slot()
        try:
            self.carry_out(request(token, self.now()))
            await slot.event.wait()
            return slot.response
        finally:
            self._waiting.pop(token, None)

    def carry_out(self, out: Output) -> None:
        for completion in out.completions:
            slot = self._waiting.pop(completion.token, None)
            if slot is not None:  # None: the request's connection went away meanwhile
                slot.response = completion.response
                slot.event.set()
        for pending in out.appends:
            self._append(pending)
        self._timers_changed.set()

    # -- the internal topic ------------------------------------------------------------
    def topic_spec(self) -> CreatableTopic:
        """How the internal topic is created on first use."""
        raise NotImplementedError

    def coordinator_for(self, key: str):
        """(error, partition registration) of the key's partition of the internal topic; creates
        the topic in the background the first time it is asked for (COORDINATOR_NOT_AVAILABLE)."""
        topic = self.image.topics_by_name.get(self.topic)
        if topic is None:
            self._create_topic()
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        reg = topic.partitions.get(self.coordinator.partition_for(key))
        if reg is None or reg.leader < 0:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None
        return ErrorCode.NONE, reg

    def _create_topic(self) -> None:
        if self._creating_topic or self._nursery is None:
            return
        self._creating_topic = True
        self._nursery.start_soon(self._create_topic_task)

    async def _create_topic_task(self) -> None:
        topic = self.topic_spec()
        try:
            reply = await self.broker.controller.create_topics([topic])
            for result in reply.results:
                if result.error not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
                    self.log.warning("cannot create %s: %s %s", self.topic, ErrorCode(result.error).name,
                                     result.message or "")
        except Exception as exc:  # the controller is away: the next FindCoordinator retries
            self.log.info("creating %s failed: %s", self.topic, exc)
        finally:
            self._creating_topic = False

    # -- appends -----------------------------------------------------------------------
    def _fail(self, append_id: int, error: ErrorCode) -> None:
        self.carry_out(self.coordinator.append_done(append_id, error, self.now()))

    def _leader_replica(self, index: int):
        partition = self.broker.replicas.get(self.topic, index)
        if partition is None or not partition.is_leader or partition.leader_epoch != self._served.get(index):
            return None
        return partition

    def _append(self, pending: PendingAppend) -> None:
        index = pending.partition
        if not pending.records:
            self._fail(pending.append_id, ErrorCode.NONE)
            return
        partition = self._leader_replica(index)
        if partition is None:
            self._fail(pending.append_id, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            return
        min_isr = effective_topic_value(self.image, self.topic, "min.insync.replicas", self.broker.static)
        if min_isr is not None and len(partition.isr) < min_isr:
            self._fail(pending.append_id, ErrorCode.NOT_ENOUGH_REPLICAS)
            return
        wall_ms = self.env.wall_ms()
        batch = build_batch([SimpleRecord(key, value) for key, value in pending.records], base_timestamp=wall_ms,
                            producer_id=pending.producer_id, producer_epoch=pending.producer_epoch,
                            transactional=pending.producer_id >= 0)
        try:
            info = partition.append_as_leader(batch, wall_ms)
        except RecordTooLargeError:
            self._fail(pending.append_id, ErrorCode.RECORD_LIST_TOO_LARGE)
            return
        except LogError as exc:
            self.log.warning("append to %s-%d failed: %s", self.topic, index, exc)
            self._fail(pending.append_id, ErrorCode.KAFKA_STORAGE_ERROR)
            return
        deadline = self.env.now() + self.commit_timeout_ms / 1000
        self._pending.setdefault(index, []).append(_InFlight(pending.append_id, info.last_offset, deadline))
        self._complete_committed(index)
        self._appended.set()
        self.broker.purgatory.notify(_WAKE_KEY)

    def _complete_committed(self, index: int) -> None:
        """Report the appends of partition `index` the high watermark has passed, in order."""
        entries = self._pending.get(index)
        while entries:
            entry = entries[0]
            partition = self._leader_replica(index)
            if partition is None:
                error = ErrorCode.NOT_LEADER_OR_FOLLOWER
            elif partition.high_watermark > entry.last_offset:
                error = ErrorCode.NONE
            elif self.env.now() >= entry.deadline:
                error = ErrorCode.REQUEST_TIMED_OUT
            else:
                return
            entries.pop(0)
            self._fail(entry.append_id, error)
        self._pending.pop(index, None)

    async def _commit_loop(self) -> None:
        while True:
            if not self._pending:
                # Idle: not a purgatory waiter (its count is the parked fetches').
                self._appended = trio.Event()
                await self._appended.wait()
                continue
            keys = [(self.topic, p) for p in sorted(self._pending)] + [_WAKE_KEY]
            deadline = min((e.deadline for es in self._pending.values() for e in es), default=math.inf)
            await self.broker.purgatory.wait(keys, deadline)
            for index in sorted(self._pending):
                self._complete_committed(index)

    # -- timers ----------------------------------------------------------------------
    async def _timer_loop(self) -> None:
        while True:
            self._timers_changed = trio.Event()
            deadline = self.coordinator.next_deadline()
            with self.env.move_on_at(math.inf if deadline is None else self.wake_time(deadline)):
                await self._timers_changed.wait()
            now = self.now()
            if deadline is not None and now.monotonic_ms >= deadline:
                self.carry_out(self.coordinator.tick(now))

    # -- leadership of the topic's partitions -------------------------------------------
    async def _leadership_loop(self) -> None:
        while True:
            await self._leadership_changed.wait()
            self._leadership_changed = trio.Event()
            await self._reconcile()

    async def _reconcile(self) -> None:
        wanted = dict(self._wanted)
        for index in sorted(self._served):
            if wanted.get(index) != self._served[index]:
                self._unload(index)
        for index in sorted(wanted):
            if index not in self._served:
                self._served[index] = wanted[index]
                self.coordinator.begin_loading(index)
        # Also those a previous pass left loading (it gave way to a newer change, or failed).
        loading = [index for index in sorted(self._served)
                   if self.coordinator.partitions.get(index) is PartitionStatus.LOADING]
        if not loading:
            return
        await self.broker.replicas.wait_applied(self.image.offset, self.env.now() + 5.0)
        for index in loading:
            await self._load(index, self._served[index])

    def _retry_later(self) -> None:
        if self._nursery is not None and not self._retry_scheduled:
            self._retry_scheduled = True
            self._nursery.start_soon(self._retry_task)

    async def _retry_task(self) -> None:
        await self.env.sleep(_LOAD_RETRY_S)
        self._retry_scheduled = False
        self._leadership_changed.set()

    def _await_high_watermark(self, index: int, partition, end: int) -> None:
        if self._nursery is not None and index not in self._awaiting_hw:
            self._awaiting_hw.add(index)
            self._nursery.start_soon(self._await_high_watermark_task, index, partition, end)

    async def _await_high_watermark_task(self, index: int, partition, end: int) -> None:
        # Not inline in _load: one partition whose ISR is short must not hold up the others.
        try:
            while self._leader_replica(index) is partition and partition.high_watermark < end:
                await self.broker.purgatory.wait([(self.topic, index)], self.env.now() + _LOAD_RETRY_S)
        finally:
            self._awaiting_hw.discard(index)
        self._leadership_changed.set()  # load again (or give way to whoever leads now)

    def _unload(self, index: int) -> None:
        del self._served[index]
        self._pending.pop(index, None)  # unload_partition fails the coordinator's appends itself
        self.carry_out(self.coordinator.unload_partition(index, self.now()))
        self.log.info("no longer coordinator for %s-%d", self.topic, index)

    async def _load(self, index: int, epoch: int) -> None:
        give_up = self.env.now() + _NOT_READY_GIVE_UP_S
        while True:
            partition = self._leader_replica(index)
            if partition is not None:
                break
            if self._leadership_changed.is_set() or self.env.now() >= give_up:
                # Still LOADING: the next pass (a metadata change, or the retry) tries again.
                self._retry_later()
                return
            await self.env.sleep(_NOT_READY_RETRY_S)  # the replica manager has not opened it yet
        records = []
        offsets = []  # of each record, for the log line about one that does not decode
        # Transactional records (TxnOffsetCommit) count from their producer's COMMIT marker on
        # and never after an ABORT, unless a later plain record of the same key superseded
        # them; those with no marker yet are handed over as pending.
        open_txns: dict[int, list[tuple[int, tuple[bytes, bytes | None]]]] = {}
        end = partition.log_end_offset
        try:
            for n, (header, batch) in enumerate(iter_log_batches(partition.log, 0, end)):
                try:
                    decoded = decode_records(header, bytes(batch[HEADER_SIZE:]))
                except DecodeError as exc:
                    # Skipped, never retried for ever: everything in the partition would wait on it.
                    self.log.error("%s-%d: skipping the undecodable batch at offsets %d-%d: %s",
                                   self.topic, index, header.base_offset, header.last_offset, exc)
                    continue
                if header.is_control:
                    committed = open_txns.pop(header.producer_id, [])
                    if marker_commit(header, batch):
                        offsets.extend(o for o, _ in committed)
                        records.extend(r for _, r in committed)
                elif header.is_transactional:
                    open_txns.setdefault(header.producer_id, []).extend((r.offset, (r.key, r.value)) for r in decoded)
                else:
                    if open_txns:  # a later plain record supersedes an open transaction's of its key
                        keys = {r.key for r in decoded}
                        for pid, entries in open_txns.items():
                            open_txns[pid] = [e for e in entries if e[1][0] not in keys]
                    records.extend((r.key, r.value) for r in decoded)
                    offsets.extend(r.offset for r in decoded)
                if n % self.load_yield_batches == self.load_yield_batches - 1:
                    await trio.lowlevel.checkpoint()  # a big partition must not stall every other request
            if self._leader_replica(index) is not partition or partition.log_end_offset != end:
                self._retry_later()  # leadership moved meanwhile: the metadata decides next
                return
            if partition.high_watermark < end:
                self._await_high_watermark(index, partition, end)  # stays LOADING meanwhile
                return

            def skipped(position: int, reason: str) -> None:
                self.log.error("%s-%d: skipping the undecodable record at offset %d: %s",
                               self.topic, index, offsets[position], reason)

            self.carry_out(self.coordinator.load_partition(index, records, self.now(), skipped)
                           or Output())
            if open_txns:
                self.coordinator.load_pending_transactions(
                    index, {pid: [r for _, r in entries] for pid, entries in open_txns.items()}, self.now())
        except (DecodeError, LogError) as exc:
            # A batch failing its CRC or an unreadable log: the partition stays LOADING
            # (clients retry); an operator must look at the log.
            self.log.error("cannot load %s-%d: %s", self.topic, index, exc)
            self._retry_later()
            return
        self.loads_completed += 1
        self._timers_changed.set()
        self.log.info("coordinator for %s-%d (epoch %d): %d records replayed", self.topic, index, epoch,
                      len(records))
