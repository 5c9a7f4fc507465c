"""Epochs are int32: a Vote naming the largest one (found by the protocol fuzzer on a
PLAINTEXT controller listener) must leave every node running, never past MAX_EPOCH."""
from __future__ import annotations

from raft.messages import MAX_EPOCH, VoteRequest
from raft.quorum_state import Role
from tests.raft.cluster import CLUSTER_ID
from tests.raft.test_voter_changes import Quorum


def _vote(q: Quorum, target: int, epoch: int) -> None:
    """A Vote from node 99, a stranger, as the fuzzer sent it."""
    node = q.nodes[target]
    node.run(node.core.handle(99, VoteRequest(CLUSTER_ID, epoch, 99, 10**9, epoch - 1), q.now), q.now, q.net)


def test_a_node_raised_to_the_last_epoch_stops_electing_and_keeps_running():
    q = Quorum([1])
    leader = q.stable_leader()
    _vote(q, 1, MAX_EPOCH)
    assert leader.core.epoch == MAX_EPOCH and leader.core.role is Role.UNATTACHED
    q.step(10.0)  # many election timeouts
    assert leader.core.epoch == MAX_EPOCH and leader.core.role is Role.UNATTACHED


def test_one_epoch_below_the_last_a_node_still_wins_its_election():
    q = Quorum([1])
    q.stable_leader()
    _vote(q, 1, MAX_EPOCH - 1)
    q.run_until(lambda: q.leader() is not None and q.leader().core.change_allowed())
    assert q.leader().core.epoch == MAX_EPOCH
    last = q.propose(b"still writable")
    q.run_until(lambda: q.leader().core.high_watermark > last)
    q.leader().run(q.leader().core.resign(q.now), q.now, q.net)  # a resigned leader's next epoch
    q.step(10.0)
    assert q.nodes[1].core.epoch == MAX_EPOCH and q.leader() is None


def test_a_quorum_raised_to_the_last_epoch_stays_within_it():
    q = Quorum([1, 2, 3])
    leader = q.stable_leader()
    follower = next(n for n in (1, 2, 3) if n != leader.node_id)
    _vote(q, follower, MAX_EPOCH)
    q.step(20.0)
    assert {n.core.epoch for n in q.nodes.values()} == {MAX_EPOCH}
    assert all(n.core.role in (Role.UNATTACHED, Role.FOLLOWER) for n in q.nodes.values())
