"""A node started from Kafka's server.properties (Java properties syntax: `:`/space separators,
continuations, the stock file's thread and socket settings), by a real `python -m raftkafka node`."""
from __future__ import annotations

from raftkafka.client.blocking import BlockingAdmin
from tests.e2e.procs import free_base_port, write_single_node


def test_a_node_starts_from_kafka_server_properties(tmp_path, processes):
    base = free_base_port(1)
    data = tmp_path / "data"
    write_single_node(str(data), base)  # formats the data dir (node-1 of the dev layout)
    props = tmp_path / "server.properties"
    props.write_text(
        "# Kafka's KRaft quickstart, as a user would bring it\n"
        "process.roles=broker,controller\n"
        "node.id=1\n"
        f"controller.quorum.voters=1@127.0.0.1:{base + 1}\n"
        f"listeners=PLAINTEXT://127.0.0.1:{base},\\\n"
        f"          CONTROLLER://127.0.0.1:{base + 1}\n"
        "controller.listener.names : CONTROLLER\n"
        "num.network.threads=3\nnum.io.threads=8\nsocket.send.buffer.bytes=102400\n"
        "socket.receive.buffer.bytes=102400\nnum.recovery.threads.per.data.dir=1\n"
        f"log.dirs {data}\n"
        "offsets.topic.replication.factor=1\ntransaction.state.log.replication.factor=1\n"
        "log.retention.hours=168\n")
    proc = processes.node(str(props))
    proc.wait_line("serving Kafka clients", 60)
    with BlockingAdmin(f"127.0.0.1:{base}") as admin:
        assert [b.node_id for b in admin.describe_cluster().brokers] == [1]
