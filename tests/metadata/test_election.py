import uuid

from metadata.controller.election import Election, build_change
from metadata.partition import RECOVERING, PartitionRegistration
from metadata.records import NO_LEADER, NO_LEADER_CHANGE

TID = uuid.UUID(int=1)


def change(part, alive, **kw):
    return build_change(TID, 0, part, is_acceptable=lambda b: b in alive, **kw)


def test_current_leader_kept_when_valid():
    part = PartitionRegistration((1, 2, 3), (1, 2, 3), leader=2)
    assert change(part, {1, 2, 3}) is None


def test_isr_first_in_replica_order():
    part = PartitionRegistration((1, 2, 3), (3, 2), leader=1)
    c = change(part, {2, 3}, target_isr=(3, 2))
    assert c.leader == 2 and c.isr is None  # first ISR member in replica order
    merged = part.merge(c)
    assert (merged.leader_epoch, merged.partition_epoch) == (1, 1)


def test_preferred_election_moves_to_first_replica_only_if_in_isr():
    part = PartitionRegistration((1, 2, 3), (1, 2, 3), leader=2)
    assert change(part, {1, 2, 3}, election=Election.PREFERRED).leader == 1
    part = PartitionRegistration((1, 2, 3), (2, 3), leader=2)
    assert change(part, {1, 2, 3}, election=Election.PREFERRED) is None


def test_no_clean_leader_without_elr_keeps_last_isr_member():
    part = PartitionRegistration((1, 2), (1,), leader=1)
    c = change(part, {2}, target_isr=())
    assert c.leader == NO_LEADER and c.isr is None  # ISR stays [1]
    assert part.merge(c).isr == (1,)


def test_unclean_only_when_allowed():
    part = PartitionRegistration((1, 2), (1,), leader=NO_LEADER)
    assert change(part, {2}) is None
    c = change(part, {2}, election=Election.UNCLEAN)
    assert (c.leader, c.isr, c.leader_recovery_state) == (2, (2,), RECOVERING)


def test_elr_tracks_members_leaving_below_min_isr_and_elects_from_it():
    part = PartitionRegistration((1, 2, 3), (1, 2), leader=1)
    # 1 is fenced: ISR [2] < min ISR 2, so 1 joins the ELR
    c = change(part, {2, 3}, target_isr=(2,), min_isr=2, elr_enabled=True)
    p = part.merge(c)
    assert (p.leader, p.isr, p.eligible_leader_replicas) == (2, (2,), (1,))
    # 2 fenced too: ISR empty, both in ELR, no leader
    c = change(p, {3}, target_isr=(), min_isr=2, elr_enabled=True)
    p = p.merge(c)
    assert (p.leader, p.isr, p.eligible_leader_replicas) == (NO_LEADER, (), (1, 2))
    # 3 never was in ISR: not eligible, even though alive
    assert change(p, {3}, min_isr=2, elr_enabled=True) is None
    # 1 comes back: elected from ELR and becomes the sole ISR member
    c = change(p, {1, 3}, min_isr=2, elr_enabled=True)
    p2 = p.merge(c)
    assert (p2.leader, p2.isr, p2.eligible_leader_replicas) == (1, (1,), (2,))


def test_unclean_shutdown_removes_from_elr_and_full_isr_clears_elr():
    part = PartitionRegistration((1, 2, 3), (), leader=NO_LEADER,
                                 eligible_leader_replicas=(1, 2))
    c = change(part, {1, 2}, min_isr=2, elr_enabled=True, unclean_shutdown={1})
    p = part.merge(c)
    assert (p.leader, p.isr, p.eligible_leader_replicas) == (2, (2,), ())
    q = PartitionRegistration((1, 2, 3), (1,), leader=1, eligible_leader_replicas=(2,),
                              last_known_elr=(3,))
    p = q.merge(change(q, {1, 2, 3}, target_isr=(1, 2), min_isr=2, elr_enabled=True))
    assert (p.isr, p.eligible_leader_replicas, p.last_known_elr) == ((1, 2), (), ())


def test_only_changed_fields_are_written():
    part = PartitionRegistration((1, 2, 3), (1, 2, 3), leader=1)
    c = change(part, {1, 2, 3}, target_isr=(1, 2))
    assert c.leader == NO_LEADER_CHANGE and c.isr == (1, 2) and c.replicas is None
    p = part.merge(c)
    assert (p.leader_epoch, p.partition_epoch) == (0, 1)


def test_removing_a_replica_bumps_the_leader_epoch_and_an_isr_change_does_not():
    part = PartitionRegistration((4, 6, 5), (4, 6, 5), leader=4)
    shrink = change(part, {4, 5, 6}, target_isr=(4, 5))
    assert shrink.leader == NO_LEADER_CHANGE and part.merge(shrink).leader_epoch == 0
    # A reassignment that drops 6 and completes at once: the same leader, a new epoch, so 6's
    # fetches in the old epoch are fenced (it may be added back before it learns of this).
    moved = change(part, {4, 5, 6}, target_replicas=(4, 6, 5), target_removing=(6,))
    after = part.merge(moved)
    assert (after.replicas, after.leader, after.leader_epoch) == ((4, 5), 4, 1)
    grown = change(after, {4, 5, 6}, target_replicas=(4, 5, 6), target_adding=(6,))
    assert grown.leader == NO_LEADER_CHANGE and after.merge(grown).leader_epoch == 1
