"""The Raft checker flags exactly the histories that break an invariant; the trace stays hashable."""
from __future__ import annotations

import pytest

from raft.quorum_state import Role
from simulations.checkers.raft import GENESIS_DIGEST, DurableLog, RaftChecker, entry_digest
from simulations.env import SkewedClock, derive_seed
from simulations.trace import Trace


def checker() -> RaftChecker:
    return RaftChecker(Trace(), [1, 2, 3])


def invariants(c: RaftChecker) -> list[str]:
    return [v.invariant for v in c.violations]


def test_two_leaders_in_one_epoch():
    c = checker()
    c.observe(1, 1, Role.LEADER, 5, 0)
    c.observe(1, 1, Role.LEADER, 5, 0)
    c.observe(2, 1, Role.LEADER, 6, 0)
    assert c.ok
    c.observe(3, 1, Role.LEADER, 5, 0)
    assert invariants(c) == ["SingleLeader"]


def test_epoch_and_hw_monotonic_within_an_incarnation_only():
    c = checker()
    c.observe(1, 1, Role.FOLLOWER, 5, 10)
    c.observe(1, 2, Role.FOLLOWER, 4, 3)  # a restart may come back with less in memory
    assert c.ok
    c.observe(1, 2, Role.FOLLOWER, 3, 3)
    c.observe(1, 2, Role.FOLLOWER, 3, 2)
    assert invariants(c) == ["MonotonicEpoch", "MonotonicHighWatermark"]


def test_persisted_epoch_never_goes_back_and_one_persisted_leader_per_epoch():
    c = checker()
    c.observe_persisted(1, 4, 2)
    c.observe_persisted(2, 4, 2)
    assert c.ok
    c.observe_persisted(1, 3, None)
    c.observe_persisted(3, 4, 3)
    assert invariants(c) == ["MonotonicEpoch", "SingleLeader"]


def test_committed_entries_must_agree_and_be_gapless():
    c = checker()
    c.on_apply(1, 0, 1, b"a", False)
    c.on_apply(1, 1, 1, b"b", False)
    c.on_apply(2, 0, 1, b"a", False)
    assert c.ok
    c.on_apply(2, 1, 2, b"x", False)  # a different entry at a committed offset
    assert invariants(c) == ["ConsistentCommittedData"]
    c.on_apply(3, 5, 1, b"z", False)  # node 3 skips offsets
    assert invariants(c).count("ConsistentCommittedData") >= 2


def test_snapshot_must_match_the_committed_prefix():
    c = checker()
    c.on_apply(1, 0, 1, b"a", False)
    c.on_apply(1, 1, 1, b"b", False)
    good = entry_digest(entry_digest(GENESIS_DIGEST, 0, 1, b"a", False), 1, 1, b"b", False)
    c.on_restore(2, 2, good)
    assert c.ok
    c.on_restore(3, 2, GENESIS_DIGEST)
    assert invariants(c) == ["ConsistentCommittedData"]


def test_majority_must_durably_hold_the_hw():
    c = checker()
    for off in range(3):
        c.on_apply(1, off, 1, b"%d" % off, False)
    full = DurableLog(0, 3, {0: 1, 1: 1, 2: 1}, 0)
    short = DurableLog(0, 1, {0: 1}, 0)
    wrong_epoch = DurableLog(0, 3, {0: 1, 1: 1, 2: 7}, 0)
    c.check_majority(1, 3, {1: full, 2: full, 3: short})
    assert c.ok
    c.check_majority(1, 3, {1: full, 2: wrong_epoch, 3: short})
    assert invariants(c) == ["MajorityReachedHighWatermark"]


def three_committed_entries() -> tuple[RaftChecker, DurableLog, DurableLog]:
    """A checker with offsets 0-2 committed in epoch 1; a log holding them and an empty one."""
    c = checker()
    for off in range(3):
        c.on_apply(1, off, 1, b"%d" % off, False)
    return c, DurableLog(0, 3, {0: 1, 1: 1, 2: 1}, 0), DurableLog(0, 0, {}, 0)


def test_a_wiped_voter_named_again_with_its_new_directory_counts_in_the_leaders_set():
    """Voters 1-3; voter 3's disk is wiped (it had acknowledged nothing the HW needs) and
    formatted with directory "new". The leader's latest set, uncommitted, adds voter 4 and
    names 3 by "new": 1, 3 and 4 hold the HW's entries, a majority of that set."""
    c, full, empty = three_committed_entries()
    c.forget_disk(3, 0, "new")
    logs = {1: full, 2: empty, 3: full, 4: full}
    c.check_majority(1, 3, logs, leader_voters=[(1, "a"), (2, "b"), (3, "new"), (4, "d")])
    assert c.ok
    # The same set naming voter 3 by its old directory: its new copy does not count.
    c.check_majority(1, 3, logs, leader_voters=[(1, "a"), (2, "b"), (3, "old"), (4, "d")])
    assert invariants(c) == ["MajorityReachedHighWatermark"]


def test_what_a_wiped_voter_acknowledged_needs_one_holder_fewer():
    """A voter of the leader's set wiped after acknowledging the HW's entries: two others of
    the four holding them suffice, one does not."""
    c, full, empty = three_committed_entries()
    c.forget_disk(4, 3, "new")
    voters = [(1, "a"), (2, "b"), (3, "c"), (4, "d")]
    c.check_majority(1, 3, {1: full, 2: full, 3: empty, 4: empty}, leader_voters=voters)
    assert c.ok
    c.check_majority(1, 3, {1: full, 2: empty, 3: empty, 4: empty}, leader_voters=voters)
    assert invariants(c) == ["MajorityReachedHighWatermark"]


def test_acknowledged_append_must_be_committed_at_its_offset():
    c = checker()
    c.on_apply(1, 0, 1, b"v1", False)
    c.on_ack(b"v1", 0)
    c.on_ack(b"v2", 1)  # acknowledged but never applied anywhere
    assert c.ok
    c.check_final({})
    assert invariants(c) == ["AckedAppendDurable"]
    c.on_ack(b"v3", 0)  # acknowledged at an offset that holds another value
    assert invariants(c)[-1] == "AckedAppendDurable"


def test_final_logs_must_agree_with_what_each_node_applied_but_may_diverge_past_it():
    c = checker()
    for off in range(3):
        c.on_apply(1, off, 2, b"%d" % off, False)  # leader 1 committed 0..2 at epoch 2
    c.on_apply(2, 0, 2, b"0", False)  # node 2 learnt only offset 0 is committed
    # Seed 2816: node 2 still holds an older epoch's uncommitted suffix at 1..2, which the
    # new leader will have it truncate: legal Raft, not a violation.
    c.check_final({1: DurableLog(0, 3, {0: 2, 1: 2, 2: 2}, 0), 2: DurableLog(0, 3, {0: 2, 1: 1, 2: 1}, 0)})
    assert c.ok
    # What a node applied as committed must still be on its disk with the committed epoch.
    c.check_final({2: DurableLog(0, 3, {0: 1, 1: 1, 2: 1}, 0)})
    assert invariants(c) == ["ConsistentCommittedData"]


def test_trace_hash_depends_on_content_and_refuses_arbitrary_objects():
    a, b = Trace(), Trace()
    a.record("n1", "send", conn=1, nbytes=5)
    b.record("n1", "send", conn=1, nbytes=6)
    assert a.hash != b.hash and len(a.hash) == 16
    with pytest.raises(TypeError):
        a.record("n1", "oops", thing=object())


def test_derived_seeds_are_stable_and_distinct():
    assert derive_seed(1, "node", "n1") == derive_seed(1, "node", "n1")
    assert derive_seed(1, "node", "n1") != derive_seed(1, "node", "n2") != derive_seed(2, "node", "n1")


def test_skewed_clock_jumps_and_drifts():
    clock = SkewedClock()
    t0 = clock.wall_ms(10.0)
    assert clock.wall_ms(11.0) - t0 == 1000
    clock.jump(11.0, -5000)
    assert clock.wall_ms(11.0) - t0 == 1000 - 5000  # a wall clock may run backwards
    clock.set_drift(11.0, 0.5)
    assert clock.wall_ms(13.0) - clock.wall_ms(11.0) == 3000
    clock.resync(20.0)
    assert clock.wall_ms(21.0) - clock.wall_ms(20.0) == 1000
