"""Voter changes under every fault (the `membership` simulation workload): clean on a few seeds,
and the one-change-at-a-time rule broken on purpose is caught (tests/simulations/catalogue.py)."""
from __future__ import annotations

import pytest

from simulations.runner import SimOptions, run_simulation
from tests.simulations.catalogue import by_name
from tests.simulations.mutation_catalogue import first_violation


def run(seed: int) -> dict:
    return run_simulation(SimOptions(seed=seed, workload="membership", duration=20.0))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_voter_changes_under_faults_keep_every_invariant(seed):
    result = run(seed)
    assert result["violations"] == [], result["violations"]
    assert result["workload"]["voter_changes"]["done"] > 0  # the set did change


@pytest.mark.parametrize("seed", [20931, 21001, 21966])
def test_seeds_where_the_checker_miscounted_a_wiped_voter(seed):
    """Fuzz seeds of the membership workload (30 s) that the checker wrongly failed
    (MajorityReachedHighWatermark). 21001: the leader read a fetch the wiped voter had sent
    before it went down, and counted it, after the wipe. 20931 and 21966: the leader's latest
    set named the wiped voter again with its new directory, and counted its new copy."""
    result = run_simulation(SimOptions(seed=seed, workload="membership", duration=30.0))
    assert result["violations"] == [], result["violations"]


def test_a_second_change_while_one_is_pending_is_caught():
    found = first_violation(by_name("voter_change_while_one_is_pending").apply, run, limit=100)
    assert found is not None, "the mutation survived 100 seeds"
    seed, violations = found
    assert "OneVoterChangeAtATime" in {v["invariant"] for v in violations}
    assert run(seed)["violations"] == []  # the real code is clean on that seed
