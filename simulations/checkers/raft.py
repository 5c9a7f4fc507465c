"""Raft safety and liveness invariants, checked while a simulation runs and at its end.

Modelled on Kafka's RaftEventSimulationTest (reference/simulation.md §3.5, §6.3):

- SingleLeader: at most one leader per epoch, from in-memory roles and from
  every node's persisted election state.
- MonotonicEpoch: a node's persisted epoch never goes back, across restarts too;
  its in-memory epoch never goes back within an incarnation.
- MonotonicHighWatermark: a node's HW never goes back within an incarnation,
  and the highest HW ever reported never exceeds what is committed.
- MajorityReachedHighWatermark: a majority of voters hold, *durably* (what a
  crash would keep), every entry below a leader's HW, with the right epochs. The voters are
  the set in force at the HW's last entry (the latest committed Voters record before it,
  KIP-853, else the initial set) or the leader's latest set, which commits everything before
  it as soon as it is appended (one change at a time: the two majorities overlap). A voter
  whose disk was wiped holds nothing; what it had acknowledged needs one holder fewer, until
  a set names it again with its new directory.
- ConsistentCommittedData: the first entry ever applied at an offset is the only
  one any node may apply there; each node applies a gapless sequence; a
  snapshot's content matches the committed prefix it claims to cover.
- OneVoterChangeAtATime: a leader never holds two uncommitted voter changes (KIP-853).
- ElectedByMajority: every committed LeaderChange record names granting voters that are all
  voters of the set the leader was elected in, and a majority of it (a candidate outside its
  set, removed by an uncommitted change, does not count its own vote).
- AckedAppendDurable: an acknowledged append sits at its offset in the committed
  log, and after the heal phase every node holds every acknowledged append.

The checker never touches node internals beyond the read-only `role_summary()` / `status()` and
the durable files; the state machine of each node reports what it applied.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

import msgpack

from raft.commit import quorum_size
from raft.entry import decode_leader_change
from raft.quorum_state import Role
from raft.voter_set import decode_voters
from simulations.trace import Trace

__all__ = ["RaftChecker", "Violation", "GENESIS_DIGEST", "entry_digest"]

GENESIS_DIGEST = b"\0" * 32


def entry_digest(prev: bytes, offset: int, epoch: int, payload: bytes, control: bool) -> bytes:
    return hashlib.sha256(prev + msgpack.packb([offset, epoch, payload, control])).digest()


@dataclass
class Violation:
    invariant: str
    message: str
    sim_time: float

    def to_dict(self) -> dict:
        return {"invariant": self.invariant, "message": self.message, "sim_time": round(self.sim_time, 6)}


class RaftChecker:
    def __init__(self, trace: Trace, voters: list[int], *, max_violations: int = 20):
        self.trace = trace
        self.voters = sorted(voters)
        self.max_violations = max_violations
        self.violations: list[Violation] = []
        self.now = 0.0
        self.leader_of_epoch: dict[int, int] = {}  # from roles seen in memory
        self.persisted_leader_of_epoch: dict[int, int] = {}
        self.persisted_epoch: dict[int, int] = {}
        self.seen: dict[int, tuple[int, int, int]] = {}  # node -> (incarnation, epoch, hw)
        self.max_hw = 0
        # The committed log as first applied anywhere: offset -> (epoch, payload, control).
        self.committed: dict[int, tuple[int, bytes, bool]] = {}
        self.prefix: list[bytes] = [GENESIS_DIGEST]  # prefix[n] = digest of committed[0..n)
        self.applied_end: dict[int, int] = {}
        self.acked: dict[bytes, int] = {}  # acknowledged payload -> offset
        self.replaced: dict[int, int] = {}  # voter whose disk was wiped -> the end it lost (forget_disk)
        self.voter_changes: list[tuple[int, list[int]]] = []  # committed Voters records: (offset, ids)
        self.new_directories: dict[int, str] = {}  # wiped node -> the directory id it was formatted with

    # ---------------------------------------------------------------- reporting
    def violate(self, invariant: str, message: str) -> None:
        if len(self.violations) < self.max_violations:
            self.violations.append(Violation(invariant, message, self.now))
        self.trace.record("checker", "violation", invariant=invariant)

    @property
    def ok(self) -> bool:
        return not self.violations

    # ------------------------------------------------------- state machine hooks
    def on_restore(self, node: int, end_offset: int, digest: bytes) -> None:
        self.applied_end[node] = end_offset
        if end_offset < len(self.prefix) and self.prefix[end_offset] != digest:
            self.violate("ConsistentCommittedData", f"node {node} restored a snapshot at {end_offset} "
                         "whose content differs from the committed prefix")
        elif end_offset >= len(self.prefix) and end_offset > 0:
            self.violate("ConsistentCommittedData", f"node {node} restored a snapshot at {end_offset}, "
                         f"beyond anything ever applied ({len(self.prefix) - 1})")

    def on_restore_unverified(self, node: int, end_offset: int) -> None:
        """A snapshot whose content another checker verifies (the metadata image)."""
        self.applied_end[node] = end_offset
        if end_offset > len(self.prefix) - 1 and end_offset > 0:
            self.violate("ConsistentCommittedData", f"node {node} restored a snapshot at {end_offset}, "
                         f"beyond anything ever applied ({len(self.prefix) - 1})")

    def on_apply(self, node: int, offset: int, epoch: int, payload: bytes, control: bool) -> None:
        expected = self.applied_end.get(node, 0)
        if offset != expected:
            self.violate("ConsistentCommittedData", f"node {node} applied offset {offset}, expected {expected}")
        self.applied_end[node] = offset + 1
        first = self.committed.get(offset)
        if first is None:
            if offset != len(self.prefix) - 1:
                self.violate("ConsistentCommittedData", f"node {node} applied {offset} with a gap before it")
                return
            self.committed[offset] = (epoch, payload, control)
            self.prefix.append(entry_digest(self.prefix[-1], offset, epoch, payload, control))
            election = decode_leader_change(payload) if control else None
            if election is not None:
                self._check_election(offset, election)
            voters = decode_voters(payload) if control else None
            if voters is not None:
                self.voter_changes.append((offset, [v.node_id for v in voters]))
                for v in voters:  # a wiped node added again, as its new replica: its copy counts again
                    if self.new_directories.get(v.node_id) == v.directory_id:
                        self.replaced.pop(v.node_id, None)
        elif first != (epoch, payload, control):
            self.violate("ConsistentCommittedData", f"node {node} applied a different entry at {offset} "
                         f"(epoch {epoch}, first committed in epoch {first[0]})")

    def _check_election(self, offset: int, election) -> None:
        voters, granted = set(election.voters), set(election.granting_voters)
        if not granted <= voters or len(granted) < quorum_size(len(voters)):
            self.violate("ElectedByMajority", f"the leader change committed at {offset}: leader "
                         f"{election.leader_id} elected by {sorted(granted)} of voters {sorted(voters)}")

    # --------------------------------------------------------------- workload
    def on_ack(self, payload: bytes, offset: int) -> None:
        self.acked[payload] = offset
        first = self.committed.get(offset)
        if first is not None and first[1] != payload:
            self.violate("AckedAppendDurable", f"append acknowledged at {offset}, but another entry is committed there")

    # ---------------------------------------------------------------- polling
    def observe(self, node: int, incarnation: int, role: Role, epoch: int, hw: int) -> None:
        """In-memory view of one live node (QuorumStatus fields)."""
        if role is Role.LEADER:
            holder = self.leader_of_epoch.setdefault(epoch, node)
            if holder != node:
                self.violate("SingleLeader", f"nodes {holder} and {node} both led epoch {epoch}")
        prev = self.seen.get(node)
        if prev is not None and prev[0] == incarnation:
            if epoch < prev[1]:
                self.violate("MonotonicEpoch", f"node {node} went from epoch {prev[1]} to {epoch}")
            if hw < prev[2]:
                self.violate("MonotonicHighWatermark", f"node {node} HW went from {prev[2]} to {hw}")
        self.seen[node] = (incarnation, epoch, hw)
        if hw > self.max_hw:
            self.max_hw = hw

    def observe_leader_voter_changes(self, node: int, hw: int, change_offsets) -> None:
        """A leader holds at most one uncommitted Voters record (KIP-853: one change at a time).
        Committed is what any node applied, or the leader's HW (a new leader's starts low)."""
        committed_end = max(hw, len(self.prefix) - 1)
        pending = [o for o in change_offsets if o >= committed_end]
        if len(pending) > 1:
            self.violate("OneVoterChangeAtATime", f"leader {node} holds uncommitted voter changes {pending} "
                         f"(committed below {committed_end})")

    def observe_persisted(self, node: int, epoch: int, leader_id: int | None) -> None:
        """Durable election state of one node (survives its crashes)."""
        prev = self.persisted_epoch.get(node, 0)
        if epoch < prev:
            self.violate("MonotonicEpoch", f"node {node} persisted epoch went from {prev} to {epoch}")
        self.persisted_epoch[node] = max(prev, epoch)
        if leader_id is not None:
            holder = self.persisted_leader_of_epoch.setdefault(epoch, leader_id)
            if holder != leader_id:
                self.violate("SingleLeader", f"epoch {epoch} has persisted leaders {holder} and {leader_id}")

    def forget_disk(self, node: int, lost_end: int, directory_id: str = "") -> None:
        """The node's disk was wiped when the log was committed, or acknowledged by the node to a
        leader (which may still count that acknowledgement), up to `lost_end`: its persisted
        election state starts afresh, and it no longer holds any voter's log (it rejoins as an
        observer: raftkafka.node.assembly.replaced_voter). What lies below `lost_end` has lost
        that copy to the fault: one holder fewer is required of it. A voter change that adds
        the node back with `directory_id` (its new disk) makes it a full voter again."""
        self.persisted_epoch.pop(node, None)
        self.replaced[node] = max(lost_end, self.max_hw)
        self.new_directories[node] = directory_id

    def check_majority(self, leader: int, hw: int, durable: dict[int, "DurableLog"], *,
                       leader_voters: list[tuple[int, str]] | None = None) -> None:
        """A majority of voters must durably hold [0, hw) as committed. `leader_voters`: the
        leader's latest set as (id, directory id); a wiped node that set names with its new
        directory is a voter again there, its new copy counting as any voter's (the leader
        counts it so)."""
        if hw <= 0:
            return
        candidates = [(self.voters_at(hw - 1), set())]
        if leader_voters:
            again = {v for v, directory in leader_voters
                     if v in self.replaced and self.new_directories.get(v) == directory}
            candidates.append((sorted(v for v, _ in leader_voters), again))
        holders = []
        for voters, again in candidates:
            replaced = {v: end for v, end in self.replaced.items() if v not in again}
            lost = sum(1 for v in voters if v in replaced and hw <= replaced[v])
            holders = [v for v in voters if v in durable and v not in replaced
                       and durable[v].holds(hw, self.committed)]
            if len(holders) >= len(voters) // 2 + 1 - lost:
                return
        self.violate("MajorityReachedHighWatermark",
                     f"leader {leader} has HW {hw}, but only voters {holders} durably hold it")

    def voters_at(self, offset: int) -> list[int]:
        for at, voters in reversed(self.voter_changes):
            if at <= offset:
                return voters
        return self.voters

    # ------------------------------------------------------------------ final
    def check_final(self, final_logs: dict[int, "DurableLog"]) -> None:
        """After the heal phase: every acknowledged append is committed everywhere."""
        for payload, offset in self.acked.items():
            first = self.committed.get(offset)
            if first is None or first[1] != payload:
                self.violate("AckedAppendDurable", f"acknowledged append at offset {offset} is not committed there")
        for node, log in sorted(final_logs.items()):
            # Only what the node itself applied as committed: past that it may still hold an
            # older epoch's uncommitted suffix that its new leader has not yet had it truncate
            # (seed 2816: a leader elected 30 ms before the end committed its LeaderChange at
            # the offset where the deposed leader still held an unacknowledged entry).
            for offset in range(log.start, min(log.end, self.applied_end.get(node, 0))):
                first = self.committed.get(offset)
                if first is not None and log.epoch_at(offset) != first[0]:
                    self.violate("ConsistentCommittedData", f"node {node} holds a different entry at committed offset {offset}")
                    break


class DurableLog:
    """What one node durably holds: offsets [start, end) with their epochs (start = snapshot end)."""

    def __init__(self, start: int, end: int, epochs: dict[int, int], snapshot_epoch: int):
        self.start, self.end = start, end
        self._epochs = epochs
        self.snapshot_epoch = snapshot_epoch

    def epoch_at(self, offset: int) -> int | None:
        return self._epochs.get(offset)

    def holds(self, hw: int, committed: dict[int, tuple[int, bytes, bool]]) -> bool:
        if self.end < hw:
            return False
        last = hw - 1
        if last < self.start:
            return True  # covered by a snapshot (its content is checked on restore)
        first = committed.get(last)
        return first is None or self._epochs.get(last) == first[0]
