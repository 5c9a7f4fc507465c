"""Fault schedules on which the whole-cluster simulation once found a bug, replayed as regressions.

Each file in tests/simulations/regressions/ is a `FaultSchedule` (simulations/fault_schedule.py):
the seed, the options and every fault the nemesis applied, with the bug it found in `note`.
Replaying applies exactly those faults whatever the seed's own draws would be now, so the case
stays the one that failed when a change to the node code moves the trace.
Replay one by hand: python -m raftkafka simulate --replay tests/simulations/regressions/FILE
"""
from __future__ import annotations

from pathlib import Path

import pytest

from simulations.fault_schedule import FaultSchedule
from simulations.runner import SimOptions, run_simulation

REGRESSIONS = sorted((Path(__file__).parent / "regressions").glob("*.json"))


def test_every_regression_says_what_it_found():
    assert len(REGRESSIONS) >= 17
    for path in REGRESSIONS:
        schedule = FaultSchedule.load(path)
        assert schedule.note and schedule.events, path.name


@pytest.mark.parametrize("path", REGRESSIONS, ids=[p.stem for p in REGRESSIONS])
def test_schedule_that_once_failed_has_no_violations(path):
    result = run_simulation(SimOptions.replaying(FaultSchedule.load(path)))
    assert result["violations"] == [], result["violations"]


def test_the_schedules_that_found_the_missing_leader_epoch_bump_catch_its_mutation(monkeypatch):
    """The fuzz found the rule (removing a replica bumps the leader epoch) missing on these two
    schedules; with the rule broken again (the catalogue's mutation) both fail once more."""
    from tests.simulations.catalogue import by_name

    by_name("replica_removal_keeps_leader_epoch").apply(monkeypatch)
    for name in ("seed-6353-10s.json", "seed-7727-10s.json"):
        path = Path(__file__).parent / "regressions" / name
        result = run_simulation(SimOptions.replaying(FaultSchedule.load(path)))
        assert "committed-record-lost" in {v["invariant"] for v in result["violations"]}, name


def test_seed_6639_a_follower_does_not_keep_records_below_its_leaders_log_start(monkeypatch):
    """Fuzz seed 6639 (of 5036399): a follower whose uncommitted records diverged at offsets
    below where its leader's retention then moved the log start took the leader's answer for
    its epoch (the leader's epoch cache no longer reached back there) as agreement, kept those
    records, joined the ISR before any later answer reached it, and led with them: records read
    at offsets whose acknowledged records were others. Its schedule does not replay the
    failure (the follower's restart lands elsewhere), so the seed's own run is the regression;
    with the rule broken again (the catalogue's mutation) it fails once more."""
    from tests.simulations.catalogue import by_name

    options = SimOptions(seed=6639, duration=10.0, faults="all")
    assert run_simulation(options)["violations"] == []
    by_name("follower_keeps_records_below_leader_log_start").apply(monkeypatch)
    invariants = {v["invariant"] for v in run_simulation(options)["violations"]}
    assert "committed-record-lost" in invariants, invariants
