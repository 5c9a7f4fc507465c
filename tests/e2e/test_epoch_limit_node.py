"""A Vote naming epoch 2^31-1 on a PLAINTEXT controller listener (the protocol fuzzer's
finding: the node then campaigned for epoch 2^31, failed to write it into its log and
exited). The node keeps running, says why its quorum can elect no more, and its Kafka
listener keeps serving the partitions it leads."""
from __future__ import annotations

import socket
import time

import pytest

from raft.messages import MAX_EPOCH, VoteRequest
from storage.env import RealEnv
from storage.meta_properties import read_meta_properties
from tests.e2e.procs import HOST, free_base_port, pid_alive, wait_until
from wire.rpc import encode_frame

pytestmark = pytest.mark.e2e


def test_a_vote_for_the_last_epoch_leaves_the_node_running(processes, tmp_path):
    import raft.codec  # noqa: F401  (registers the Raft messages for encode_frame)
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    base = free_base_port()
    data = tmp_path / "data"
    _, pids = processes.dev(1, base, str(data))
    bootstrap = f"{HOST}:{base}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("kept", 1)])["kept"].result(30)
    cluster_id = read_meta_properties(RealEnv().fs, str(data / "node-1")).cluster_id

    with socket.create_connection((HOST, base + 1), timeout=10) as s:
        s.sendall(encode_frame(VoteRequest(cluster_id, MAX_EPOCH, 99, 10**9, MAX_EPOCH - 1), 1))
        assert s.recv(4)  # answered
    log = data / "node-1" / "node.log"
    wait_until(lambda: "is the last an int32 holds" in log.read_text(), 30, "the epoch warning")
    time.sleep(3)  # several election timeouts of a one-node quorum

    assert pid_alive(pids[1])
    assert "Traceback" not in log.read_text()
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 30000})
    delivered = []
    producer.produce("kept", value=b"after", partition=0, on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(30) == 0 and delivered == [None]
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition("kept", 0, 0)])
    got = []
    deadline = time.monotonic() + 30
    while not got and time.monotonic() < deadline:
        got = [m.value() for m in consumer.consume(1, 0.5) if m.error() is None]
    consumer.close()
    assert got == [b"after"]
