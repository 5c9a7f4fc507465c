"""A stepped wall clock (NTP, an operator) moves no group timer: sessions, rebalances and the
expiry check run on the monotonic clock; commit timestamps (and expiry by them) are wall time."""
from __future__ import annotations

from broker.groups import GroupConfig, GroupState
from tests.broker.groups.harness import Harness
from wire.error_codes import ErrorCode as E

G = "orders"
STEP_MS = 105_000  # well past every timeout below


def test_a_wall_clock_step_forward_does_not_expire_a_session():
    h = Harness()
    (a,), gen = h.stable_group(G)  # 10 s sessions
    h.step_wall(STEP_MS)
    assert h.heartbeat(G, a, gen) == E.NONE and h.coord.groups[G].state == GroupState.STABLE


def test_a_wall_clock_step_back_does_not_delay_a_session_expiry():
    h = Harness()
    (a, b), gen = h.stable_group(G, 2)
    h.step_wall(-STEP_MS)
    for _ in range(2):
        h.advance(4_000)
        assert h.heartbeat(G, a, gen) == E.NONE  # b stays silent
    h.advance(2_001)  # b's 10 s session is over, whatever the wall clock says
    assert b not in h.coord.groups[G].members
    assert h.coord.groups[G].state == GroupState.PREPARING_REBALANCE


def test_a_wall_clock_step_neither_fires_nor_delays_the_rebalance_timeout():
    h = Harness()
    (a, b), gen = h.stable_group(G, 2, rebalance=20_000, session=45_000)
    h.join(G, a, rebalance=20_000, session=45_000)  # a rejoins: the rebalance waits up to 20 s for b
    h.step_wall(STEP_MS)
    assert b in h.coord.groups[G].members
    h.step_wall(-2 * STEP_MS)
    h.advance(20_000)
    assert list(h.coord.groups[G].members) == [a]


def test_commit_timestamps_and_expiry_by_them_are_wall_time():
    cfg = GroupConfig(num_partitions=4, offsets_retention_ms=60_000, offsets_retention_check_interval_ms=10_000)
    h = Harness(cfg)
    h.commit("simple", [("t", 0, 1, -1, "")])
    assert h.coord.groups["simple"].offsets[("t", 0)].commit_timestamp == h.now.wall_ms
    h.step_wall(STEP_MS)  # the offset is now older than retention by the wall clock ...
    assert h.fetch("simple").offsets  # ... but the check is not due before its interval
    h.advance(10_000)
    assert "simple" not in h.coord.groups  # Kafka expires by commit timestamp: wall time
