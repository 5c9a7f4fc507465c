"""The consumer: assign or subscribe, then `poll()`.

    async with Consumer(env, "host:9092", group_id="g", auto_offset_reset="earliest") as consumer:
        consumer.subscribe(["topic"])          # or consumer.assign([("topic", 0)])
        records = await consumer.poll(1.0)     # [ConsumerRecord]
        await consumer.commit()                # positions of all assigned partitions

`poll` keeps the group membership current (join/sync on subscribe and on
rebalance, auto-commit every `auto_commit_interval_ms`), resolves positions
(committed offset, else `auto_offset_reset` via ListOffsets), then sends one
long-poll Fetch per partition leader concurrently and returns as soon as any
brings records, or when `timeout` passes. Leadership changes and connection
loss refresh the metadata and fetch again from the new leader.
"""
from __future__ import annotations

import functools
import math

import trio

from raftkafka.client.security import PLAINTEXT_CLIENT, ClientSecurity
from raftkafka.client.cluster import Cluster
from raftkafka.client.errors import ClientClosedError, KafkaConnectionError, KafkaError, error_for
from raftkafka.client.fetcher import ConsumerRecord, FetchState, TopicPartition, fetch_max_version, leader_hints
from raftkafka.client.group import CommitFailedError, GroupMembership
from raftkafka.client.offsets import list_offsets
from raftkafka.client.transactional import ConsumerGroupMetadata
from storage.deadline_reaper import Alarm, DeadlineReaper
from storage.env import Env
from wire.error_codes import ErrorCode
from wire.protocol import ApiKey

__all__ = ["Consumer", "ConsumerRecord", "CommitFailedError"]

_RESETS = ("earliest", "latest", "none")


class Consumer:
    def __init__(self, env: Env, bootstrap_servers, *, group_id: str | None = None,
                 client_id: str = "raftkafka-consumer", auto_offset_reset: str = "latest",
                 enable_auto_commit: bool = True, auto_commit_interval_ms: float = 5000,
                 fetch_min_bytes: int = 1, fetch_max_wait_ms: int = 500, fetch_max_bytes: int = 52_428_800,
                 max_partition_fetch_bytes: int = 1_048_576, max_poll_records: int = 500,
                 isolation_level: str = "read_uncommitted", session_timeout_ms: int = 45_000,
                 heartbeat_interval_ms: int = 3000, rebalance_timeout_ms: int = 300_000,
                 partition_assignment_strategy=("range", "roundrobin"), group_instance_id: str | None = None,
                 request_timeout_ms: float = 30_000, retry_backoff_ms: float = 100,
                 metadata_max_age_ms: float = 300_000, security: ClientSecurity = PLAINTEXT_CLIENT):
        if auto_offset_reset not in _RESETS:
            raise ValueError(f"auto_offset_reset must be one of {_RESETS}")
        if isolation_level not in ("read_uncommitted", "read_committed"):
            raise ValueError("isolation_level must be read_uncommitted or read_committed")
        self.env = env
        self.group_id = group_id
        self.auto_offset_reset = auto_offset_reset
        self.enable_auto_commit = enable_auto_commit and group_id is not None
        self.auto_commit_interval = auto_commit_interval_ms / 1000
        self.fetch_min_bytes = fetch_min_bytes
        self.fetch_max_wait = fetch_max_wait_ms / 1000
        self.fetch_max_bytes = fetch_max_bytes
        self.max_poll_records = max_poll_records
        self.retry_backoff = retry_backoff_ms / 1000
        self.fetch = FetchState(max_partition_bytes=max_partition_fetch_bytes, prefetch_below=max_poll_records,
                                isolation_level=1 if isolation_level == "read_committed" else 0)
        self._bootstrap = bootstrap_servers
        self._cluster_options = dict(client_id=client_id, request_timeout=request_timeout_ms / 1000,
                                     retry_backoff=self.retry_backoff, metadata_max_age=metadata_max_age_ms / 1000,
                                     security=security)
        self._group_options = dict(session_timeout=session_timeout_ms / 1000,
                                   rebalance_timeout=rebalance_timeout_ms / 1000,
                                   heartbeat_interval=heartbeat_interval_ms / 1000,
                                   assignors=tuple(partition_assignment_strategy), retry_backoff=self.retry_backoff,
                                   group_instance_id=group_instance_id)
        self.cluster: Cluster | None = None
        self.group: GroupMembership | None = None
        self._subscription: list[str] | None = None
        self._on_assign = self._on_revoke = None
        self._next_auto_commit = 0.0
        self._nursery_manager = None
        self._nursery: trio.Nursery | None = None
        self._closed = False
        self._in_flight: dict[int, list[TopicPartition]] = {}  # node -> partitions of its pending Fetch
        self._wakeup = trio.Event()  # set (and replaced) when a Fetch comes back or the group wants a rejoin
        self._timers = DeadlineReaper(env)
        self._round_timer = Alarm(self._timers, self._wake_poll)  # ends a fetch round that nothing else ended
        self._fetch_errors: list[KafkaError] = []

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> "Consumer":
        self._nursery_manager = trio.open_nursery()
        self._nursery = await self._nursery_manager.__aenter__()
        self.cluster = Cluster(self.env, self._nursery, self._bootstrap, **self._cluster_options)
        try:
            await self._nursery.start(self._timers.run)
        except BaseException as exc:
            # Cancelled while starting (a caller's deadline): close the nursery opened above,
            # or it stays on the caller's cancel-scope stack and corrupts it.
            self._nursery.cancel_scope.cancel()
            await self._nursery_manager.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        if self.group_id is not None:
            self.group = GroupMembership(self.env, self.cluster, self.group_id, **self._group_options)
            self.group.on_rejoin_wanted = self._wake_poll
            self._nursery.start_soon(self.group.heartbeat_loop)
        self._next_auto_commit = self.env.now() + self.auto_commit_interval
        return self

    async def __aexit__(self, exc_type, exc, tb) -> bool:
        try:
            await self.close(commit=exc_type is None)
        finally:
            await self._nursery_manager.__aexit__(None, None, None)
        return False

    async def close(self, *, commit: bool = True) -> None:
        """Commit (with auto-commit), leave the group, close connections."""
        if self._closed:
            return
        try:
            if commit and self.enable_auto_commit and self.fetch.partitions:
                try:
                    await self.commit()
                except KafkaError:
                    pass  # best effort, as the Java client on close
            if self.group is not None and self._subscription is not None:
                await self.group.leave()
        finally:
            self._closed = True
            self._nursery.cancel_scope.cancel()
            with trio.CancelScope(shield=True):
                await self.cluster.aclose()

    # ------------------------------------------------------------------ assignment

    def assign(self, partitions) -> None:
        """Manual assignment; no group membership (commits still go to group_id if set)."""
        if self._subscription is not None:
            raise KafkaError("assign() after subscribe(): call unsubscribe() first", ErrorCode.INVALID_REQUEST)
        partitions = [tuple(tp) for tp in partitions]
        self.fetch.assign(partitions)
        self.cluster.add_topics({t for t, _ in partitions})

    def subscribe(self, topics: list[str], *, on_assign=None, on_revoke=None) -> None:
        """Join `group_id` for `topics`; `on_assign(partitions)`/`on_revoke(partitions)` may be async."""
        if self.group is None:
            raise KafkaError("subscribe() needs a group_id", ErrorCode.INVALID_GROUP_ID)
        if not topics:
            raise ValueError("subscribe to at least one topic")
        self._subscription = sorted(set(topics))
        self._on_assign, self._on_revoke = on_assign, on_revoke
        self.cluster.add_topics(self._subscription)
        self.group.needs_join = True

    def unsubscribe(self) -> None:
        self._subscription = None
        self.fetch.assign([])
        if self.group is not None:
            self._nursery.start_soon(self.group.leave)

    def assignment(self) -> set[TopicPartition]:
        return set(self.fetch.partitions)

    # ------------------------------------------------------------------ positions

    def seek(self, tp: TopicPartition, offset: int) -> None:
        if offset < 0:
            raise ValueError("offset must be >= 0")
        self.fetch.seek(tuple(tp), offset)

    def seek_to_beginning(self, *partitions) -> None:
        for tp in partitions or list(self.fetch.partitions):
            self.fetch.seek(tuple(tp), None, "earliest")

    def seek_to_end(self, *partitions) -> None:
        for tp in partitions or list(self.fetch.partitions):
            self.fetch.seek(tuple(tp), None, "latest")

    async def position(self, tp: TopicPartition) -> int:
        tp = tuple(tp)
        self.fetch._state(tp)
        await self._resolve_positions()
        return self.fetch.partitions[tp].position

    def pause(self, *partitions) -> None:
        for tp in partitions:
            self.fetch._state(tuple(tp)).paused = True

    def resume(self, *partitions) -> None:
        for tp in partitions:
            self.fetch._state(tuple(tp)).paused = False

    async def beginning_offsets(self, partitions) -> dict[TopicPartition, int]:
        return {tp: o for tp, (o, _) in (await list_offsets(self.cluster, {tuple(tp): -2 for tp in partitions})).items()}

    async def end_offsets(self, partitions) -> dict[TopicPartition, int]:
        """The log end, or with read_committed the last stable offset (as Kafka's consumer)."""
        found = await list_offsets(self.cluster, {tuple(tp): -1 for tp in partitions},
                                   isolation_level=self.fetch.isolation_level)
        return {tp: o for tp, (o, _) in found.items()}

    async def offsets_for_times(self, timestamps: dict) -> dict[TopicPartition, tuple[int, int] | None]:
        """The first offset with timestamp >= the given ms per partition: (offset, timestamp) or None."""
        found = await list_offsets(self.cluster, {tuple(tp): ts for tp, ts in timestamps.items()})
        return {tp: (found[tp] if found[tp][0] >= 0 else None) for tp in found}

    async def _resolve_positions(self) -> None:
        unresolved = self.fetch.unresolved()
        if not unresolved:
            return
        needs_committed = [tp for tp in unresolved if self.fetch.partitions[tp].reset is None]
        if needs_committed and self.group is not None:
            for tp, offset in (await self.group.committed(needs_committed)).items():
                if offset is not None and tp in self.fetch.partitions:
                    self.fetch.partitions[tp].position = offset
        targets = {}
        for tp in self.fetch.unresolved():
            policy = self.fetch.partitions[tp].reset
            if policy in (None, "default"):
                policy = self.auto_offset_reset
            if policy == "none":
                raise error_for(ErrorCode.OFFSET_OUT_OF_RANGE, "no committed offset and auto_offset_reset=none",
                                f"{tp[0]}-{tp[1]}")
            targets[tp] = -2 if policy == "earliest" else -1
        if targets:
            found = await list_offsets(self.cluster, targets, isolation_level=self.fetch.isolation_level)
            for tp, (offset, _) in found.items():
                if tp in self.fetch.partitions and self.fetch.partitions[tp].position is None and offset >= 0:
                    self.fetch.seek(tp, offset)

    # ------------------------------------------------------------------ commits

    async def commit(self, offsets: dict | None = None) -> None:
        """Commit `offsets` ({tp: next offset to read}) or every assigned partition's position."""
        if self.group is None:
            raise KafkaError("commit() needs a group_id", ErrorCode.INVALID_GROUP_ID)
        if offsets is None:
            offsets = {tp: s.position for tp, s in self.fetch.partitions.items() if s.position is not None}
        if offsets:
            await self.group.commit({tuple(tp): o for tp, o in offsets.items()},
                                    as_member=self._subscription is not None)

    def group_metadata(self) -> ConsumerGroupMetadata:
        """For Producer.send_offsets_to_transaction."""
        if self.group is None:
            raise KafkaError("group_metadata() needs a group_id", ErrorCode.INVALID_GROUP_ID)
        return ConsumerGroupMetadata(self.group_id, self.group.generation, self.group.member_id,
                                     self.group.group_instance_id)

    async def committed(self, partitions) -> dict[TopicPartition, int | None]:
        if self.group is None:
            raise KafkaError("committed() needs a group_id", ErrorCode.INVALID_GROUP_ID)
        return await self.group.committed([tuple(tp) for tp in partitions])

    async def _maybe_auto_commit(self) -> None:
        if self.enable_auto_commit and self.env.now() >= self._next_auto_commit:
            self._next_auto_commit = self.env.now() + self.auto_commit_interval
            try:
                await self.commit()
            except KafkaError:
                pass  # retried at the next interval; a rebalance re-joins in poll

    # ------------------------------------------------------------------ group membership

    def _rejoin_due(self) -> bool:
        """True when `_ensure_group` has a join to do: the one test both it and the fetch round use,
        so a round never skips its wait for a rejoin the poll loop would not make."""
        return self._subscription is not None and self.group is not None and self.group.needs_join

    async def _ensure_group(self) -> None:
        if not self._rejoin_due():
            return
        if self.fetch.partitions:  # eager protocol: give everything back before re-joining
            if self.enable_auto_commit:
                try:
                    await self.commit()
                except KafkaError:
                    pass
            await _call(self._on_revoke, sorted(self.fetch.partitions))
            self.fetch.assign([])
        assigned = await self.group.join(self._subscription)
        self.fetch.assign(assigned)
        await _call(self._on_assign, assigned)

    # ------------------------------------------------------------------ polling

    async def poll(self, timeout: float = 1.0, max_records: int | None = None) -> list[ConsumerRecord]:
        """Records from any assigned partition, waiting up to `timeout` seconds for some."""
        if self._closed:
            raise ClientClosedError("consumer is closed")
        max_records = max_records or self.max_poll_records
        deadline = self.env.now() + timeout
        while True:
            # Each step only when it has something to do (they are no-ops nearly every time).
            if self._rejoin_due():
                await self._ensure_group()
            if self.enable_auto_commit and self.env.now() >= self._next_auto_commit:
                await self._maybe_auto_commit()
            if self.fetch.unresolved():
                await self._resolve_positions()
            records = self.fetch.take(max_records)
            if records:
                # Prefetch: partitions whose buffer runs low are fetched now, so the broker
                # answers while the caller works through these records. It asks for what is
                # there now (no long poll): a fetch held open at the log end would keep the
                # node's one fetch slot, and a seek's next fetch would wait for it.
                await self._send_fetches(0.0)
                return records
            remaining = deadline - self.env.now()
            if remaining <= 0:
                return records
            await self._fetch_round(min(self.fetch_max_wait, remaining))

    async def _fetch_round(self, max_wait: float) -> None:
        """Send a long-poll Fetch to each leader that has none in flight, then wait until one
        comes back, `max_wait` passes or the group wants a rejoin.

        A fetch still in flight when the round ends is not abandoned (nor is it in Kafka's
        consumer): its answer is buffered for a later poll. Abandoning it would not stop the
        broker serving it, and the next fetch to that broker would queue behind it there.
        """
        # Taken before the sends: a send that fails at once (its outcome handled right there)
        # must end this round too, as any Fetch coming back does.
        wakeup = self._wakeup
        await self._send_fetches(max_wait)
        if self._rejoin_due():
            await trio.lowlevel.checkpoint()  # the poll loop re-joins next; that waits on the coordinator
        else:
            # Not a cancel scope per round: the round nearly always ends by a Fetch coming back.
            # Setting the timer moves the one an earlier round left (which could only have gone
            # off while this round's sends waited for their turn: poll then just loops once more).
            self._round_timer.at(self.env.now() + max_wait)
            await wakeup.wait()
        if self._fetch_errors:  # raised here, not in the tasks, so callers see a KafkaError, not a group
            error, self._fetch_errors = self._fetch_errors[0], []
            raise error

    async def _send_fetches(self, max_wait: float) -> None:
        """Send a Fetch (a long poll of `max_wait` s) to each leader with fetchable partitions
        and none in flight."""
        in_flight = {tp for partitions in self._in_flight.values() for tp in partitions}
        by_node: dict[int, list[TopicPartition]] = {}
        missing_leader = False
        for tp in self.fetch.fetchable():
            if tp in in_flight:
                continue
            leader = self.cluster.leader(*tp)
            if leader < 0:
                missing_leader = True
            elif leader not in self._in_flight:
                by_node.setdefault(leader, []).append(tp)
        if missing_leader or self.cluster.stale():
            await self._refresh_metadata()
        for node, partitions in sorted(by_node.items()):
            # Built now, from the positions this round saw: by the time it is sent (its task may
            # connect first), a rebalance may have taken some of these partitions away.
            # Rounded up: a poll with under 1 ms left must not send max_wait_ms=0, which the
            # broker answers at once, round after round, without the poll's time running out.
            request = self.fetch.build_request(partitions, max_wait_ms=math.ceil(max_wait * 1000),
                                               min_bytes=self.fetch_min_bytes, max_bytes=self.fetch_max_bytes,
                                               leader_epoch=self.cluster.leader_epoch, topic_id=self.cluster.topic_id)
            self._in_flight[node] = partitions
            connection = self.cluster.ready_connection(node)
            if connection is None:  # connecting may take a while: not in the poll's time
                self._nursery.start_soon(self._fetch_from, node, request, max_wait)
            else:
                await self._send_fetch(connection, node, request, max_wait)

    async def _fetch_from(self, node: int, request, max_wait: float) -> None:
        """Connect to `node`, then send it the Fetch (a task in the consumer's nursery)."""
        try:
            connection = await self.cluster.connection(node)
        except KafkaError as exc:
            self._fetch_done(node, request, None, exc)
            return
        except BaseException:
            self._free(node)
            raise
        await self._send_fetch(connection, node, request, max_wait)

    async def _send_fetch(self, connection, node: int, request, max_wait: float) -> None:
        """Send one Fetch to `node`; its answer is handled when it comes, whoever polls then
        (it may outlive the poll that sent it)."""
        try:
            await connection.send(request, functools.partial(self._fetch_done, node, request), timeout=max_wait,
                                  version=connection.version_for(ApiKey.FETCH, fetch_max_version(request)))
        except KafkaError as exc:
            self._fetch_done(node, request, None, exc)
        except BaseException:  # cancelled before it was sent: the node is free again
            self._free(node)
            raise

    def _fetch_done(self, node: int, request, response, error: KafkaError | None) -> None:
        """A Fetch's outcome, in the task that learnt it (the connection's reader): no awaits here."""
        if error is None:
            count, stale, errors = self.fetch.handle_response(request, response)
            if errors:
                self._fetch_errors.extend(errors)
            elif stale:
                hinted = {tp: hint for tp, hint in leader_hints(request, response).items() if tp in stale}
                if set(stale) <= set(self.cluster.take_leader_hints(hinted)):
                    self._free(node)  # every moved partition's new leader is known (KIP-951): fetch there
                    return
                self._back_off(node)
                return
        elif error.retriable or isinstance(error, KafkaConnectionError):
            self._back_off(node)
            return
        else:
            self._fetch_errors.append(error)
        # Whatever came back (records, nothing, an error), the node is free for the next fetch.
        self._free(node)

    def _back_off(self, node: int) -> None:
        """Leadership moved or the connection failed: wait, refresh metadata, then fetch again."""
        if self._closed:
            self._free(node)
            return

        async def back_off() -> None:
            try:
                await self.env.sleep(self.retry_backoff)
                await self._refresh_metadata()
            finally:
                self._free(node)

        self._nursery.start_soon(back_off)

    def _free(self, node: int) -> None:
        del self._in_flight[node]
        self._wake_poll()

    def _wake_poll(self) -> None:
        """End the wait of the current fetch round (a Fetch came back, or the group wants a rejoin)."""
        self._wakeup.set()
        self._wakeup = trio.Event()

    async def _refresh_metadata(self) -> None:
        try:
            await self.cluster.refresh()
        except KafkaError:
            await self.env.sleep(self.retry_backoff)


async def _call(callback, partitions) -> None:
    if callback is None:
        return
    result = callback(partitions)
    if hasattr(result, "__await__"):
        await result
