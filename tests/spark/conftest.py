"""One local[2] SparkSession for the whole Spark test set, and one real 3-node cluster for it.

Tuned as reference/spark.md §5.5 measured: UI off, small driver, 2 shuffle
partitions, serial GC. PYSPARK_PYTHON and SPARK_LOCAL_IP must be environment
variables set before the JVM starts (a builder conf does not reach the workers,
G1); PYTHONPATH carries the checkout to the Python workers (G3), which also lets
Spark auto-discover the top-level `pyspark_raftkafka` module.

The cluster is `python -m raftkafka dev --nodes 3` (RF=3 topics, min.insync.replicas=2,
short broker sessions so a kill -9'd leader is replaced in seconds), started once and
always killed (tests/e2e/procs.py).

Spark tests are skipped only when pyspark (or pyarrow) is not importable.
"""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

SPARK_AVAILABLE = importlib.util.find_spec("pyspark") is not None and importlib.util.find_spec("pyarrow") is not None
ROOT = str(Path(__file__).resolve().parents[2])


@pytest.fixture(scope="session")
def spark():
    if not SPARK_AVAILABLE:
        pytest.skip("pyspark/pyarrow not installed (pip install raftkafka[spark])")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if ROOT not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([ROOT, *paths])
    from pyspark.sql import SparkSession
    session = (SparkSession.builder.master("local[2]").appName("raftkafka-tests")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2").config("spark.default.parallelism", "2")
               .config("spark.driver.memory", "512m")
               .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
               .config("spark.sql.adaptive.enabled", "false")
               .config("spark.sql.streaming.minBatchesToRetain", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


class DevCluster:
    """The session's 3-node cluster: its bootstrap list, and kill -9 / restart of one node."""

    SETTINGS = ("default.replication.factor=3", "min.insync.replicas=2", "offsets.topic.replication.factor=3",
                "broker.session.timeout.ms=2000", "broker.heartbeat.interval.ms=300")

    def __init__(self, processes, base_port: int, data_dir: str):
        self.processes, self.base_port, self.data_dir = processes, base_port, data_dir
        _, self.pids = processes.dev(3, base_port, data_dir, *self.SETTINGS)
        self.bootstrap_servers = ",".join(f"127.0.0.1:{base_port + 2 * i}" for i in range(3))

    def leader(self, topic: str, partition: int) -> int:
        from raftkafka.client.blocking import BlockingAdmin
        with BlockingAdmin(self.bootstrap_servers) as admin:
            return admin.describe_topics([topic])[topic].partitions[partition].leader

    def kill(self, node_id: int) -> None:
        from tests.e2e.procs import kill_pid
        kill_pid(self.pids[node_id])

    def restart(self, node_id: int) -> None:
        """Start a killed node again from its node.toml; returns once it serves clients."""
        from tests.e2e.procs import dev_config_path
        proc = self.processes.node(dev_config_path(self.data_dir, node_id))
        self.pids[node_id] = proc.pid
        proc.wait_line(rf"node {node_id} \(broker,controller\) serving Kafka clients", 60)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    from tests.e2e.procs import Processes, free_base_port
    processes = Processes()
    try:
        yield DevCluster(processes, free_base_port(3), str(tmp_path_factory.mktemp("spark-cluster") / "data"))
    finally:
        processes.kill_all()
