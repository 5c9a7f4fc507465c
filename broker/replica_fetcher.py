"""Follower replication: one fetcher task per source broker, batching all its partitions.

Kafka's ReplicaFetcherManager + ReplicaFetcherThread. The replica manager calls
`ReplicaFetcherManager.sync(wanted)` after applying each metadata delta with the
complete set of partitions this broker follows (key -> Partition, whose
registration names the leader and leader epoch); the manager moves partitions
between per-leader fetchers, starting and stopping fetcher tasks as needed.

Every Fetch (v16, topics by id) carries, per partition, our log end as the
fetch offset and the epoch of our last record (`last_fetched_epoch`); the
leader checks them against its epoch cache and, where our log diverges from
its own, answers the diverging epoch and its end offset instead of records
(broker.fetch_divergence). We then truncate as Kafka's truncateOnFetchResponse
does — to where that epoch ends on the leader, or ours if it ends earlier —
dropping only records the leader never had, which were never committed
(KIP-101/279/595), and fetch again: the next answer checks the new end. So a
partition joining a fetcher (a new leader, a new epoch) fetches at once, as in
Kafka when the leader supports truncation on fetch, and every answer, not only
the first after a leader change, is checked against the leader's log. Only a log that holds no
epoch at all (nothing stamped) starts by truncating to its high watermark, and
a batch that cannot append at our end (our end inside a leader batch) asks
where our latest epoch ends by OffsetForLeaderEpoch v3 first. Fetched records
are appended with their offsets and epochs, with our broker id as the replica
(so the leader counts us), and we take the leader's high watermark (bounded by
our log end).

Fetches use a fetch session (KIP-227, broker.fetch_session_client): after a
full first request, each one lists only the partitions whose fetch offset (or
epoch, log start) changed, and forgets those we stopped fetching; the leader
answers only partitions with news. So an idle follower of thousands of
partitions sends and receives a few bytes per round. A session error, a lost
answer, or an answer we could not take (the leader would not repeat its HW)
makes the next request full, opening a new session.

Errors: a broken connection or a failing request closes the connection and
backs off (replica.fetch.backoff.ms); per-partition epoch/leadership errors
delay just that partition until metadata moves it; OFFSET_OUT_OF_RANGE resets
the partition to the leader's log (start or end, via ListOffsets). An answer
saying the source has not applied the metadata we act on yet (it does not lead
the partition, or not at our leader epoch, or does not know it) is asked again
after 50 ms, doubling up to the backoff: right after a leader change the
follower's first request often reaches the new leader before the change does.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable

import trio

from broker.broker_link import BrokerLink, open_link
from broker.fetch_session_client import FetchSessionClient, PartitionRequest
from broker.partition import Partition
from broker.replication_throttle import FOLLOWER, ReplicationThrottles
from storage.deadline_reaper import DeadlineReaper, Timer
from storage.log import InvalidAppendOffsetError, LogError
from storage.log.epoch_cache import UNDEFINED_EPOCH
from wire.error_codes import ErrorCode
from wire.errors import CorruptRecordError, DecodeError
from wire.protocol import FetchRequest, ListOffsetsRequest, OffsetForLeaderEpochRequest
from wire.security.sasl_config import SaslCredentials

__all__ = ["ReplicaFetcherManager", "ReplicaFetcher", "FetcherSettings"]

log = logging.getLogger(__name__)
Key = tuple[str, int]
FETCH_VERSION = 16
EPOCH_VERSION = 3
LIST_OFFSETS_VERSION = 2
EARLIEST, LATEST = -2, -1
UNDEFINED_OFFSET = -1
THROTTLE_RECHECK_S = 0.1  # a throttled partition is left out of fetches this long at a time
SESSION_ERRORS = (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH)
# Partition errors by which the source says it is behind our metadata (see the module doc).
SOURCE_BEHIND = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_LEADER_EPOCH,
                           ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID})
SOURCE_BEHIND_RETRY_S = 0.05  # the first retry after such an answer; doubling up to the backoff


@dataclass(frozen=True)
class FetcherSettings:
    wait_max_ms: int = 500  # replica.fetch.wait.max.ms
    min_bytes: int = 1  # replica.fetch.min.bytes
    partition_max_bytes: int = 1 << 20  # replica.fetch.max.bytes
    response_max_bytes: int = 10 << 20  # replica.fetch.response.max.bytes
    backoff_s: float = 1.0  # replica.fetch.backoff.ms
    request_timeout_s: float = 30.0  # replica.socket.timeout.ms
    client_id: str = "replica-fetcher"
    tls: object = None  # storage.tls.TlsContext for the inter-broker listener, if it is TLS
    sasl: SaslCredentials | None = None  # the node's login when the inter-broker listener is SASL


class _State:
    __slots__ = ("partition", "leader_epoch", "truncating", "delayed_until", "errors")

    def __init__(self, partition: Partition):
        self.partition = partition
        self.leader_epoch = partition.leader_epoch
        # With an epoch to send, the leader's divergence check reconciles our log on fetch.
        self.truncating = partition.log.epoch_cache.latest_epoch == UNDEFINED_EPOCH
        self.delayed_until = float("-inf")
        self.errors = 0  # partition errors answered at this leader epoch


class ReplicaFetcher:
    """Fetches every partition this broker follows from one source broker."""

    def __init__(self, env, broker_id: int, source_id: int,
                 address_of: Callable[[int], tuple[str, int] | None], settings: FetcherSettings,
                 timers: DeadlineReaper, on_appended: Callable[[str, int], None] = lambda topic, nbytes: None,
                 throttles: ReplicationThrottles | None = None):
        self.env = env
        self.throttles = throttles  # follower.replication.throttled.* (None: never throttled)
        self.on_appended = on_appended  # (topic, bytes) after each append: the replication-in counter
        self.broker_id = broker_id
        self.source_id = source_id
        self.address_of = address_of
        self.settings = settings
        self.partitions: dict[Key, _State] = {}
        self._wake = trio.Event()
        self._link: BrokerLink | None = None
        self._timers = timers  # its task must run while this fetcher does
        self._timer: Timer | None = None  # the current connection's (see BrokerLink)
        self.session = FetchSessionClient()  # KIP-227: after the first, fetches list only changes
        self.fetches = 0
        self.truncations = 0

    # -- membership (from the manager) ---------------------------------------------
    def add(self, partition: Partition) -> bool:
        """Follow `partition` (again, at its current leader epoch); False if it already is."""
        state = self.partitions.get(partition.key)
        if state is not None and state.partition is partition and state.leader_epoch == partition.leader_epoch:
            return False
        self.partitions[partition.key] = _State(partition)
        self._wake.set()
        return True

    def remove(self, key: Key) -> None:
        self.partitions.pop(key, None)

    # -- the task --------------------------------------------------------------------
    async def run(self) -> None:
        while True:
            try:
                await self._rounds()
            except (OSError, trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError,
                    DecodeError) as exc:
                log.info("fetcher %d -> %d: %s; backing off", self.broker_id, self.source_id, exc)
                await self._close()
                await self.env.sleep(self.settings.backoff_s)
            except Exception:  # a bug or a disk error must not take the broker down: retry later
                log.exception("fetcher %d -> %d failed; backing off", self.broker_id, self.source_id)
                await self._close()
                await self.env.sleep(self.settings.backoff_s)

    async def _rounds(self) -> None:
        """Rounds until one fails: a request past its timeout raises TooSlowError."""
        self._timer = Timer(self._timers)
        with self._timer.scope:
            while True:
                await self._round()
        raise trio.TooSlowError("request to the source broker timed out")  # only the timer ends the loop

    async def _round(self) -> None:
        now = self.env.now()
        ready = {k: s for k, s in sorted(self.partitions.items()) if s.delayed_until <= now}
        if not ready:
            wake_at = min((s.delayed_until for s in self.partitions.values()), default=float("inf"))
            self._wake = trio.Event()
            with self.env.move_on_at(wake_at):
                await self._wake.wait()
            return
        link = await self._connect()
        truncating = {k: s for k, s in ready.items() if s.truncating}
        if truncating:
            await self._truncate(link, truncating)
        fetching = {k: s for k, s in ready.items() if not s.truncating and self.partitions.get(k) is s}
        for key in [k for k, s in fetching.items() if self._throttled(k, s)]:
            self._delay(fetching.pop(key), THROTTLE_RECHECK_S)  # Kafka's shouldFollowerThrottle
        if fetching:
            await self._fetch(link, fetching)

    def _throttled(self, key: Key, state: _State) -> bool:
        if self.throttles is None:
            return False
        in_sync = self.broker_id in state.partition.registration.isr
        return self.throttles.should_throttle(FOLLOWER, *key, in_sync=in_sync)

    async def _connect(self) -> BrokerLink:
        if self._link is not None:
            if self.env.now() < self._link.retire_at:
                return self._link
            await self._close()  # log in afresh before the broker ends the session
        address = self.address_of(self.source_id)
        if address is None:
            raise OSError(f"no address for broker {self.source_id}")
        self._link = await open_link(self.env, address, client_id=self.settings.client_id, tls=self.settings.tls,
                                     sasl=self.settings.sasl, timeout_s=self.settings.request_timeout_s,
                                     timer=self._timer)
        return self._link

    async def _close(self) -> None:
        if self._link is not None:
            link, self._link = self._link, None
            await trio.aclose_forcefully(link.stream)

    def _current(self, key: Key, state: _State) -> Partition | None:
        """The partition if this answer still applies to it (same object, still our follower
        at the epoch the request was sent for)."""
        if self.partitions.get(key) is not state:
            return None
        p = state.partition
        if p.is_leader or p.leader_epoch != state.leader_epoch or p.log.closed:
            return None
        return p

    def _delay(self, state: _State, seconds: float | None = None) -> None:
        state.delayed_until = self.env.now() + (self.settings.backoff_s if seconds is None else seconds)

    def _delay_after_error(self, key: Key, state: _State, error_code: int) -> None:
        """A partition error: a backoff, short and growing while the source is behind us."""
        seconds = self.settings.backoff_s
        if error_code in SOURCE_BEHIND:
            seconds = min(seconds, SOURCE_BEHIND_RETRY_S * 2 ** state.errors)
        if state.errors == 0:
            log.info("%s-%d: leader %d answered %s at leader epoch %d; asking again in %.2f s", key[0], key[1],
                     self.source_id, ErrorCode(error_code).name, state.leader_epoch, seconds)
        state.errors += 1
        self._delay(state, seconds)

    # -- truncation --------------------------------------------------------------------
    async def _truncate(self, link: BrokerLink, states: dict[Key, _State]) -> None:
        O = OffsetForLeaderEpochRequest
        asked: dict[Key, int] = {}
        topics: dict[str, list] = {}
        for key, state in states.items():
            p = state.partition
            epoch = p.log.epoch_cache.latest_epoch
            if epoch == UNDEFINED_EPOCH:
                # Nothing stamped with an epoch: keep only what is known committed (Kafka does the same).
                await self._truncate_to(key, state, p.high_watermark, done=True)
                continue
            asked[key] = epoch
            topics.setdefault(key[0], []).append(O.OffsetForLeaderPartition(
                partition=key[1], current_leader_epoch=state.leader_epoch, leader_epoch=epoch))
        if not topics:
            return
        request = O(replica_id=self.broker_id, topics=[O.OffsetForLeaderTopic(topic=t, partitions=ps)
                                                       for t, ps in topics.items()])
        response = await link.call(request, EPOCH_VERSION, self.settings.request_timeout_s)
        for topic in response.topics:
            for r in topic.partitions:
                key = (topic.topic, r.partition)
                state = states.get(key)
                if state is None or key not in asked or self._current(key, state) is None:
                    continue
                if r.error_code != ErrorCode.NONE:
                    self._delay_after_error(key, state, r.error_code)
                    continue
                offset, done = _truncation_point(state.partition, r.leader_epoch, r.end_offset)
                await self._truncate_to(key, state, offset, done=done)

    async def _truncate_to(self, key: Key, state: _State, offset: int, *, done: bool) -> None:
        p = self._current(key, state)
        if p is None:
            # Not our follower at that epoch any more (led, closed): look again after a backoff.
            # Returning at once left it truncating and ready, and a partition with no epoch
            # reaches here without any await: the fetcher spun without ever yielding, freezing
            # the whole node (simulation seed 161, --faults disk).
            self._delay(state)
            return
        if offset < p.log_end_offset:
            log.info("%s-%d: truncating to %d (leo %d, hw %d) for leader %d epoch %d", key[0], key[1], offset,
                     p.log_end_offset, p.high_watermark, self.source_id, state.leader_epoch)
            self.truncations += 1
        # Even at the log end: that drops an epoch stamped there with no records, which the
        # leader may never have had (else the next round would ask about it again).
        await p.log.truncate_to(max(offset, 0))
        state.truncating = not done

    # -- fetching ------------------------------------------------------------------------
    async def _fetch(self, link: BrokerLink, states: dict[Key, _State]) -> None:
        F = FetchRequest
        s = self.settings
        sent: dict[Key, int] = {}
        wanted: dict[tuple, PartitionRequest] = {}  # by (topic id, partition): the session's keys
        keys: dict[tuple, Key] = {}  # the session's keys -> ours
        for key, state in states.items():
            plog = state.partition.log
            sent[key] = end = plog.log_end_offset
            by_id = (state.partition.topic_id, key[1])
            keys[by_id] = key
            wanted[by_id] = PartitionRequest(fetch_offset=end, log_start_offset=plog.log_start_offset,
                                             current_leader_epoch=state.leader_epoch,
                                             partition_max_bytes=s.partition_max_bytes,
                                             last_fetched_epoch=plog.epoch_cache.latest_epoch)
        plan = self.session.build(wanted)
        topics: dict = {}
        for (topic_id, index), data in plan.partitions.items():
            topics.setdefault(topic_id, []).append(F.FetchPartition(partition=index, **data._asdict()))
        forgotten: dict = {}
        for topic_id, index in plan.forgotten:
            forgotten.setdefault(topic_id, []).append(index)
        request = F(replica_state=F.ReplicaState(replica_id=self.broker_id, replica_epoch=-1),
                    max_wait_ms=s.wait_max_ms, min_bytes=s.min_bytes,
                    max_bytes=s.response_max_bytes, isolation_level=0, session_id=plan.session_id,
                    session_epoch=plan.epoch,
                    topics=[F.FetchTopic(topic_id=t, partitions=ps) for t, ps in topics.items()],
                    forgotten_topics_data=[F.ForgottenTopic(topic_id=t, partitions=ps) for t, ps in forgotten.items()],
                    rack_id="")
        try:
            response = await link.call(request, FETCH_VERSION, s.request_timeout_s + s.wait_max_ms / 1000)
        except BaseException:
            self.session.handle_error()
            raise
        self.fetches += 1
        if not self.session.handle_response(plan, response.error_code, response.session_id):
            if response.error_code not in SESSION_ERRORS:
                log.info("fetcher %d -> %d: fetch failed: %s", self.broker_id, self.source_id,
                         ErrorCode(response.error_code).name)
                for state in states.values():
                    self._delay(state)
            return  # the next request is a full one
        out_of_range = []
        skipped = False
        for topic in response.responses:
            for pd in topic.partitions:
                key = keys.get((topic.topic_id, pd.partition_index))
                state = states.get(key)
                if state is None:
                    continue
                p = self._current(key, state)
                if p is None or p.log.log_end_offset != sent[key]:
                    skipped = skipped or key in self.partitions  # (a removed one is forgotten anyway)
                    continue
                if pd.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    out_of_range.append((key, state))
                elif pd.error_code != ErrorCode.NONE:
                    self._delay_after_error(key, state, pd.error_code)
                elif pd.diverging_epoch.end_offset >= 0:
                    await self._truncate_on_divergence(key, state, p, pd.diverging_epoch, pd.log_start_offset)
                    skipped = True  # its HW not taken
                else:
                    await _start_at_first_batch(p, pd.records, pd.log_start_offset)
                    self._append(key, state, p, pd)
        if skipped:
            # The leader believes it told us a HW we did not take (an answer for a log that
            # moved meanwhile, or a diverging one); an incremental answer would not repeat it
            # until it moves again. A full request starts the session afresh.
            self.session.force_full()
        if out_of_range:
            await self._reset_out_of_range(link, out_of_range)

    async def _truncate_on_divergence(self, key: Key, state: _State, p: Partition, diverging,
                                      leader_log_start: int) -> None:
        """Kafka's truncateOnFetchResponse: cut our log back to where the leader's copy of the
        diverging epoch ends (or ours, if it ends earlier) and go on fetching; the next fetch
        carries our new last epoch, which the leader checks again. The answer's HW is not
        taken: it may lie past the records we drop. (The point is bounded by our log end.)

        Where the leader's answer ends at its log start and our log starts below it, the
        leader's epoch cache, truncated from the start with its records, no longer reaches our
        records there: it cannot tell whether they are its own. The log starts again at the
        leader's log start, which following the leader drops anyway; kept, a record of ours
        there that the leader never had would be served if we led (simulation seed 6639)."""
        if _beyond_leader_history(p.log, diverging.end_offset, leader_log_start):
            log.info("%s-%d: the leader cannot vouch for our records below its log start %d; starting there",
                     key[0], key[1], leader_log_start)
            await p.log.truncate_fully_and_start_at(leader_log_start)
            state.truncating = False
            return
        offset, _ = _truncation_point(p, diverging.epoch, diverging.end_offset)
        await self._truncate_to(key, state, offset, done=True)

    def _append(self, key: Key, state: _State, p: Partition, pd) -> None:
        records = pd.records
        if records is not None and len(records):
            try:
                p.append_as_follower(records)
            except InvalidAppendOffsetError:
                state.truncating = True  # our end sits inside a leader batch: reconcile again
                return
            except (CorruptRecordError, LogError) as exc:
                log.warning("%s-%d: cannot append fetched records: %s", key[0], key[1], exc)
                self._delay(state)
                return
            self.on_appended(key[0], len(records))
            if self.throttles is not None:
                self.throttles.record(FOLLOWER, *key, len(records))
        p.update_follower_high_watermark(pd.high_watermark)
        plog = p.log
        if plog.log_start_offset < pd.log_start_offset <= plog.high_watermark:
            # DeleteRecords / retention moved the leader's log start: follow it (Kafka does).
            plog.delete_records_before(pd.log_start_offset)

    async def _reset_out_of_range(self, link: BrokerLink, items) -> None:
        """Kafka's handleOutOfRangeError: start over at the leader's log start if we are
        behind it, else truncate to the leader's end."""
        offsets = {}
        for which in (EARLIEST, LATEST):
            L = ListOffsetsRequest
            topics: dict[str, list] = {}
            for key, _ in items:
                topics.setdefault(key[0], []).append(L.ListOffsetsPartition(partition_index=key[1], timestamp=which))
            response = await link.call(L(replica_id=self.broker_id, isolation_level=0, topics=[
                L.ListOffsetsTopic(name=t, partitions=ps) for t, ps in topics.items()]),
                LIST_OFFSETS_VERSION, self.settings.request_timeout_s)
            for t in response.topics:
                for r in t.partitions:
                    if r.error_code == ErrorCode.NONE:
                        offsets[(t.name, r.partition_index, which)] = r.offset
        for key, state in items:
            p = self._current(key, state)
            earliest, latest = offsets.get((*key, EARLIEST)), offsets.get((*key, LATEST))
            if p is None or earliest is None or latest is None:
                self._delay(state)
                continue
            if p.log_end_offset > latest:
                await self._truncate_to(key, state, latest, done=True)
            elif p.log_end_offset < earliest:
                log.info("%s-%d: behind the leader's log start %d; starting there", key[0], key[1], earliest)
                await p.log.truncate_fully_and_start_at(earliest)


async def _start_at_first_batch(p: Partition, records, leader_log_start: int) -> None:
    """A log whose end sits inside the leader's first fetched batch, with nothing the leader
    still keeps (it holds nothing yet, or only records below the leader's log start), starts
    again at the batch's base offset, so the batch appends. Kafka's Partition does this on an
    UnexpectedAppendOffsetException for an empty log: DeleteRecords put the leader's log start
    inside the batch. A log holding records below that start gets there too: reconciliation
    cuts it back to the leader's log start (the end the leader gives for an epoch older than
    its epoch cache, which was truncated from the start). What it drops lies below the leader's
    log start, which following the leader would drop anyway; kept, the batch would be refused
    for ever (simulation seeds 1014, 1496)."""
    plog = p.log
    end = plog.log_end_offset
    if records is None or len(records) < 27 or (end != plog.log_start_offset and end > leader_log_start):
        return
    head = bytes(records[:27])
    base = int.from_bytes(head[:8], "big", signed=True)
    last = base + int.from_bytes(head[23:27], "big", signed=True)
    if base < end <= last:
        log.info("%s-%d: the leader's first batch starts at %d, below our end %d; starting there",
                 p.key[0], p.key[1], base, end)
        await plog.truncate_fully_and_start_at(base)


def _names(keys: list[Key], most: int = 20) -> str:
    """topic-partition names for a log line, the first `most` of them."""
    names = ", ".join(f"{t}-{i}" for t, i in keys[:most])
    return names if len(keys) <= most else f"{names} and {len(keys) - most} more"


def _beyond_leader_history(plog, diverging_end: int, leader_log_start: int) -> bool:
    """A diverging answer the leader could only give from the first epoch its cache still holds
    (its end at or below the leader's log start), for a log holding records below that start."""
    return diverging_end <= leader_log_start and plog.log_start_offset < leader_log_start


def _truncation_point(p: Partition, leader_epoch: int, leader_end: int) -> tuple[int, bool]:
    """Kafka's getOffsetTruncationState: (offset to truncate to, reconciliation complete)."""
    log_end = p.log_end_offset
    if leader_end == UNDEFINED_OFFSET:
        return min(p.high_watermark, log_end), True
    if leader_epoch == UNDEFINED_EPOCH:
        return min(leader_end, log_end), True
    ours_epoch, ours_end = p.log.end_offset_for_epoch(leader_epoch)
    if ours_epoch == UNDEFINED_EPOCH:
        return min(leader_end, log_end), True
    if ours_epoch != leader_epoch:
        # We never saw the leader's epoch: cut back to where our older epoch ends and ask again.
        return min(ours_end, log_end), False
    return min(ours_end, leader_end, log_end), True


class ReplicaFetcherManager:
    """Assigns followed partitions to one fetcher per source broker (their leader)."""

    def __init__(self, env, broker_id: int, address_of: Callable[[int], tuple[str, int] | None],
                 settings: FetcherSettings | None = None,
                 on_appended: Callable[[str, int], None] = lambda topic, nbytes: None,
                 throttles: ReplicationThrottles | None = None):
        self.env = env
        self.throttles = throttles
        self.broker_id = broker_id
        self.address_of = address_of
        self.settings = settings or FetcherSettings()
        self.on_appended = on_appended
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self.timers = DeadlineReaper(env)  # every fetcher's request timeouts
        self._scopes: dict[int, trio.CancelScope] = {}
        self._nursery: trio.Nursery | None = None

    def sync(self, wanted: dict[Key, Partition]) -> None:
        """Make the fetchers follow exactly `wanted` (partitions we follow, by key)."""
        by_leader: dict[int, dict[Key, Partition]] = {}
        for key in sorted(wanted):
            p = wanted[key]
            if not p.is_leader and p.leader_id >= 0 and p.leader_id != self.broker_id:
                by_leader.setdefault(p.leader_id, {})[key] = p
        for source_id in sorted(self.fetchers):
            fetcher = self.fetchers[source_id]
            mine = by_leader.get(source_id, {})
            removed = [key for key in sorted(fetcher.partitions) if key not in mine]
            for key in removed:
                fetcher.remove(key)
            if removed:
                log.info("fetcher %d -> %d: removed %s", self.broker_id, source_id, _names(removed))
        for source_id in sorted(by_leader):
            fetcher = self.fetchers.get(source_id)
            if fetcher is None:
                fetcher = self.fetchers[source_id] = ReplicaFetcher(
                    self.env, self.broker_id, source_id, self.address_of, self.settings, self.timers,
                    self.on_appended, self.throttles)
                self._start(fetcher)
            added = [p.key for p in by_leader[source_id].values() if fetcher.add(p)]
            if added:
                log.info("fetcher %d -> %d: added %s", self.broker_id, source_id, _names(added))
        for source_id in sorted(self.fetchers):
            if not self.fetchers[source_id].partitions:
                self._stop(source_id)

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(self.timers.run)
            self._nursery = nursery
            for source_id in sorted(self.fetchers):
                if source_id not in self._scopes:
                    self._start(self.fetchers[source_id])
            task_status.started()
            try:
                await trio.sleep_forever()
            finally:
                self._nursery = None

    def _start(self, fetcher: ReplicaFetcher) -> None:
        if self._nursery is None:
            return  # started by run()
        scope = trio.CancelScope()
        self._scopes[fetcher.source_id] = scope

        async def guarded() -> None:
            with scope:
                try:
                    await fetcher.run()
                finally:
                    await fetcher._close()
        self._nursery.start_soon(guarded)

    def _stop(self, source_id: int) -> None:
        self.fetchers.pop(source_id, None)
        scope = self._scopes.pop(source_id, None)
        if scope is not None:
            scope.cancel()
