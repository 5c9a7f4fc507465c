"""`python -m raftkafka node` with split roles: a controller-only node and a broker-only node
(listener on port 0: the bound port is what it registers and prints) serve librdkafka."""
from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from tests.e2e.procs import REPO, free_base_port
from tests.e2e.test_single_node import consume_all, produce

pytestmark = pytest.mark.e2e

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"


def test_controller_only_and_broker_only_nodes(processes, tmp_path):
    controller_port = free_base_port() + 1
    voters = f"1@127.0.0.1:{controller_port}"
    for node_id in (1, 2):
        subprocess.run([sys.executable, "-m", "raftkafka", "format", "--cluster-id", CLUSTER, "--node-id",
                        str(node_id), "--log-dir", str(tmp_path / f"n{node_id}"), "--initial-voters", voters],
                       check=True, cwd=REPO, capture_output=True)
    controller = processes.start("node", "--roles", "controller", "--node-id", "1", "--log-dir", str(tmp_path / "n1"),
                                 "--listeners", f"CONTROLLER://127.0.0.1:{controller_port}",
                                 "--set", "num.partitions=2")  # as in KRaft, the controller's file decides
    controller.wait_line(rf"node 1 \(controller\) serving controllers on CONTROLLER://127.0.0.1:{controller_port}")
    broker = processes.start("node", "--roles", "broker", "--node-id", "2", "--log-dir", str(tmp_path / "n2"),
                             "--listeners", "PLAINTEXT://127.0.0.1:0", "--controller-quorum-voters", voters)
    port = int(broker.wait_line(r"node 2 \(broker\) serving Kafka clients on PLAINTEXT://127.0.0.1:(\d+)$").group(1))
    bootstrap = f"127.0.0.1:{port}"

    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    metadata = admin.list_topics(timeout=20)
    assert [(b.id, b.port) for b in metadata.brokers.values()] == [(2, port)]
    admin.create_topics([NewTopic("split")])["split"].result(30)  # partitions: the controller's num.partitions
    assert len(admin.list_topics("split", timeout=10).topics["split"].partitions) == 2
    produce(bootstrap, "split", 50, b"split")
    assert len(consume_all(bootstrap, "split", 50, partitions=2)) == 50

    broker.signal(signal.SIGTERM)
    assert broker.wait(60) == 0
    controller.signal(signal.SIGTERM)
    assert controller.wait(60) == 0
