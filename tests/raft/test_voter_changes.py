"""KIP-853 voter changes in the sans-IO core: add, remove, update, and their rules.

An in-process cluster (tests/raft/cluster.py) with instant delivery: each test drives real
RaftCores through the leader's add_voter/remove_voter and checks what the quorum does.
"""
from __future__ import annotations

import pytest

from raft.config import RaftConfig
from raft.entry import Entry
from raft.log import RaftLog
from raft.messages import FetchRequest
from raft.node_rpc import describe_from_status
from raft.quorum_state import Role
from raft.voter_set import Voter, VoterHistory, decode_voters, encode_voters, unwrap_snapshot, wrap_snapshot
from tests.raft.cluster import Network, SimNode
from wire.error_codes import ErrorCode

CONFIG = RaftConfig()


def directory(n: int) -> str:
    return f"dir-{n}"


class Quorum:
    def __init__(self, voters: list[int], others: list[int] = ()):
        self.net = Network()
        self.now = 0.0
        self.nodes = {n: SimNode(n, voters, CONFIG, n, directory_id=directory(n)) for n in [*voters, *others]}
        for node in self.nodes.values():
            node.start(self.now, self.net)
        self.down: set[int] = set()
        self.drop = lambda msg: False  # messages lost in flight

    def settle(self) -> None:
        """A leader that committed in its epoch, and observers caught up with it."""
        self.stable_leader()
        self.step(1.0)

    def step(self, seconds: float = 0.05) -> None:
        end = self.now + seconds
        while True:
            while self.net.queue:
                src, dst, msg = self.net.queue.pop(0)
                node = self.nodes.get(dst)
                if node and node.alive and dst not in self.down and src not in self.down and not self.drop(msg):
                    node.run(node.core.handle(src, msg, self.now), self.now, self.net)
            due = [n for n in self.nodes.values() if n.alive and n.node_id not in self.down and n.deadline <= self.now]
            if due:
                for n in due:
                    n.run(n.core.tick(self.now), self.now, self.net)
                continue
            if self.now >= end:
                return
            self.now = min(end, self.now + 0.01)

    def run_until(self, pred, limit: float = 20.0) -> None:
        start = self.now
        while not pred():
            assert self.now - start < limit, "condition not reached"
            self.step()

    def leader(self) -> SimNode | None:
        leaders = [n for n in self.nodes.values() if n.alive and n.node_id not in self.down
                   and n.core.role is Role.LEADER]
        return leaders[0] if len(leaders) == 1 else None

    def stable_leader(self) -> SimNode:
        """A leader that has committed an entry of its epoch (voter changes are accepted then)."""
        self.run_until(lambda: self.leader() is not None and self.leader().core.change_allowed())
        return self.leader()

    def propose(self, payload: bytes) -> int:
        leader = self.stable_leader()
        last, actions = leader.core.append([payload], self.now)
        leader.run(actions, self.now, self.net)
        return last

    def call(self, node: SimNode, method: str, *args):
        change, actions = getattr(node.core, method)(*args, self.now)
        node.run(actions, self.now, self.net)
        return change

    def add(self, n: int):
        return self.call(self.stable_leader(), "add_voter", Voter(n, directory(n), "127.0.0.1", 9000 + n))

    def remove(self, n: int):
        return self.call(self.stable_leader(), "remove_voter", n, directory(n))

    def add_committed(self, n: int) -> None:
        change = self.add(n)
        assert change.error == ErrorCode.NONE, change
        self.run_until(lambda: self.committed(change))

    def committed(self, change) -> bool:
        leader = self.leader()
        return leader is not None and leader.core.high_watermark > change.offset


def test_add_voter_after_catch_up_then_the_new_set_commits():
    q = Quorum([1, 2, 3], others=[4])
    q.settle()  # 4 fetches as an observer and catches up
    change = q.add(4)
    assert change.error == ErrorCode.NONE
    q.run_until(lambda: q.committed(change))
    for node in q.nodes.values():
        q.run_until(lambda: node.core.voters == [1, 2, 3, 4])
    assert q.nodes[4].core.is_voter and q.nodes[4].core.role is Role.FOLLOWER
    # Four voters: a commit needs three of them.
    q.down = {3, 4}
    last = q.propose(b"b")
    q.step(0.5)
    assert q.leader().core.high_watermark <= last


def test_add_refused_until_caught_up_and_for_a_duplicate():
    q = Quorum([1, 2, 3], others=[4])
    leader = q.stable_leader()
    q.down = {4}
    change = q.add(4)
    assert change.error == ErrorCode.REQUEST_TIMED_OUT and "not fetching" in change.message
    assert q.add(2).error == ErrorCode.DUPLICATE_VOTER
    bad = q.call(leader, "add_voter", Voter(4, "", "127.0.0.1", 9004))
    assert bad.error == ErrorCode.INVALID_REQUEST
    q.down = set()
    q.step(1.0)
    wrong_dir = q.call(q.stable_leader(), "add_voter", Voter(4, "other-dir", "127.0.0.1", 9004))
    assert wrong_dir.error == ErrorCode.REQUEST_TIMED_OUT
    assert q.add(4).error == ErrorCode.NONE


def test_one_change_at_a_time():
    q = Quorum([1, 2, 3], others=[4, 5])
    q.settle()
    leader = q.leader()
    q.down = {n for n in (1, 2, 3) if n != leader.node_id}  # the first change cannot commit
    first = q.add(4)
    assert first.error == ErrorCode.NONE
    second = q.call(leader, "add_voter", Voter(5, directory(5), "127.0.0.1", 9005))
    assert second.error == ErrorCode.REQUEST_TIMED_OUT and "not committed" in second.message
    assert q.call(leader, "remove_voter", leader.node_id, directory(leader.node_id)).error == \
        ErrorCode.REQUEST_TIMED_OUT
    # The uncommitted set is already in force: the leader and 4 of {1,2,3,4} are no majority.
    q.step(0.5)
    assert not q.committed(first)
    q.down = set()
    q.run_until(lambda: q.committed(first))
    assert q.add(5).error == ErrorCode.NONE


def test_change_refused_before_the_leader_commits_in_its_epoch():
    q = Quorum([1, 2, 3])
    q.drop = lambda msg: isinstance(msg, FetchRequest)  # elected, but nothing commits
    q.run_until(lambda: q.leader() is not None)
    leader = q.leader()
    change, _ = leader.core.remove_voter(3, directory(3), q.now)
    assert change.error == ErrorCode.REQUEST_TIMED_OUT and "its epoch" in change.message
    follower = next(n for n in q.nodes.values() if n is not leader)
    change, _ = follower.core.remove_voter(3, directory(3), q.now)
    assert change.error == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_remove_voter_and_the_removed_follower_becomes_an_observer():
    q = Quorum([1, 2, 3])
    leader = q.stable_leader()
    gone = next(n for n in (1, 2, 3) if n != leader.node_id)
    assert q.call(leader, "remove_voter", 9, directory(9)).error == ErrorCode.VOTER_NOT_FOUND
    change = q.remove(gone)
    q.run_until(lambda: q.committed(change))
    q.run_until(lambda: q.nodes[gone].core.voters == sorted({1, 2, 3} - {gone}))
    assert not q.nodes[gone].core.is_voter
    # The removed node no longer campaigns, even when the leader goes away.
    q.down = {leader.node_id}
    q.step(8.0)
    assert q.nodes[gone].core.role in (Role.UNATTACHED, Role.FOLLOWER)


def test_removed_leader_resigns_once_the_change_commits_and_the_rest_elect():
    q = Quorum([1, 2, 3])
    leader = q.stable_leader()
    old = leader.node_id
    change = q.call(leader, "remove_voter", old, directory(old))
    assert change.error == ErrorCode.NONE
    assert leader.core.role is Role.LEADER  # leads until the change commits
    q.run_until(lambda: leader.core.role is not Role.LEADER)
    q.run_until(lambda: q.leader() is not None and q.leader().node_id != old)
    new = q.leader()
    assert new.core.voters == sorted({1, 2, 3} - {old})
    assert new.core.high_watermark > change.offset  # the removal stayed committed
    q.step(5.0)
    assert leader.core.role in (Role.UNATTACHED, Role.FOLLOWER) and not leader.core.is_voter


def test_move_quorum_from_123_to_234_and_survive_a_restart():
    q = Quorum([1, 2, 3], others=[4])
    q.settle()
    q.add_committed(4)
    # The recorded set names each voter's directory (learnt from its fetches): a wrong one is refused.
    assert q.call(q.leader(), "remove_voter", 1, "wrong-dir").error == ErrorCode.VOTER_NOT_FOUND
    change = q.remove(1)
    assert change.error == ErrorCode.NONE
    q.run_until(lambda: q.leader() is not None and q.leader().node_id != 1 and q.committed(change))
    for n in (2, 3, 4):
        q.run_until(lambda: q.nodes[n].core.voters == [2, 3, 4])
    # Restarted from disk, each node finds the set in its log, not its static config.
    for node in q.nodes.values():
        node.crash()
        node.start(q.now, q.net)
    q.run_until(lambda: q.leader() is not None)
    assert q.leader().node_id in (2, 3, 4)
    assert all(n.core.voters == [2, 3, 4] for n in q.nodes.values())
    last = q.propose(b"y")
    q.run_until(lambda: q.leader().core.high_watermark > last)


def test_truncated_change_is_rolled_back():
    history = VoterHistory([Voter(1), Voter(2), Voter(3)])
    history.record(5, (Voter(1), Voter(2), Voter(3), Voter(4, "d4", "h", 1)))
    assert [v.node_id for v in history.latest()] == [1, 2, 3, 4]
    assert history.truncate_to(5)
    assert [v.node_id for v in history.latest()] == [1, 2, 3]


def test_uncommitted_change_on_a_follower_is_truncated_by_a_new_leader():
    q = Quorum([1, 2, 3], others=[4])
    q.settle()
    leader = q.leader()
    others = [n for n in (1, 2, 3) if n != leader.node_id]
    # Only the leader appends the change, then it is cut off.
    q.down = set(others) | {4}
    change = q.add(4)
    assert change.error == ErrorCode.NONE and leader.core.voters == [1, 2, 3, 4]
    q.down = {leader.node_id}
    q.run_until(lambda: q.leader() is not None)
    q.propose(b"after")
    q.down = set()
    q.run_until(lambda: leader.core.voters == [1, 2, 3] and leader.core.log.end_offset == q.leader().core.log.end_offset)
    assert leader.core.log.epoch_at(change.offset) != change.epoch


def test_snapshot_carries_the_voter_set():
    voters = (Voter(2, "d2", "h", 2), Voter(3, "d3", "h", 3))
    wrapped = wrap_snapshot(voters, b"\x81\xa1k\x01")
    assert unwrap_snapshot(wrapped) == (voters, b"\x81\xa1k\x01")
    assert unwrap_snapshot(b"\x81\xa1k\x01") == (None, b"\x81\xa1k\x01")
    assert decode_voters(encode_voters(voters)) == voters
    assert decode_voters(b"\xff\x00garbage") is None
    log = RaftLog([], (10, 2), wrapped)
    node = SimNode(3, [1, 2, 3], CONFIG, 1, directory_id="d3")
    node.disk.snapshot_id, node.disk.snapshot = (10, 2), wrapped
    node.start(0.0, Network())
    assert node.core.voters == [2, 3] and node.core.is_voter
    assert log.snapshot_id == (10, 2)


def test_snapshot_after_a_change_keeps_the_set_once_the_log_is_cleaned():
    q = Quorum([1, 2, 3], others=[4])
    q.settle()
    q.add_committed(4)
    leader = q.stable_leader()
    end = leader.core.high_watermark
    data = leader.core.snapshot_bytes(end, b"\x80")
    leader.run(leader.core.snapshot_written((end, leader.core.log.epoch_at(end - 1)), data, q.now), q.now, q.net)
    assert not leader.core.voter_history.changes and leader.core.voters == [1, 2, 3, 4]
    assert unwrap_snapshot(leader.core.log.snapshot)[0] is not None


@pytest.mark.parametrize("payload", [encode_voters([]), b"\x81\xa4type\xa6Voters"])
def test_malformed_voters_records_are_ignored(payload):
    node = SimNode(1, [1, 2, 3], CONFIG, 1)
    node.disk.entries = [Entry(0, 1, payload, control=True)]
    node.start(0.0, Network())
    assert node.core.voters == [1, 2, 3]


def test_describe_quorum_names_each_replicas_directory():
    q = Quorum([1, 2, 3], others=[4])
    q.settle()
    leader = q.leader().core
    # Static voters' directories, learnt from their fetches; the observer's from its fetches. The
    # controller port answers from status(), peers from describe_quorum(): the same.
    for reply in (leader.describe_quorum(q.now), describe_from_status(leader.status(), leader.cluster_id, q.now)):
        assert {r.replica_id: r.directory_id for r in reply.voters} == {n: directory(n) for n in (1, 2, 3)}
        assert [(r.replica_id, r.directory_id) for r in reply.observers] == [(4, directory(4))]
    q.add_committed(4)
    reply = q.leader().core.describe_quorum(q.now)
    assert {r.replica_id: r.directory_id for r in reply.voters} == {n: directory(n) for n in (1, 2, 3, 4)}
    assert reply.observers == []


def test_a_voter_on_a_new_endpoint_asks_to_have_it_recorded():
    q = Quorum([1, 2, 3], others=[4])
    q.settle()
    follower = next(n.core for n in q.nodes.values() if n.core.role is Role.FOLLOWER)
    follower.own_endpoint = ("127.0.0.1", 9999)
    assert follower.endpoint_update() is None  # a static set: controller.quorum.voters names endpoints
    q.add_committed(4)
    node4 = q.nodes[4].core
    assert node4.endpoint_update() is None  # its endpoint not known yet
    node4.own_endpoint = ("127.0.0.1", 9004)
    assert node4.endpoint_update() is None  # recorded as it listens
    node4.own_endpoint = ("127.0.0.1", 9104)  # restarted on another port
    voter = node4.endpoint_update()
    assert voter == Voter(4, directory(4), "127.0.0.1", 9104)
    change = q.call(q.leader(), "update_voter", voter)
    assert change.error == ErrorCode.NONE
    q.run_until(lambda: q.committed(change) and node4.endpoint_update() is None)
    for node in q.nodes.values():
        q.run_until(lambda: (9104, directory(4)) in [(v.port, v.directory_id) for v in node.core.voter_set])


def test_voter_changes_naming_an_endpoint_no_node_can_reach_are_refused():
    # Found by the protocol fuzzer: an UpdateRaftVoter naming host "\x00" was recorded, and
    # every node then dialled it for the leader.
    q = Quorum([1, 2, 3], others=[4])
    q.settle()
    q.add_committed(4)
    leader = q.leader()
    for host, port in (("\x00", 1), ("a b", 9004), ("", 9004), ("127.0.0.1", 0)):
        change = q.call(leader, "update_voter", Voter(4, directory(4), host, port))
        assert change.error == ErrorCode.INVALID_REQUEST and "endpoint" in change.message
        assert q.call(leader, "add_voter", Voter(5, directory(5), host, port)).error == ErrorCode.INVALID_REQUEST
    leader.core.own_endpoint = ("127.0.0.1", 9000 + leader.node_id)
    elsewhere = q.call(leader, "update_voter", Voter(leader.node_id, directory(leader.node_id), "10.9.9.9", 9093))
    assert elsewhere.error == ErrorCode.INVALID_REQUEST and "records its own endpoint" in elsewhere.message
    assert [(v.host, v.port) for v in leader.core.voter_set if v.node_id == 4] == [("127.0.0.1", 9004)]


def test_a_voter_holding_its_own_uncommitted_removal_still_elects():
    """Only the removed voter holds its removal when the leader is lost for good (its disk
    wiped): the two others need its vote, and it refuses their shorter logs. It campaigns in
    the set it holds (Raft dissertation §4.1), is elected by the others without counting
    itself, commits its removal and hands over."""
    q = Quorum([1, 2, 3], others=[4])
    q.settle()
    q.add_committed(4)  # not in the static set: only the log says it was a voter
    leader = q.stable_leader()
    gone = 4
    others = [n for n in (1, 2, 3) if n != leader.node_id]
    assert leader.node_id != gone
    q.down = set(others)
    change = q.remove(gone)
    assert change.error == ErrorCode.NONE
    q.run_until(lambda: gone not in q.nodes[gone].core.voters)
    q.nodes[gone].crash()  # restarted, it knows less of what is committed (its HW starts low)
    q.nodes[gone].start(q.now, q.net)
    assert gone not in q.nodes[gone].core.voters and q.nodes[gone].core.high_watermark <= change.offset
    q.down = {leader.node_id}  # never back with this disk
    q.run_until(lambda: q.leader() is not None and q.leader().node_id in others
                and q.leader().core.high_watermark > change.offset, limit=30.0)
    assert q.leader().core.voters == sorted({1, 2, 3, 4} - {gone})
    q.step(5.0)
    assert not q.nodes[gone].core.is_voter and q.nodes[gone].core.role in (Role.UNATTACHED, Role.FOLLOWER)
