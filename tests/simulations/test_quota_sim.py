"""Client quotas enforced from the metadata log, under faults: the full-cluster simulation's
quota churn (simulations.workloads.quotas) and quota checker (simulations.checkers.quotas) on
clean runs, and each deliberate quota bug (tests/simulations/quota_mutations.py) caught within
a bounded number of seeds."""
from __future__ import annotations

import pytest

from simulations.runner import SimOptions, run_simulation
from tests.simulations.mutation_catalogue import first_violation
from tests.simulations.quota_mutations import QUOTA_MUTATIONS

SECONDS = 10.0
MUTATION_SEED_LIMIT = 10  # each is caught within this many seeds (see the per-mutation first catches)


def cluster(seed: int, **kw) -> dict:
    return run_simulation(SimOptions(seed=seed, **{"duration": SECONDS, "faults": "all", **kw}))


def test_quota_churn_through_controller_kills_and_every_broker_agrees_with_the_log():
    # The first seed that kills the active controller while quotas change (which seed that is
    # moves with the workload's mix); every seed run on the way must be clean too.
    for seed in range(12):
        result = cluster(seed)
        assert result["violations"] == [], (seed, result["violations"])
        if result["faults"].get("kill_leader", 0) > 0 and result["workload"]["ops"].get("alter_quota_ok", 0) > 1:
            break
    else:
        pytest.fail("no seed in 0-11 killed the active controller while quotas changed")
    assert result["workload"]["quota_questions"] > 0


@pytest.mark.parametrize("name", sorted(QUOTA_MUTATIONS))
def test_quota_mutation_is_caught(name):
    caught = first_violation(QUOTA_MUTATIONS[name], cluster, MUTATION_SEED_LIMIT)
    if caught is None:
        pytest.fail(f"mutation {name} survived {MUTATION_SEED_LIMIT} seeds")
    seed, found = caught
    assert {v["invariant"] for v in found} & {"QuotaMatchesLog"}, found
    assert cluster(seed)["violations"] == [], f"seed {seed} fails without the mutation too"
