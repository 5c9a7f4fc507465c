"""The transactional workload's topic asks no more of the brokers than Kafka guarantees.

Kafka keeps a COMMIT/ABORT marker (and a tombstone) for delete.retention.ms after the cleaner
found its transaction empty, and nothing more: a replica that is away for longer comes back
holding an aborted transaction's records, fetches on past the ABORT marker the leader has since
removed, and the producer's next COMMIT marker closes them as committed (read_committed readers
of that replica, once it leads, get them: fuzz seed 1109, G1a). The nemesis keeps a broker away
for seconds, and a run lasts minutes at most, so the markers must outlive any run.
"""
from __future__ import annotations

from simulations.runner import SimOptions
from simulations.workloads.transactions import TXN_TOPIC_COMPACTION
from storage.log.log_config import LogConfig

A_LONG_RUN_S = 600  # far longer than any simulated run, with its heal and convergence


def test_markers_outlive_any_simulated_replica_absence():
    config = LogConfig.from_properties(TXN_TOPIC_COMPACTION)
    assert config.cleanup_policy == "compact"  # the cleaner still removes aborted records
    assert config.delete_retention_ms > (A_LONG_RUN_S + SimOptions(seed=0).heal_timeout) * 1000
