"""The README's `-n 2` keeps tests of real processes in one xdist worker (tests/conftest.py)."""
from __future__ import annotations

from tests.conftest import TOGETHER, scheduling_unit


def test_tests_of_real_processes_share_one_unit_and_in_process_tests_are_units_of_their_own():
    for nodeid in ("tests/e2e/test_mirror.py::test_mirror_both_ways",
                   "tests/docs/test_doc_commands.py::test_page_commands_run[docs/operations.md]",
                   "tests/spark/test_spark_e2e.py::test_batch_sink_writes_what_a_kafka_client_reads",
                   "tests/test_multiprocess_groups.py::test_killing_the_coordinator",
                   "tests/raft/test_multiprocess_quorum.py::test_failover_catch_up"):
        assert scheduling_unit(nodeid) == TOGETHER, nodeid
    for nodeid in ("tests/simulations/test_cluster_sim.py::test_combined_nodes_run_clean",
                   "tests/simulations/test_raft_sim.py::test_mutation_is_caught[a/b]",
                   "tests/wire/test_protocol_framing.py::test_fetch_response_round_trips[16]"):
        assert scheduling_unit(nodeid) == nodeid
