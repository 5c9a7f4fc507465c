"""Authorization decided from the metadata log, under faults: the full-cluster simulation's
ACL churn (simulations.workloads.acls) and authorization checker (simulations.checkers.authorization)
on clean runs, and each deliberate authorization bug (tests/simulations/acl_mutations.py) caught
within a bounded number of seeds."""
from __future__ import annotations

import pytest

from simulations.runner import SimOptions, run_simulation
from tests.simulations.acl_mutations import ACL_MUTATIONS
from tests.simulations.mutation_catalogue import first_violation

SECONDS = 10.0
MUTATION_SEED_LIMIT = 10  # each is caught within this many seeds (see the per-mutation first catches)

EXPECTED = {
    "broker_index_ignores_prefixed_acls": {"AuthorizationMatchesLog"},
    "broker_acl_index_not_rebuilt": {"AuthorizationMatchesLog"},
}


def cluster(seed: int, **kw) -> dict:
    return run_simulation(SimOptions(seed=seed, **{"duration": SECONDS, "faults": "all", **kw}))


def test_acl_churn_through_controller_kills_and_every_broker_agrees_with_the_log():
    # The first seed that kills the active controller while ACLs change (which seed that is moves
    # with the workload's mix); every seed run on the way must be clean too.
    for seed in range(12):
        result = cluster(seed)
        assert result["violations"] == [], (seed, result["violations"])
        ops = result["workload"]["ops"]
        if result["faults"].get("kill_leader", 0) > 0 and ops.get("create_acl_ok", 0) > 0 \
                and ops.get("delete_acl_ok", 0) > 0:
            break
    else:
        pytest.fail("no seed in 0-11 killed the active controller while ACLs changed")
    assert result["workload"]["authorization_questions"] > 0


@pytest.mark.parametrize("name", sorted(ACL_MUTATIONS))
def test_authorization_mutation_is_caught(name):
    caught = first_violation(ACL_MUTATIONS[name], cluster, MUTATION_SEED_LIMIT)
    if caught is None:
        pytest.fail(f"mutation {name} survived {MUTATION_SEED_LIMIT} seeds")
    seed, found = caught
    assert {v["invariant"] for v in found} & EXPECTED[name], found
    assert cluster(seed)["violations"] == [], f"seed {seed} fails without the mutation too"
