"""The trio task that owns a RaftCore and carries out its Actions.

One task, one loop: wait for an inbound message, a proposal or the core's
deadline (`env.move_on_at`), call the core, then carry out the returned
Actions strictly in their order:

    persist quorum-state → truncate → install snapshot → append + fsync
    (then core.on_flushed) → send → apply committed → clean the log → deadline

Nothing else ever calls the core, so its state is never seen half-updated, and
every message that depends on durable state leaves only after the fsync.
Proposals are batched like a group commit: when nothing of ours awaits
commit they are appended at once; while a batch is being replicated, new ones
gather until it commits or `append_linger` passes, then go to `core.append` as
one batch (one fsync, one round of fetches). Low load gets low latency, high
load gets big batches.

A failed write or fsync of the metadata log (an OSError from the storage) ends
`run` with `MetadataLogHalt`: as in Kafka, a node whose metadata log dir
failed halts (it cannot vote or acknowledge safely any more) and its peers
carry on without it.

The state machine sees committed entries in order through `apply`, is reset
by `restore` (at start from the latest snapshot, and when the leader ships
one), and is asked for a `snapshot()` every `snapshot_interval_bytes` of
committed payload.
"""
from __future__ import annotations

import bisect
import collections
import logging
from typing import Protocol

import trio

from process.halt import DirectoryHalt
from raft.actions import Actions
from raft.entry import Entry
from raft.errors import NotLeaderError
from raft.messages import MAX_EPOCH
from raft.node_storage import NodeStorage
from raft.voter_set import unwrap_snapshot
from storage.env import Env
from storage.raft_log import MAX_ENTRY_BYTES

__all__ = ["RaftDriver", "StateMachine", "ProposalFailed", "MetadataLogHalt"]

log = logging.getLogger("raftkafka.raft.driver")

INBOX_SIZE = 10_000
_WAKE = object()  # inbox item that only wakes the loop (a proposal arrived)
_RESIGN = object()  # inbox item asking a leader to hand over (graceful shutdown)
_LINK_LOST = object()  # inbox item (peer, _LINK_LOST): the connection to peer broke
_CONNECT_REFUSED = object()  # inbox item (peer, _CONNECT_REFUSED): a connection to peer was refused
DEFAULT_SNAPSHOT_INTERVAL_BYTES = 20 * 1024 * 1024  # Kafka: metadata.log.max.record.bytes.between.snapshots


class StateMachine(Protocol):
    def restore(self, snapshot_id: tuple[int, int], data: bytes | None) -> None: ...

    def apply(self, entries: list[Entry], high_watermark: int) -> None: ...

    def snapshot(self) -> bytes: ...


class ProposalFailed(Exception):
    """Proposed entries were not (or will never be) committed by this leader."""

    def __init__(self, leader_id: int | None, epoch: int, why: str):
        super().__init__(why)
        self.leader_id = leader_id
        self.epoch = epoch


class _Proposal:
    __slots__ = ("payloads", "done", "first", "last", "epoch", "error")

    def __init__(self, payloads: list[bytes]):
        self.payloads = payloads
        self.done = trio.Event()
        self.first = self.last = -1
        self.epoch = -1
        self.error: ProposalFailed | None = None


class _VoterOp:
    """A voter change to run on the core inside the loop (raft/membership.py)."""

    __slots__ = ("change", "ran", "result", "proposal")

    def __init__(self, change):
        self.change = change  # (core, now) -> (VoterChange, Actions)
        self.ran = trio.Event()
        self.result = None
        self.proposal: _Proposal | None = None


class MetadataLogHalt(DirectoryHalt):
    """The node halts because its metadata log dir failed."""

    def __init__(self, directory: str, cause: OSError):
        super().__init__("metadata log dir", directory, cause)


class RaftDriver:
    def __init__(
        self,
        env: Env,
        core,
        storage: NodeStorage,
        state_machine: StateMachine,
        *,
        send,
        append_linger: float,
        snapshot_interval_bytes: int = DEFAULT_SNAPSHOT_INTERVAL_BYTES,
        on_voters_changed=None,
    ):
        self.env = env
        self.core = core
        self.storage = storage
        self.sm = state_machine
        self.send = send  # callable(dst, message), e.g. Transport.send
        self.append_linger = append_linger
        self.snapshot_interval_bytes = snapshot_interval_bytes
        self.inbox_send, self._inbox = trio.open_memory_channel[tuple[int, object]](INBOX_SIZE)
        self._proposed: list[_Proposal] = []
        self._linger_deadline = float("inf")
        self._in_flight: list[tuple[int, _Proposal]] = []  # sorted by last offset
        self._deadline = env.now()
        self._bytes_since_snapshot = 0
        self._last_committed: Entry | None = None
        self._role: tuple | None = None
        self.high_watermark = 0
        self.resigned = trio.Event()
        # Called with {node id: (host, port)} of the controllers to reach (the latest voter set,
        # and leaders named to us) whenever that changes.
        self.on_voters_changed = on_voters_changed
        self._voter_endpoints: dict | None = None

    # ------------------------------------------------------------- public API
    async def propose(self, payloads: list[bytes]) -> tuple[int, int]:
        """Append payloads as consecutive entries; return (first, last) offset once committed.

        Raises ProposalFailed if this node is not the leader or loses the entries, ValueError
        (before anything is appended) for an entry the log cannot hold.
        """
        proposal = _Proposal(list(payloads))
        if not proposal.payloads:
            raise ValueError("nothing to propose")
        largest = max(len(p) for p in proposal.payloads)
        if largest > MAX_ENTRY_BYTES:  # refused here: the log store would refuse it mid-append and halt
            raise ValueError(f"an entry of {largest} bytes exceeds {MAX_ENTRY_BYTES}")
        self._proposed.append(proposal)
        if len(self._proposed) == 1:
            self._linger_deadline = self.env.now() + self.append_linger
            try:  # make the loop re-read its deadline
                self.inbox_send.send_nowait((-1, _WAKE))
            except trio.WouldBlock:
                pass  # the loop is busy with a full inbox and will see the deadline
        await proposal.done.wait()
        if proposal.error is not None:
            raise proposal.error
        return proposal.first, proposal.last

    def status(self):
        return self.core.status()

    def link_lost(self, peer: int) -> None:
        """The transport's connection to `peer` broke (RaftCore.link_lost)."""
        try:
            self.inbox_send.send_nowait((peer, _LINK_LOST))
        except trio.WouldBlock:
            pass  # a full inbox: the fetch timeout still applies

    def connect_refused(self, peer: int) -> None:
        """The transport's connection to `peer` was refused (RaftCore.connect_refused)."""
        try:
            self.inbox_send.send_nowait((peer, _CONNECT_REFUSED))
        except trio.WouldBlock:
            pass  # a full inbox: the next refusal tells it again

    async def change_voters(self, change):
        """Run `change(core, now) -> (VoterChange, Actions)` (core.add_voter etc.) in the loop and
        return its VoterChange once the Voters entry it appended is committed.

        Raises ProposalFailed if that entry is lost; callers bound the wait with a timeout.
        """
        op = _VoterOp(change)
        self.inbox_send.send_nowait((-1, op))  # trio.WouldBlock when the inbox is full
        await op.ran.wait()
        if op.proposal is not None:
            await op.proposal.done.wait()
            if op.proposal.error is not None:
                raise op.proposal.error
        return op.result

    async def resign(self) -> None:
        """Graceful shutdown: a leader hands over (EndQuorumEpoch) before the process exits.

        Returns once the handover messages are queued for sending (at once if not leader).
        """
        self.resigned = trio.Event()
        self.inbox_send.send_nowait((-1, _RESIGN))
        await self.resigned.wait()

    async def _resign(self) -> None:
        try:
            actions = self.core.resign(self.env.now())
        except NotLeaderError:
            actions = None
        if actions is not None:
            log.info("resigning leadership before shutdown")
            await self._carry_out(actions)
        self.resigned.set()

    # ------------------------------------------------------------------- loop
    async def run(self) -> None:
        try:
            await self._run()
        except DirectoryHalt:
            raise
        except OSError as exc:  # only the metadata log's files do I/O in this task
            halt = MetadataLogHalt(self.storage.directory, exc)
            log.critical("%s", halt)
            raise halt from exc

    async def _run(self) -> None:
        self.sm.restore(self.core.log.snapshot_id, unwrap_snapshot(self.core.log.snapshot)[1])
        await self._carry_out(self.core.tick(self.env.now()))
        while True:
            batch = []
            with self.env.move_on_at(min(self._deadline, self._linger_deadline)):
                batch.append(await self._inbox.receive())
            while len(batch) < 256:
                try:
                    batch.append(self._inbox.receive_nowait())
                except trio.WouldBlock:
                    break
            for src, msg in batch:
                if msg is _RESIGN:
                    await self._resign()
                elif msg is _LINK_LOST:
                    await self._carry_out(self.core.link_lost(src, self.env.now()))
                elif msg is _CONNECT_REFUSED:
                    await self._carry_out(self.core.connect_refused(src, self.env.now()))
                elif isinstance(msg, _VoterOp):
                    await self._run_voter_op(msg)
                elif msg is not _WAKE:
                    await self._carry_out(self.core.handle(src, msg, self.env.now()))
            now = self.env.now()
            if self._proposed and (now >= self._linger_deadline or self._pipeline_idle()):
                await self._append_proposals(now)
            if now >= self._deadline:
                await self._carry_out(self.core.tick(now))

    async def _run_voter_op(self, op: _VoterOp) -> None:
        op.result, actions = op.change(self.core, self.env.now())
        if op.result.offset >= 0:
            prop = op.proposal = _Proposal([b""])
            prop.first = prop.last = op.result.offset
            prop.epoch = op.result.epoch
            bisect.insort(self._in_flight, (prop.last, id(prop), prop), key=lambda t: (t[0], t[1]))
        op.ran.set()
        await self._carry_out(actions)

    def _pipeline_idle(self) -> bool:
        """Nothing of ours awaits commit: batching would only add latency, so append now."""
        return self.high_watermark >= self.core.log.end_offset

    async def _append_proposals(self, now: float) -> None:
        proposals, self._proposed = self._proposed, []
        self._linger_deadline = float("inf")
        payloads = [p for prop in proposals for p in prop.payloads]
        try:
            last, actions = self.core.append(payloads, now)
        except NotLeaderError as e:
            for prop in proposals:
                prop.error = ProposalFailed(e.leader_id, e.epoch, "not the leader")
                prop.done.set()
            return
        epoch = self.core.status().epoch
        offset = last - len(payloads) + 1
        for prop in proposals:
            prop.first, prop.last, prop.epoch = offset, offset + len(prop.payloads) - 1, epoch
            offset = prop.last + 1
            bisect.insort(self._in_flight, (prop.last, id(prop), prop), key=lambda t: (t[0], t[1]))
        await self._carry_out(actions)

    # ------------------------------------------------------------ the actions
    async def _carry_out(self, actions: Actions) -> None:
        queue = collections.deque([actions])
        while queue:
            a = queue.popleft()
            if a.persist_state is not None:
                await self.storage.persist_state(a.persist_state)
            if a.truncate_to is not None:
                await self.storage.truncate_to(a.truncate_to)
                self._fail_in_flight(lambda p: p.last >= a.truncate_to, "entries truncated")
            if a.install_snapshot is not None:
                snapshot_id, data = a.install_snapshot
                await self.storage.install_snapshot(snapshot_id, data)
                log.info("installed snapshot %s (%d bytes) from the leader", tuple(snapshot_id), len(data))
                self._fail_in_flight(lambda p: True, "replaced by a snapshot")
                self.sm.restore(tuple(snapshot_id), unwrap_snapshot(data)[1])
                self._bytes_since_snapshot = 0
            if a.append:
                end = await self.storage.append(a.append)
                queue.append(self.core.on_flushed(end, self.env.now()))
            self._report_voters()  # a peer named just now is reachable for these sends
            for dst, msg in a.send:
                self.send(dst, msg)
            if a.committed:
                self._apply(a.committed, a.high_watermark)
                snap = await self._maybe_snapshot()
                if snap is not None:
                    queue.append(snap)
            elif a.high_watermark > self.high_watermark:
                self._set_hw(a.high_watermark)
            if a.delete_before is not None:
                await self.storage.delete_before(a.delete_before)
            self._deadline = a.deadline
        self._log_role_change()

    def _report_voters(self) -> None:
        if self.on_voters_changed is None:
            return
        endpoints = self.core.peer_endpoints()
        if endpoints != self._voter_endpoints:
            self._voter_endpoints = endpoints
            log.info("raft: controllers at %s", endpoints)
            self.on_voters_changed(endpoints)

    def _log_role_change(self) -> None:
        st = self.core.status()
        now_role = (st.role, st.epoch, st.leader_id)
        if now_role != self._role:
            self._role = now_role
            log.info("raft: %s in epoch %d, leader %s, log end %d, HW %d",
                     st.role, st.epoch, st.leader_id, st.log_end_offset, st.high_watermark)
            if st.epoch >= MAX_EPOCH:
                log.error("raft: epoch %d is the last an int32 holds: no controller at it can start an "
                          "election. Only a peer (or anyone, on a PLAINTEXT controller listener) can have "
                          "raised it this far: secure the controller listener (docs/security.md)", st.epoch)

    def _apply(self, entries: list[Entry], high_watermark: int) -> None:
        self.sm.apply(entries, high_watermark)
        self._last_committed = entries[-1]
        self._bytes_since_snapshot += sum(len(e.payload) for e in entries)
        by_offset = {e.offset: e.epoch for e in entries}
        top = entries[-1].offset
        while self._in_flight and self._in_flight[0][0] <= top:
            _, _, prop = self._in_flight.pop(0)
            epoch = by_offset.get(prop.last)
            if epoch is not None and epoch != prop.epoch:
                prop.error = ProposalFailed(None, epoch, "entries lost in a leader change")
            prop.done.set()
        self._set_hw(high_watermark)

    def _set_hw(self, hw: int) -> None:
        if hw > self.high_watermark:
            self.high_watermark = hw

    def _fail_in_flight(self, pred, why: str) -> None:
        keep = []
        for item in self._in_flight:
            prop = item[2]
            if pred(prop):
                prop.error = ProposalFailed(None, prop.epoch, why)
                prop.done.set()
            else:
                keep.append(item)
        self._in_flight = keep

    async def _maybe_snapshot(self) -> Actions | None:
        if self._bytes_since_snapshot < self.snapshot_interval_bytes or self._last_committed is None:
            return None
        last = self._last_committed
        snapshot_id = (last.offset + 1, last.epoch)
        data = self.core.snapshot_bytes(snapshot_id[0], self.sm.snapshot())
        await self.storage.write_snapshot(snapshot_id, data)
        self._bytes_since_snapshot = 0
        log.info("snapshot %s written (%d bytes)", snapshot_id, len(data))
        return self.core.snapshot_written(snapshot_id, data, self.env.now())
