"""Deliberate bugs patched into the real Raft code, for the mutation tests.

Each mutation is a function taking pytest's `monkeypatch`; the harness must
find each within a bounded number of seeds. Nothing here is a switch in node
code: the bug exists only while the test patches it in.
"""
from __future__ import annotations

import raft.core
import raft.election
import raft.leader
import raft.membership
import raft.replication
import storage.quorum_state_file
from raft.node_storage import NodeStorage
from storage.raft_log import records_from


def log_append_not_fsynced(monkeypatch) -> None:
    """Appended entries are reported durable (to the core, hence to the leader's HW) without an fsync."""

    async def append(self, entries):
        self.log.append(records_from(entries))
        return self.log.end_offset

    monkeypatch.setattr(NodeStorage, "append", append)


async def write_file_not_synced(fs, path, data):
    """storage.env.write_file_atomic without its fsyncs: renamed into place, durable only by luck."""
    tmp = path + ".tmp"
    f = fs.open(tmp, create=True)
    try:
        f.truncate(0)
        f.append(data)
    finally:
        f.close()
    fs.rename(tmp, path)


def election_state_not_durable(monkeypatch) -> None:
    """The quorum-state (epoch, vote) is replaced without fsync: a crash can forget a vote."""
    monkeypatch.setattr(storage.quorum_state_file, "write_file_atomic", write_file_not_synced)


def vote_granted_twice_in_an_epoch(monkeypatch) -> None:
    """A voter grants its vote to any up-to-date candidate, even after voting for another."""
    original = raft.election.can_grant_vote

    def buggy(*, voted_id, up_to_date, pre_vote, role, **kw):
        if not pre_vote and voted_id is not None and role not in (raft.core.Role.LEADER, raft.core.Role.CANDIDATE):
            return up_to_date
        return original(voted_id=voted_id, up_to_date=up_to_date, pre_vote=pre_vote, role=role, **kw)

    monkeypatch.setattr(raft.core, "can_grant_vote", buggy)


def high_watermark_from_leader_alone(monkeypatch) -> None:
    """The HW follows the most advanced voter instead of a majority."""

    def next_high_watermark(end_offsets, epoch_start_offset, current):
        candidate = max(max(v, 0) for v in end_offsets.values())
        return candidate if candidate > epoch_start_offset and candidate > current else current

    monkeypatch.setattr(raft.leader, "next_high_watermark", next_high_watermark)


def follower_skips_truncation(monkeypatch) -> None:
    """A follower told its log diverges keeps its conflicting suffix."""
    monkeypatch.setattr(raft.replication.__dict__[_replication_class()], "_truncate_to_leader",
                        lambda self, diverging: True)


def _replication_class() -> str:
    for name, value in vars(raft.replication).items():
        if isinstance(value, type) and "_truncate_to_leader" in vars(value):
            return name
    raise LookupError("no class defines _truncate_to_leader")


def voter_change_while_one_is_pending(monkeypatch) -> None:
    """The leader accepts a voter change while the previous one is still uncommitted."""
    original = raft.membership.Membership._change_refused

    def buggy(self):
        refused = original(self)
        if refused is not None and "previous voter change" in refused.message:
            return None
        return refused

    monkeypatch.setattr(raft.membership.Membership, "_change_refused", buggy)


def removed_candidate_counts_its_own_vote(monkeypatch) -> None:
    """A voter removed by an uncommitted change counts its own vote when it campaigns in the set that removes it."""
    original = raft.election.VoteTally.__init__

    def buggy(self, self_id, voters):
        original(self, self_id, voters)
        self.granted.add(self_id)

    monkeypatch.setattr(raft.election.VoteTally, "__init__", buggy)


MUTATIONS = {
    "log_append_not_fsynced": log_append_not_fsynced,
    "election_state_not_durable": election_state_not_durable,
    "vote_granted_twice_in_an_epoch": vote_granted_twice_in_an_epoch,
    "high_watermark_from_leader_alone": high_watermark_from_leader_alone,
    "follower_skips_truncation": follower_skips_truncation,
    "voter_change_while_one_is_pending": voter_change_while_one_is_pending,
    "removed_candidate_counts_its_own_vote": removed_candidate_counts_its_own_vote,
}

