"""The active controller: one trio task, one queue of events (KRaft's QuorumController).

Every write goes the same way: validate against the *speculative* image → generate records
(the pure functions of metadata.controller.*) → apply them to the speculative image at once
(so the next request sees them) → hand them to Raft as atomic batches → answer the request
when its last offset commits. A request that writes nothing is answered once everything
written before it has committed, since it read uncommitted state.

Leadership:
- a newly elected leader does nothing until its own LeaderChange has committed and been
  applied (the committed image then holds the whole log; Kafka's "claim" after catch-up);
- on losing leadership (the Raft role or epoch changes, or a proposal fails) the
  speculative image is dropped — the next term starts again from the committed image — and
  every waiting request is answered NOT_CONTROLLER.

Faults (Kafka's QuorumController.renounce): an unexpected exception while an operation
generates or applies its records — or while any event is handled — fails that request
(ControllerFault: UNKNOWN_SERVER_ERROR), drops the speculative image (the next term starts
again from the committed one), answers every waiting request NOT_CONTROLLER and resigns
Raft leadership so a healthy controller takes over; this node does not take the role back
in the epoch it renounced. The process carries on. An operation's batches are prepared in
full before any of them is applied or proposed, so a failure never leaves half an
operation behind; an entry larger than MAX_RECORD_BYTES is refused (RECORD_LIST_TOO_LARGE)
before anything is applied, as Kafka refuses a metadata batch over its limit.

Periodic work, on the same queue: fence at most one broker whose session lapsed, or whose
controller connection closed without a heartbeat within the close grace, per event
(BrokerHeartbeatManager and ConnectionGrace soft state, restarted on activation); else, when
due, move leadership back to preferred replicas (metadata.controller.leader_balance). Snapshots are taken
by the state machine's schedule (metadata.controller.state_machine).
"""
from __future__ import annotations

import collections
import logging
import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import trio

from metadata.controller.brokers import fence_closed_broker, fence_stale_broker
from metadata.controller.connection_grace import DEFAULT_CLOSE_GRACE, ConnectionGrace
from metadata.controller.elect_leaders import rebalance_preferred_leaders
from metadata.controller.heartbeats import DEFAULT_SESSION_TIMEOUT, BrokerHeartbeatManager
from metadata.controller.leader_balance import LeaderBalanceSchedule
from metadata.controller.state_machine import ControllerStateMachine
from metadata.delta import MetadataDelta
from metadata.errors import ApiError
from metadata.image import ELR_FEATURE, METADATA_VERSION, MetadataImage
from metadata.log_format import encode_batch
from metadata.records import BrokerRegistrationChange, FeatureLevel, Record
from raft.driver import ProposalFailed
from raft.quorum_state import Role
from storage.env import Env
from wire.error_codes import ErrorCode

__all__ = ["ControllerService", "NotControllerError", "ControllerFault", "Operation", "MAX_RECORD_BYTES"]

log = logging.getLogger("raftkafka.metadata.controller")

# fn(speculative image, offset of the first record it would write, now) -> (batches, result)
Operation = Callable[[MetadataImage, int, float], tuple[list[list[Record]], Any]]

DEFAULT_TICK = 0.25
# Kafka's KafkaRaftClient.MAX_BATCH_SIZE_BYTES: one metadata record must fit in a Raft batch
# (and far below what a Raft entry and a Fetch frame may carry).
MAX_RECORD_BYTES = 8 * 1024 * 1024
# Bounds on one admin operation, as Kafka's QuorumController has them: at most
# MAX_RECORDS_PER_USER_OP records, at most one metadata batch's bytes.
MAX_RECORDS_PER_USER_OP = 10_000
MAX_USER_OP_BYTES = 8 * 1024 * 1024
# Operations waiting for the controller's task; more are refused at once (REQUEST_TIMED_OUT,
# retriable) instead of queueing without bound. The events queue itself stays unbounded so
# the controller's own events (ticks, commits) are never dropped.
MAX_QUEUED_OPERATIONS = 10_000


class NotControllerError(Exception):
    def __init__(self, leader_id: int | None):
        super().__init__(f"not the active controller (leader: {leader_id})")
        self.leader_id = leader_id


class ControllerFault(Exception):
    """An unexpected error in a controller operation; the controller renounced leadership."""


class _Op:
    __slots__ = ("name", "fn", "admin", "deadline", "done", "result", "offset", "wait_offset", "error")

    def __init__(self, name: str, fn: Operation, admin: bool, deadline: float | None):
        self.name, self.fn = name, fn
        self.admin = admin  # bounded like a user operation
        self.deadline = deadline  # not started after this (the client has given up)
        self.done = trio.Event()
        self.result: Any = None
        self.offset = -1  # last offset this op wrote (-1: nothing)
        self.wait_offset = -1  # answered once this offset commits
        self.error: Exception | None = None


@dataclass(frozen=True, slots=True)
class _Committed:
    term: int
    last_offset: int


@dataclass(frozen=True, slots=True)
class _Lost:
    term: int
    why: str


@dataclass(frozen=True, slots=True)
class _Closed:
    connection: object


@dataclass(frozen=True, slots=True)
class _Fault:
    term: int
    why: str


@dataclass(frozen=True, slots=True)
class _Batch:
    first: int
    payloads: list[bytes]


_TICK = object()
_WAKE = object()


class ControllerService:
    def __init__(self, env: Env, *, node_id: int, driver, state_machine: ControllerStateMachine,
                 static: Mapping[str, str] | None = None,
                 session_timeout: float = DEFAULT_SESSION_TIMEOUT, tick: float = DEFAULT_TICK,
                 close_grace: float = DEFAULT_CLOSE_GRACE, bootstrap_records: list | None = None):
        self.env = env
        self.node_id = node_id
        self.driver = driver
        self.sm = state_machine
        self.static = dict(static or {})
        self.bootstrap_records = list(bootstrap_records or ())  # from format (--add-scram)
        self.heartbeats = BrokerHeartbeatManager(session_timeout)
        self.grace = ConnectionGrace(close_grace)
        self.leader_balance = LeaderBalanceSchedule(self.static)  # auto.leader.rebalance.enable
        self.tick_interval = tick
        self._send, self._events = trio.open_memory_channel[object](math.inf)
        self._queued_ops = 0  # submitted, not yet taken by the controller's task
        state_machine.on_leader_change = self._leader_changed
        # The last controllers in turn (a LeaderChange naming another leader applied here):
        # (node, when this node applied it).
        self._controllers: collections.deque[tuple[int, float]] = collections.deque(maxlen=2)
        self._departed: int | None = None  # the dead predecessor `_expect_after_death` acted on
        self.active = False
        self.activations = 0  # how many terms this node has been the active controller
        self._term = 0
        self._epoch = -1
        self._spec: MetadataImage | None = None
        self._next_offset = 0
        self._written = -1  # last offset written this term
        self._committed = -1  # last offset known committed this term
        self._awaiting: collections.deque[_Op] = collections.deque()
        self._appender_send: trio.MemorySendChannel | None = None
        self._appender_scope: trio.CancelScope | None = None
        self._nursery: trio.Nursery | None = None
        self.fenced_log: list[tuple[float, int]] = []  # (when, broker) fence decisions
        # (epoch, why) of the latest renounces: no taking the role back in those epochs.
        self.renounced: collections.deque[tuple[int, str]] = collections.deque(maxlen=16)

    # --------------------------------------------------------------- public
    @property
    def image(self) -> MetadataImage | None:
        """The speculative image while active (None otherwise)."""
        return self._spec

    def leader_hint(self) -> int | None:
        return self.driver.status().leader_id

    async def submit(self, name: str, fn: Operation, *, admin: bool = False,
                     deadline: float | None = None) -> tuple[Any, int]:
        """Run `fn` as a controller write; (result, offset) once committed.

        Raises NotControllerError if this node is not (or stops being) the active controller,
        ApiError(POLICY_VIOLATION) if an `admin` operation would write more than a user
        operation may, ApiError(REQUEST_TIMED_OUT) if its turn comes after `deadline` or
        MAX_QUEUED_OPERATIONS are already waiting.
        """
        if self._queued_ops >= MAX_QUEUED_OPERATIONS:
            raise ApiError(ErrorCode.REQUEST_TIMED_OUT, f"{MAX_QUEUED_OPERATIONS} controller operations already queued")
        op = _Op(name, fn, admin, deadline)
        self._queued_ops += 1
        self._send.send_nowait(op)
        await op.done.wait()
        if op.error is not None:
            raise op.error
        return op.result, op.offset

    def connection_closed(self, connection) -> None:
        """A connection that brokers may have heartbeated on closed (connection_grace)."""
        self._send.send_nowait(_Closed(connection))

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._ticker)
            task_status.started()
            try:
                async for event in self._events:
                    try:
                        self._handle(event)
                    except Exception as e:  # Kafka's handleEventException: fail over, never crash
                        log.exception("controller event %r failed", event)
                        self._renounce(f"{type(e).__name__}: {e}")
            finally:
                self._fail_waiting()

    def _handle(self, event) -> None:
        self._check_leadership()
        if isinstance(event, _Op):
            self._queued_ops -= 1
            self._execute(event)
        elif event is _TICK:
            self._tick()
        elif isinstance(event, _Committed):
            self._on_committed(event)
        elif isinstance(event, _Closed) and self.active:
            broker_id = self.grace.closed(event.connection, self.env.now())
            if broker_id is not None:
                log.info("broker %d: its controller connection closed; fencing it in %.2fs "
                         "unless it heartbeats", broker_id, self.grace.grace)
                self._tick_at(self.env.now() + self.grace.grace)
        elif isinstance(event, _Lost) and event.term == self._term and self.active:
            self._deactivate(event.why)
        elif isinstance(event, _Fault) and event.term == self._term and self.active:
            self._renounce(event.why)

    # ------------------------------------------------------------ leadership
    def _wake(self) -> None:
        self._send.send_nowait(_WAKE)

    def _leader_changed(self, epoch: int, leader: int | None) -> None:
        if leader is not None and (not self._controllers or self._controllers[-1][0] != leader):
            self._controllers.append((leader, self.env.now()))
        self._wake()

    def _check_leadership(self) -> None:
        st = self.driver.status()
        if self.active and (st.role is not Role.LEADER or st.epoch != self._epoch):
            self._deactivate(f"raft role {st.role} in epoch {st.epoch}")
        if (not self.active and st.role is Role.LEADER
                and not any(epoch == st.epoch for epoch, _ in self.renounced)
                and self.sm.leader_change == (st.epoch, self.node_id)
                and self.sm.applied_end >= st.log_end_offset):
            self._activate(st)

    def _activate(self, st) -> None:
        self._term += 1
        self.activations += 1
        self.active = True
        self._epoch = st.epoch
        self._spec = self.sm.image
        self._next_offset = st.log_end_offset
        self._written = self._committed = st.log_end_offset - 1
        self.heartbeats.activate(self._spec, self.env.now())
        self.grace.reset()
        self._expect_after_death(st.departed_leader)
        self.leader_balance.activated(self.env.now())
        self._appender_send, receive = trio.open_memory_channel[_Batch](math.inf)
        self._appender_scope = trio.CancelScope()
        self._nursery.start_soon(self._appender, self._term, receive, self._appender_scope)
        log.info("active controller in epoch %d from offset %d (%d brokers, %d topics)",
                 st.epoch, st.log_end_offset, len(self._spec.brokers),
                 len(self._spec.topics_by_name))
        if METADATA_VERSION not in self._spec.features:
            # Bootstrap a fresh cluster; eligible leader replicas on, as Kafka 4.1 does for new
            # clusters (KIP-966: a broker that lost unflushed data is never elected over one
            # that kept the acknowledged records).
            # Then what format seeded (SCRAM users), in the same batch.
            self._write([[FeatureLevel(METADATA_VERSION, 1), FeatureLevel(ELR_FEATURE, 1),
                          *self.bootstrap_records]])

    def _expect_after_death(self, departed: int | None) -> None:
        """If the previous controller's process is gone, fence every broker that does not
        heartbeat within the close grace, instead of restarting full sessions.

        Gone: Raft's departed leader (our link to the leader we followed broke, a new connection
        to it was refused, and nothing came from it since: nothing listens at its address).
        Then every connection it had closed with it, so no broker holds
        a session lease from it, and a live broker heartbeats again at once (its lease ends
        with that connection: metadata.broker_lifecycle). A lease from a controller before it
        ends within a session of that controller being deposed; so this holds only once the
        departed leader has been the controller for a session as seen here. Otherwise
        (a stopped or cut-off predecessor closes nothing) every broker gets a full session.
        If the departed leader is heard from before the grace ends, the deadlines go (`_tick`)."""
        self._departed = None
        if departed is None or len(self._controllers) < 2:
            return
        (predecessor, since), (me, _) = self._controllers
        now = self.env.now()
        if me != self.node_id or predecessor != departed or now - since < self.heartbeats.session_timeout:
            return
        self._departed = departed
        self.grace.expect({bid: reg.epoch for bid, reg in sorted(self._spec.brokers.items())
                           if not reg.fenced}, now)
        self._tick_at(now + self.grace.grace)
        log.info("controller %d is gone (its Raft link closed, reconnecting refused): fencing brokers "
                 "that do not heartbeat within %.2fs", departed, self.grace.grace)

    def _deactivate(self, why: str) -> None:
        log.info("no longer the active controller: %s", why)
        self.active = False
        self._spec = None
        if self._appender_scope is not None:
            self._appender_scope.cancel()
        self._appender_scope = self._appender_send = None
        self._fail_waiting()

    def _renounce(self, why: str) -> None:
        """Kafka's renounce(): back to the committed image, leadership handed to another voter."""
        epoch = self._epoch if self.active else self.driver.status().epoch
        log.error("renouncing controller leadership in epoch %d: %s", epoch, why)
        self.renounced.append((epoch, why))
        if self.active:
            self._deactivate(f"renounced: {why}")
        self._nursery.start_soon(self._resign)

    async def _resign(self) -> None:
        try:
            await self.driver.resign()
        except Exception:  # the driver stopping is its own business; this node carries on
            log.exception("resigning Raft leadership failed")

    def _fail_waiting(self) -> None:
        hint = self.driver.status().leader_id
        hint = None if hint == self.node_id else hint
        while self._awaiting:
            op = self._awaiting.popleft()
            op.error = NotControllerError(hint)
            op.done.set()

    # ------------------------------------------------------------------ writes
    def _execute(self, op: _Op) -> None:
        if not self.active:
            hint = self.driver.status().leader_id
            op.error = NotControllerError(None if hint == self.node_id else hint)
            op.done.set()
            return
        now = self.env.now()
        if op.deadline is not None and now > op.deadline:
            op.error = ApiError(ErrorCode.REQUEST_TIMED_OUT, f"{op.name} waited past its deadline; nothing written")
            op.done.set()
            return
        try:
            batches, op.result = op.fn(self._spec, self._next_offset, now)
            encoded = self._encode_bounded(op, batches)
            written = self._write(batches, encoded)
        except ApiError as e:  # a refusal with a Kafka error code; nothing was written
            log.warning("controller operation %s refused: %s", op.name, e.message)
            op.error = e
            op.done.set()
            return
        except Exception as e:  # a bug: this request fails, a healthy controller takes over
            log.exception("controller operation %s failed", op.name)
            op.error = ControllerFault(f"{op.name}: {type(e).__name__}: {e}")
            op.done.set()
            self._renounce(f"operation {op.name} failed: {type(e).__name__}: {e}")
            return
        op.offset = written
        op.wait_offset = self._written
        if op.wait_offset <= self._committed:
            op.done.set()
        else:
            self._awaiting.append(op)

    @staticmethod
    def _encode_bounded(op: _Op, batches: list[list[Record]]) -> list[list[bytes]]:
        """Each batch's payloads, or ApiError before anything is applied if an admin operation
        breaks a user operation's bounds (each record's own bound is checked in _write)."""
        encoded = [encode_batch(batch) if batch else [] for batch in batches]
        payloads = [p for batch in encoded for p in batch]
        if op.admin:
            size = sum(map(len, payloads))
            if len(payloads) > MAX_RECORDS_PER_USER_OP or size > MAX_USER_OP_BYTES:
                raise ApiError(ErrorCode.POLICY_VIOLATION,
                               f"Unable to perform excessively large batch operation: {op.name} would write "
                               f"{len(payloads)} records of {size} bytes (at most {MAX_RECORDS_PER_USER_OP} "
                               f"records, {MAX_USER_OP_BYTES} bytes)")
        return encoded

    def _write(self, batches: list[list[Record]], encoded: list[list[bytes]] | None = None) -> int:
        """Apply batches to the speculative image and queue them for Raft; the last offset
        written (-1 if every batch was empty). All of them are prepared first: an error
        leaves the speculative image and the Raft queue as they were. `encoded`: the batches'
        payloads if known."""
        spec, next_offset = self._spec, self._next_offset
        prepared: list[_Batch] = []
        fencings: list[tuple[int, int]] = []
        for index, batch in enumerate(batches):
            if not batch:
                continue
            payloads = encoded[index] if encoded is not None else encode_batch(batch)
            largest = max(len(p) for p in payloads)
            if largest > MAX_RECORD_BYTES:
                raise ApiError(ErrorCode.RECORD_LIST_TOO_LARGE,
                               f"a metadata record of {largest} bytes exceeds the limit of {MAX_RECORD_BYTES}")
            last = next_offset + len(batch) - 1
            delta = MetadataDelta(spec)
            for i, rec in enumerate(batch):
                delta.replay(rec)
                if type(rec) is BrokerRegistrationChange and rec.fenced:
                    fencings.append((rec.broker_id, next_offset + i))
            delta.set_provenance(last, self._epoch)
            spec = delta.apply()
            prepared.append(_Batch(next_offset, payloads))
            next_offset = last + 1
        if not prepared:
            return -1
        for broker_id, offset in fencings:
            self.heartbeats.record_fencing(broker_id, offset)
        self._spec, self._next_offset, self._written = spec, next_offset, next_offset - 1
        for b in prepared:
            self._appender_send.send_nowait(b)
        return self._written

    def _on_committed(self, event: _Committed) -> None:
        if event.term != self._term or not self.active:
            return
        self._committed = max(self._committed, event.last_offset)
        while self._awaiting and self._awaiting[0].wait_offset <= self._committed:
            self._awaiting.popleft().done.set()

    async def _appender(self, term: int, receive, scope: trio.CancelScope) -> None:
        """Hands batches to Raft in order; while one proposal commits, the next ones gather
        into a single proposal (group commit)."""
        with scope:
            while True:
                pending = [await receive.receive()]
                while True:
                    try:
                        pending.append(receive.receive_nowait())
                    except trio.WouldBlock:
                        break
                payloads = [p for b in pending for p in b.payloads]
                try:
                    first, last = await self.driver.propose(payloads)
                except ProposalFailed as e:
                    self._send.send_nowait(_Lost(term, f"proposal failed: {e}"))
                    return
                except Exception as e:  # the driver refused the entries: fail over, never crash
                    log.exception("proposing %d metadata entries failed", len(payloads))
                    self._send.send_nowait(_Fault(term, f"proposal failed: {type(e).__name__}: {e}"))
                    return
                if first != pending[0].first:
                    self._send.send_nowait(_Lost(term, f"entries landed at {first}, "
                                                       f"expected {pending[0].first}"))
                    return
                self._send.send_nowait(_Committed(term, last))

    # ---------------------------------------------------------------- periodic
    async def _ticker(self) -> None:
        while True:
            await self.env.sleep(self.tick_interval)
            self._send.send_nowait(_TICK)

    def _tick_at(self, deadline: float) -> None:
        """A tick at `deadline` too: a grace that ends between two ticks fences on time."""
        async def tick() -> None:
            await self.env.sleep_until(deadline)
            self._send.send_nowait(_TICK)
        if self._nursery is not None:
            self._nursery.start_soon(tick)

    def _tick(self) -> None:
        if not self.active:
            return
        now = self.env.now()
        if self._departed is not None and self.driver.status().departed_leader != self._departed:
            withdrawn = self.grace.withdraw_expected()
            if withdrawn:
                log.info("controller %d answered after all: brokers %s get their full sessions",
                         self._departed, withdrawn)
            self._departed = None
        batches, fenced = fence_stale_broker(self._spec, self.heartbeats, now, self.static)
        why = f"no heartbeat for {self.heartbeats.session_timeout:.1f}s"
        if fenced is None:
            batches, fenced = fence_closed_broker(self._spec, self.grace, self.heartbeats, now, self.static)
            why = (f"its controller connection closed (or this controller's predecessor died) and no "
                   f"heartbeat came within {self.grace.grace:.2f}s")
        if fenced is not None:
            self.fenced_log.append((now, fenced))
            log.info("fencing broker %d: %s", fenced, why)
            self._write(batches)
            self._send.send_nowait(_TICK)  # one broker per event; look for the next at once
        elif self.leader_balance.due(now):
            records, more = rebalance_preferred_leaders(self._spec, static=self.static)
            if records:
                log.info("moving leadership of %d partition(s) back to their preferred replicas", len(records))
                self._write([records])
            self.leader_balance.ran(now, more)
