"""Client processes of the cluster workload: the real raftkafka.client, recording a History.

Each process runs on the "client" host with its own SimEnv (its own rng), until the
phase ends. A process that hits an unexpected client error records it and starts a
new client session (a new Producer or Consumer), as an application would; the
process name stays, so per-process invariants span its sessions where they must
(nonmonotonic-send is per session: a new producer id is a new sequence).

- ProducerProcess: acks=all, idempotent or not; unique values `<name>.<session>.<n>`
  to explicit partitions of the data topics, a few sends in flight.
- AssignConsumerProcess: assign mode over every data partition from offset 0; each
  non-empty poll is one ok op; positions survive sessions (a new session seeks to the
  next offset it has not seen), so gaps and reorders are findable across them.
- GroupConsumerProcess: subscribe mode in one group; polls then commits the positions
  the poll reached (manual commits), at most every COMMIT_INTERVAL; each commit is an op.
- CommittedReaderProcess: reads the group's committed offsets now and then.
- AdminChurnProcess: creates and deletes topics and adds partitions through Admin.
"""
from __future__ import annotations

import random

import trio

from raftkafka.client import Admin, Consumer, KafkaError, NewTopic, Producer
from raftkafka.client.errors import ClientClosedError
from simulations.history import History
from wire.error_codes import ErrorCode

__all__ = ["client_error", "ClientSettings", "ProducerProcess", "AssignConsumerProcess", "GroupConsumerProcess",
           "CommittedReaderProcess", "AdminChurnProcess"]

# The client's timeouts, scaled to runs of tens of simulated seconds.
CLIENT = dict(request_timeout_ms=3000, retry_backoff_ms=100, metadata_max_age_ms=2000)


def client_error(e: BaseException) -> bool:
    """A client call's failure (possibly grouped by the client's nurseries), not a harness bug."""
    if isinstance(e, BaseExceptionGroup):
        return all(client_error(x) for x in e.exceptions)
    return isinstance(e, (KafkaError, ClientClosedError, OSError, trio.BrokenResourceError, trio.ClosedResourceError))


class ClientSettings:
    def __init__(self, bootstrap: list[str], topics: dict[str, int], group: str):
        self.bootstrap = bootstrap
        self.topics = topics  # data topic -> partition count
        self.group = group

    def partitions(self) -> list[tuple[str, int]]:
        return [(t, p) for t, n in sorted(self.topics.items()) for p in range(n)]


class _Process:
    def __init__(self, name: str, env_for, history: History, settings: ClientSettings, rng: random.Random):
        self.name = name
        self.env_for = env_for  # session number -> SimEnv
        self.history = history
        self.settings = settings
        self.rng = rng
        self.sessions = 0

    def new_env(self):
        self.sessions += 1
        return self.env_for(self.name, self.sessions)

    async def run(self, until: float) -> None:
        with trio.move_on_at(until):
            while True:
                try:
                    await self.session()
                except Exception as e:  # noqa: BLE001 - client failures end a session; others are bugs
                    if not client_error(e):
                        raise
                    self.history.trace.record(self.name, "session_error", err=_short(_first_leaf(e)))
                    await trio.sleep(0.2)

    async def session(self) -> None:
        raise NotImplementedError


class ProducerProcess(_Process):
    def __init__(self, *args, idempotent: bool, rate: float = 20.0, in_flight: int = 4):
        super().__init__(*args)
        self.idempotent = idempotent
        self.rate = rate
        self.limit = trio.Semaphore(in_flight)
        self.count = 0

    async def session(self) -> None:
        env = self.new_env()
        session = self.sessions
        async with Producer(env, self.settings.bootstrap, acks="all", enable_idempotence=self.idempotent,
                            linger_ms=2, delivery_timeout_ms=8000, **CLIENT) as producer:
            async with trio.open_nursery() as nursery:
                while True:
                    await env.sleep(self.rng.expovariate(self.rate))  # a clock timer, no cancel scope
                    topic, partition = self.rng.choice(self.settings.partitions())
                    self.count += 1
                    value = f"{self.name}.{session}.{self.count}".encode()
                    try:
                        self.limit.acquire_nowait()  # the sleep above was this turn's schedule point
                    except trio.WouldBlock:
                        await self.limit.acquire()
                    op = self.history.invoke(self.name, "send", value, topic=topic, partition=partition)
                    op.session = session
                    try:
                        future = await producer.send(topic, value, partition=partition)
                    except (KafkaError, ClientClosedError) as e:
                        self.limit.release()
                        self.history.info(op, e)
                        raise
                    nursery.start_soon(self._complete, op, future)

    async def _complete(self, op, future) -> None:
        try:
            metadata = await future
        except (KafkaError, ClientClosedError) as e:
            self.history.info(op, e)  # a timeout may still have been written
        else:
            self.history.ok(op, metadata.offset)
        finally:
            self.limit.release()


class AssignConsumerProcess(_Process):
    def __init__(self, *args):
        super().__init__(*args)
        self.next_offset: dict[tuple[str, int], int] = {}

    async def session(self) -> None:
        env = self.new_env()
        # auto.offset.reset=none: the data topics never lose their first records, so an offset out of
        # range only comes from a leader that does not hold the position (a zombie: paused past its
        # session, its metadata stale, and so is a fresh session's); resetting to the earliest
        # offset there would re-read the log (as Kafka's consumer would). The session ends and the
        # next seeks where this one stopped.
        async with Consumer(env, self.settings.bootstrap, auto_offset_reset="none", fetch_max_wait_ms=300,
                            **CLIENT) as consumer:
            partitions = self.settings.partitions()
            consumer.assign(partitions)
            for tp in partitions:
                consumer.seek(tp, self.next_offset.get(tp, 0))
            while True:
                op = self.history.invoke(self.name, "poll")
                try:
                    records = await consumer.poll(0.5)
                except KafkaError as e:
                    self.history.fail(op, e)  # a read that saw nothing
                    if e.code == ErrorCode.OFFSET_OUT_OF_RANGE:
                        raise
                    await trio.sleep(0.1)
                    continue
                seen = [(r.topic, r.partition, r.offset, r.value) for r in records]
                self.history.ok(op, seen)
                for t, p, o, _ in seen:
                    self.next_offset[(t, p)] = o + 1


class GroupConsumerProcess(_Process):
    # An application commits after processing a poll's records, but not after every
    # poll: with the small polls of this workload that was ~13 commits/s per member,
    # each a replicated write to __consumer_offsets (Kafka's auto-commit: every 5 s).
    COMMIT_INTERVAL = 0.25

    async def session(self) -> None:
        env = self.new_env()
        async with Consumer(env, self.settings.bootstrap, group_id=self.settings.group,
                            auto_offset_reset="earliest", enable_auto_commit=False, fetch_max_wait_ms=300,
                            session_timeout_ms=6000, heartbeat_interval_ms=1000, rebalance_timeout_ms=6000,
                            **CLIENT) as consumer:
            consumer.subscribe(sorted(self.settings.topics))
            next_commit = 0.0
            while True:
                try:
                    records = await consumer.poll(0.5)
                except KafkaError as e:
                    self.history.trace.record(self.name, "poll_error", err=_short(e))
                    await trio.sleep(0.1)
                    continue
                if not records or env.now() < next_commit:
                    continue
                next_commit = env.now() + self.COMMIT_INTERVAL
                offsets = {}
                for r in records:
                    offsets[(r.topic, r.partition)] = r.offset + 1
                op = self.history.invoke(self.name, "commit", dict(sorted(offsets.items())))
                try:
                    await consumer.commit(offsets)
                except KafkaError as e:
                    # A rebalance refuses the commit (fail); a timeout leaves it unknown.
                    (self.history.info if e.retriable else self.history.fail)(op, e)
                else:
                    self.history.ok(op, op.value)


class AdminChangeProcess(_Process):
    """An Admin session making one metadata change at a time, 0.1-0.8 s apart: `change(admin)`
    records its op and answers (op, the error or None); a change that failed with an error
    may still have been applied (a timeout), so it is recorded as info."""

    async def session(self) -> None:
        env = self.new_env()
        async with Admin(env, self.settings.bootstrap, **_admin_options()) as admin:
            while True:
                await trio.sleep(self.rng.uniform(0.1, 0.8))
                op, error = await self.change(admin)
                if error is None:
                    self.history.ok(op)
                else:
                    self.history.info(op, error)

    async def change(self, admin: Admin):
        raise NotImplementedError


class CommittedReaderProcess(_Process):
    async def session(self) -> None:
        env = self.new_env()
        async with Admin(env, self.settings.bootstrap, **_admin_options()) as admin:
            while True:
                await trio.sleep(self.rng.uniform(0.3, 1.0))
                op = self.history.invoke(self.name, "read_committed")
                try:
                    offsets = await admin.list_consumer_group_offsets(
                        self.settings.group, self.settings.partitions())
                except KafkaError as e:
                    self.history.fail(op, e)
                    continue
                self.history.ok(op, {tp: o for tp, o in sorted(offsets.items()) if o is not None})


class AdminChurnProcess(_Process):
    """Metadata churn: the controller's create/delete/add-partitions paths under faults.

    At most MAX_LIVE_TOPICS churn topics live at once (at the cap a create becomes a
    delete): with creates outnumbering deletes the topic count, and with it every
    follower fetch and metadata image, would otherwise grow for as long as the run."""

    MAX_LIVE_TOPICS = 4

    def __init__(self, *args, replication_factor: int):
        super().__init__(*args)
        self.replication_factor = replication_factor
        self.created = 0
        self.live: list[tuple[str, int]] = []  # (name, partitions) believed to exist

    async def session(self) -> None:
        env = self.new_env()
        async with Admin(env, self.settings.bootstrap, **_admin_options()) as admin:
            while True:
                await trio.sleep(self.rng.uniform(0.2, 1.5))
                choice = self.rng.random()
                if not self.live or (choice < 0.5 and len(self.live) < self.MAX_LIVE_TOPICS):
                    self.created += 1
                    name, n = f"churn-{self.created}", self.rng.randint(1, 4)
                    op = self.history.invoke(self.name, "create_topic", name, topic=name)
                    result = await _admin_call(admin.create_topics(
                        [NewTopic(name, n, self.replication_factor)], timeout_ms=5000), name)
                    if self._record(op, result):
                        self.live.append((name, n))
                elif choice < 0.75:
                    name, n = self.live.pop(self.rng.randrange(len(self.live)))
                    op = self.history.invoke(self.name, "delete_topic", name, topic=name)
                    self._record(op, await _admin_call(admin.delete_topics([name], timeout_ms=5000), name))
                else:
                    i = self.rng.randrange(len(self.live))
                    name, n = self.live[i]
                    op = self.history.invoke(self.name, "add_partitions", n + 1, topic=name)
                    if self._record(op, await _admin_call(admin.create_partitions({name: n + 1}, timeout_ms=5000),
                                                          name)):
                        self.live[i] = (name, n + 1)

    def _record(self, op, error) -> bool:
        if error is None:
            self.history.ok(op)
            return True
        self.history.info(op, error)  # a timed-out admin call may still complete
        return False


class ReassignProcess(_Process):
    """Partition reassignments of the data topics under faults (KIP-455): now and then a data
    partition gets a new replica set — another order (leadership moves), one replica fewer
    (down to min.insync.replicas) or more (a new replica copies the log and joins the ISR) —
    or its reassignment is cancelled. The data checker then proves no acknowledged record,
    and no committed offset, was lost on the way."""

    def __init__(self, *args, brokers: list[int], min_replicas: int):
        super().__init__(*args)
        self.brokers = sorted(brokers)
        self.min_replicas = min_replicas

    async def session(self) -> None:
        env = self.new_env()
        async with Admin(env, self.settings.bootstrap, **_admin_options()) as admin:
            while True:
                await trio.sleep(self.rng.uniform(0.3, 1.5))
                topic, partition = self.rng.choice(self.settings.partitions())
                if self.rng.random() < 0.2:
                    target = None  # cancel (NO_REASSIGNMENT_IN_PROGRESS when none is running)
                else:
                    size = self.rng.randint(min(self.min_replicas, len(self.brokers)), len(self.brokers))
                    target = self.rng.sample(self.brokers, size)
                op = self.history.invoke(self.name, "reassign", target, topic=topic, partition=partition)
                try:
                    results = await admin.alter_partition_reassignments({(topic, partition): target},
                                                                        timeout_ms=5000)
                    error = results.get((topic, partition))
                except KafkaError as e:
                    error = e
                if error is None:
                    self.history.ok(op)
                else:
                    self.history.info(op, error)


async def _admin_call(call, name: str):
    """None on success, else the error (raised or per topic)."""
    try:
        results = await call
    except KafkaError as e:
        return e
    return results.get(name)


def _admin_options() -> dict:
    return dict(request_timeout_ms=CLIENT["request_timeout_ms"], retry_backoff_ms=CLIENT["retry_backoff_ms"])


def _first_leaf(e: BaseException) -> BaseException:
    while isinstance(e, BaseExceptionGroup):
        e = e.exceptions[0]
    return e


def _short(e: BaseException) -> str:
    text = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {text}"[:80]
