"""RaftCore.link_lost: a follower whose connection to its leader broke campaigns within half an
election timeout (pre-vote first) instead of waiting out the fetch timeout."""
import random

from raft.config import RaftConfig
from raft.core import RaftCore
from raft.log import RaftLog
from raft.messages import BeginQuorumEpochRequest, VoteRequest
from raft.quorum_state import Role
from raft.state import ElectionState

CLUSTER = "c"
CONFIG = RaftConfig(election_timeout=1.0, fetch_timeout=2.0)


def _follower_of_2(now: float = 0.0) -> RaftCore:
    core = RaftCore(node_id=1, voters=[1, 2, 3], cluster_id=CLUSTER, config=CONFIG, state=ElectionState(),
                    log=RaftLog([]), now=now, rng=random.Random(7))
    core.tick(now)
    core.handle(2, BeginQuorumEpochRequest(CLUSTER, 1, 2), now)
    assert core.role is Role.FOLLOWER
    return core


def test_losing_the_link_to_the_leader_brings_the_election_forward():
    core = _follower_of_2()
    assert core.link_lost(3, 0.1).deadline > 0.1 + CONFIG.election_timeout  # not our leader: nothing changes
    actions = core.link_lost(2, 0.1)
    assert actions.deadline <= 0.1 + CONFIG.election_timeout / 2
    core.tick(actions.deadline)
    assert core.role is Role.PROSPECTIVE
    assert core.epoch == 1  # pre-vote first: no epoch moves until a majority says the leader is gone


def test_after_losing_its_leader_a_follower_grants_pre_votes():
    core = _follower_of_2()
    # Voter 3's pre-vote in epoch 1 with a log as long as ours (empty).
    request = VoteRequest(CLUSTER, epoch=1, candidate_id=3, last_offset=0, last_epoch=0, pre_vote=True)

    core.quorum.role_state.has_fetched = True  # as after its first answered fetch

    def granted(at: float) -> bool:
        return any(getattr(m, "granted", False) for _, m in core.handle(3, request, at).send)

    assert not granted(0.2)  # its leader is alive as far as it knows
    core.link_lost(2, 0.3)
    assert granted(0.3)


def test_the_departed_leader_is_reported_until_anything_comes_from_it():
    core = _follower_of_2()
    assert core.status().departed_leader is None
    core.link_lost(3, 0.1)  # not our leader
    core.connect_refused(3, 0.1)
    assert core.status().departed_leader is None
    core.link_lost(2, 0.1)
    core.connect_refused(2, 0.15)  # nothing listens at its address any more
    assert core.status().departed_leader == 2
    core.tick(5.0)  # campaigning meanwhile changes nothing: nothing came from 2
    assert core.status().departed_leader == 2
    core.handle(2, VoteRequest(CLUSTER, epoch=1, candidate_id=2, last_offset=0, last_epoch=0, pre_vote=True), 5.1)
    assert core.status().departed_leader is None  # it lives


def test_a_broken_link_alone_does_not_make_the_leader_departed():
    # A reset (a middlebox, a stopped process whose socket was dropped) is no proof of death:
    # only a refused reconnect says nothing listens there any more.
    core = _follower_of_2()
    core.link_lost(2, 0.1)
    core.tick(5.0)
    assert core.status().departed_leader is None
    core.connect_refused(2, 0.05 + 5.0)  # refused after the link broke, with nothing since
    assert core.status().departed_leader == 2


def test_a_refusal_without_a_broken_link_or_after_hearing_from_it_proves_nothing():
    core = _follower_of_2()
    core.connect_refused(2, 0.1)  # e.g. a reconnect that raced the leader's restart
    assert core.status().departed_leader is None
    core.link_lost(2, 0.2)
    core.handle(2, VoteRequest(CLUSTER, epoch=1, candidate_id=2, last_offset=0, last_epoch=0, pre_vote=True), 0.3)
    core.connect_refused(2, 0.4)  # it spoke after the break: a later refusal is a new story
    assert core.status().departed_leader is None
