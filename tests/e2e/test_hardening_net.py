"""What one client request, or many connections, may cost a 3-node `dev` cluster of real
processes (issue 16, cases 2, 4, 5, 6 and 9): each is refused with Kafka's error code or
absorbed, no node exits, and after each the cluster still produces and consumes with
confluent-kafka. One cluster serves the whole module."""
from __future__ import annotations

import os
import resource
import socket
import struct
import time

import pytest

from tests.e2e.procs import HOST, Processes, free_base_port, pid_alive, wait_until

pytestmark = pytest.mark.e2e

TOPIC = "healthy"
MiB = 1024 * 1024


class Cluster:
    def __init__(self, processes: Processes, base: int, pids: dict[int, int]):
        from confluent_kafka.admin import AdminClient

        self.processes, self.base, self.pids = processes, base, pids
        self.bootstrap = ",".join(f"{HOST}:{self.kafka_port(i)}" for i in pids)
        self.admin = AdminClient({"bootstrap.servers": self.bootstrap})
        self.checks = 0

    def kafka_port(self, node: int) -> int:
        return self.base + 2 * (node - 1)

    def controller_port(self, node: int) -> int:
        return self.base + 2 * (node - 1) + 1

    def leader_of(self, topic: str, partition: int = 0) -> int:
        return self.admin.list_topics(topic, timeout=10).topics[topic].partitions[partition].leader

    def cluster_id(self) -> str:
        return self.admin.list_topics(timeout=10).cluster_id

    def assert_serves(self) -> None:
        """Every node is alive, and acks=all records to an RF=3 topic come back to a consumer."""
        from confluent_kafka import Consumer, Producer, TopicPartition

        assert all(pid_alive(pid) for pid in self.pids.values()), "a node exited"
        self.checks += 1
        values = [b"check-%d-%d" % (self.checks, i) for i in range(10)]
        offsets: list[int] = []
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "message.timeout.ms": 60000})
        for v in values:
            producer.produce(TOPIC, value=v, partition=0,
                             on_delivery=lambda err, msg: offsets.append(-1 if err else msg.offset()))
        assert producer.flush(60) == 0 and len(offsets) == 10 and min(offsets) >= 0
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"check-{self.checks}"})
        consumer.assign([TopicPartition(TOPIC, 0, min(offsets))])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 10 and time.monotonic() < deadline:
            got += [m.value() for m in consumer.consume(10, 0.5) if m.error() is None]
        consumer.close()
        assert got == values


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from confluent_kafka.admin import NewTopic

    processes = Processes()
    try:
        base = free_base_port(3)
        _, pids = processes.dev(3, base, str(tmp_path_factory.mktemp("hardening") / "data"))
        c = Cluster(processes, base, pids)
        c.admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(30)
        wait_until(lambda: sorted(c.admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[0].isrs)
                   == [1, 2, 3], 30, "a full ISR")
        yield c
    finally:
        processes.kill_all()


# ---------------------------------------------------------------------- raw requests


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def kafka_call(port: int, request, version: int):
    """One request to a broker's Kafka listener; its decoded response."""
    from wire.protocol import decode_response, encode_request

    with socket.create_connection((HOST, port), timeout=60) as sock:
        sock.sendall(encode_request(request, version, 7, "hardening"))
        (size,) = struct.unpack(">i", _recv_exact(sock, 4))
        _, response = decode_response(_recv_exact(sock, size), request.API_KEY, version)
        return response


def rpc_call(port: int, message):
    """One internal RPC to a controller listener; the decoded answer."""
    from wire.rpc import FrameDecoder, encode_frame

    decoder = FrameDecoder()
    with socket.create_connection((HOST, port), timeout=30) as sock:
        sock.sendall(encode_frame(message, 1))
        while (frame := decoder.next_frame()) is None:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            decoder.feed(chunk)
        return frame.message


# ---------------------------------------------------------------------------- cases


def test_a_33_mib_config_value_is_refused_and_every_controller_survives(cluster):
    from wire.error_codes import ErrorCode
    from wire.protocol import IncrementalAlterConfigsRequest as R

    request = R(validate_only=False, resources=[R.AlterConfigsResource(
        resource_type=4, resource_name="", configs=[
            R.AlterableConfig(name="ssl.keystore.password", config_operation=0, value="x" * (33 * MiB))])])
    for _ in range(2):  # the client's retry reaches the next active controller
        response = kafka_call(cluster.kafka_port(1), request, 1)  # flexible: compact strings
        assert [r.error_code for r in response.responses] == [ErrorCode.INVALID_CONFIG]
        assert len(response.responses[0].error_message or "") < 1000
    cluster.assert_serves()


def test_one_produce_naming_a_partition_twice_appends_nothing(cluster):
    from confluent_kafka import Consumer, TopicPartition
    from tests.broker.builders import batch
    from wire.error_codes import ErrorCode
    from wire.protocol import ProduceRequest as R

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "watermarks"})
    _, end_before = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
    part = R.PartitionProduceData(index=0, records=batch(2))
    request = R(transactional_id=None, acks=-1, timeout_ms=10000, topic_data=[
        R.TopicProduceData(name=TOPIC, partition_data=[part, part])])
    response = kafka_call(cluster.kafka_port(cluster.leader_of(TOPIC)), request, 7)
    codes = [p.error_code for t in response.responses for p in t.partition_responses]
    assert codes == [ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST]
    _, end_after = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
    consumer.close()
    assert end_after == end_before
    cluster.assert_serves()


@pytest.mark.parametrize("partitions", [20_000_000, 200_000])
def test_a_huge_create_topics_is_refused_at_once(cluster, partitions):
    from wire.error_codes import ErrorCode
    from wire.protocol import CreateTopicsRequest as R

    name = f"huge-{partitions}"
    request = R(timeout_ms=15000, validate_only=False, topics=[R.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[], configs=[])])
    started = time.monotonic()
    response = kafka_call(cluster.kafka_port(1), request, 4)
    assert [t.error_code for t in response.topics] == [ErrorCode.POLICY_VIOLATION]
    assert time.monotonic() - started < 10
    time.sleep(1)  # nothing may be committed later either
    assert name not in cluster.admin.list_topics(timeout=10).topics
    cluster.assert_serves()


def test_connections_up_to_the_descriptor_limit_do_not_halt_the_node(cluster):
    from confluent_kafka.admin import NewTopic

    node = 3
    pid = cluster.pids[node]
    soft, hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)
    in_use = len(os.listdir(f"/proc/{pid}/fd"))
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (in_use + 40, hard))
    sockets = []
    try:
        for _ in range(200):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex((HOST, cluster.kafka_port(node)))
            sockets.append(s)
        time.sleep(2)  # the node accepts what it can
        # New replicas on the node must open log files while clients hold its descriptors.
        cluster.admin.create_topics([NewTopic("fd-starved", 6, 3)])["fd-starved"].result(30)
        time.sleep(3)
        assert pid_alive(pid), "the node halted on EMFILE"
    finally:
        for s in sockets:
            s.close()
        if pid_alive(pid):
            resource.prlimit(pid, resource.RLIMIT_NOFILE, (soft, hard))

    def fully_replicated():
        parts = cluster.admin.list_topics("fd-starved", timeout=10).topics["fd-starved"].partitions
        return len(parts) == 6 and all(sorted(p.isrs) == [1, 2, 3] for p in parts.values())

    wait_until(fully_replicated, 60, "every replica of the new topic in sync")
    cluster.assert_serves()


def test_the_controller_port_refuses_admin_requests_from_outside(cluster):
    from metadata.controller import rpc as rpc
    from raft.codec import DiagAppendRequest, ErrorResponse
    from wire.error_codes import ErrorCode

    cluster_id = cluster.cluster_id()
    for node in cluster.pids:
        port = cluster.controller_port(node)
        # No (or another) cluster id: refused whatever the request.
        for cid in ("", "someone-else"):
            assert rpc_call(port, rpc.DeleteTopicsRequest(cid, [TOPIC])).error == ErrorCode.INCONSISTENT_CLUSTER_ID
            assert rpc_call(port, rpc.ElectLeadersRequest(cid, 1, None)).error == ErrorCode.INCONSISTENT_CLUSTER_ID
        # The right cluster id, but not forwarded by a broker.
        assert rpc_call(port, rpc.DeleteTopicsRequest(cluster_id, [TOPIC])).error \
            == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert rpc_call(port, rpc.ElectLeadersRequest(cluster_id, 1, None)).error \
            == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        # Naming a broker registration that does not exist (the active controller checks it).
        forged = rpc_call(port, rpc.DeleteTopicsRequest(cluster_id, [TOPIC], forwarded_by=(1, 10**9)))
        assert forged.error in (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.NOT_CONTROLLER)
        # Opaque entries never reach the metadata log.
        assert isinstance(rpc_call(port, DiagAppendRequest(cluster_id, [b"garbage"])), ErrorResponse)
    assert TOPIC in cluster.admin.list_topics(timeout=10).topics
    cluster.assert_serves()
