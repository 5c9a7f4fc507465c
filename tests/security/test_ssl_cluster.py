"""A 3-node `dev --security ssl` cluster: TLS on every listener, members only between nodes.

Real processes, real clients: confluent-kafka, kafka-python and aiokafka produce, consume
in a group and run admin calls over SSL (client certificate from the generated
client.properties); a client whose certificate another CA signed is refused and the
nodes keep serving. On the controller port a process that is not a member (plaintext, a
foreign CA's certificate, or a certificate of the cluster's own CA but outside
super.users) gets a closed connection and nothing changes: no vote, no append, no fencing;
on the client port such a certificate may not fetch as a replica.
"""
from __future__ import annotations

import asyncio
import os
import socket
import ssl
import time
import types

import pytest

from tests.e2e.procs import HOST, Processes, free_base_port, wait_until

pytestmark = pytest.mark.e2e

NODES = 3


class Cluster:
    def __init__(self, base: int, data_dir: str, proc):
        self.base, self.data_dir, self.proc = base, data_dir, proc
        self.bootstrap = ",".join(f"{HOST}:{base + 2 * i}" for i in range(NODES))
        self.security = os.path.join(data_dir, "security")
        self.ca = os.path.join(self.security, "ca.pem")
        self.properties_path = os.path.join(data_dir, "client.properties")

    def client_port(self, node: int) -> int:
        return self.base + 2 * (node - 1)

    def controller_port(self, node: int) -> int:
        return self.base + 2 * (node - 1) + 1

    def properties(self) -> dict[str, str]:
        out = {}
        for line in open(self.properties_path):
            if "=" in line and not line.startswith("#"):
                k, v = line.strip().split("=", 1)
                out[k] = v
        return out

    def log(self, node: int) -> str:
        with open(os.path.join(self.data_dir, f"node-{node}", "node.log"), errors="replace") as f:
            return f.read()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    procs = Processes()
    try:
        base = free_base_port(NODES)
        data_dir = str(tmp_path_factory.mktemp("ssl") / "data")
        proc = procs.start("dev", "--nodes", str(NODES), "--base-port", str(base), "--data-dir", data_dir,
                           "--security", "ssl", "--set", "ssl.reload.check.interval.ms=300")
        proc.wait_line(r"^client properties: ", 60)
        for i in range(1, NODES + 1):
            m = proc.wait_line(rf"^node {i}\s+pid (\d+)", 30)
            procs.extra_pids.add(int(m.group(1)))
        proc.wait_line(r"^ready\b", 120)
        yield Cluster(base, data_dir, proc)
    finally:
        procs.kill_all()


@pytest.fixture(scope="module")
def outsiders(cluster, tmp_path_factory):
    """Certificates of a foreign CA, and one of the cluster's CA for a principal outside super.users."""
    from raftkafka.cli.dev_certs import CertificateAuthority

    folder = tmp_path_factory.mktemp("outsiders")
    foreign = CertificateAuthority("someone else's CA").issue(str(folder / "foreign.pem"), "node-1")
    own_ca = CertificateAuthority.load(cluster.ca, os.path.join(cluster.security, "ca-key.pem"))
    intruder = own_ca.issue(str(folder / "intruder.pem"), "intruder")
    return {"foreign": foreign, "intruder": intruder}


def tls_socket(cluster, port: int, issued=None) -> ssl.SSLSocket:
    ctx = ssl.create_default_context(cafile=cluster.ca)
    if issued is not None:
        ctx.load_cert_chain(issued.keystore)
    raw = socket.create_connection((HOST, port), timeout=10)
    return ctx.wrap_socket(raw, server_hostname=HOST)


def tls_refused(cluster, port: int, issued=None, payload: bytes = b"") -> bool:
    """True when a TLS connection with `issued` (or no certificate) is refused: the handshake
    fails, or (TLS 1.3 sends the server's verdict on our certificate after it) the
    connection ends without a byte."""
    try:
        with tls_socket(cluster, port, issued) as s:
            if payload:
                s.sendall(payload)
            return closed_without_answer(s)
    except (ssl.SSLError, OSError):
        return True


def closed_without_answer(sock) -> bool:
    """True when the peer closes the connection without sending a byte."""
    sock.settimeout(10)
    try:
        return sock.recv(4096) == b""
    except (ConnectionResetError, ssl.SSLError, BrokenPipeError):
        return True


# -------------------------------------------------------------------- real clients over SSL

def test_confluent_kafka_over_ssl(cluster):
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    conf = {"bootstrap.servers": cluster.bootstrap, **cluster.properties()}
    admin = AdminClient(conf)
    admin.create_topics([NewTopic("ck-ssl", 3, 3)])["ck-ssl"].result(30)
    wait_until(lambda: len(admin.list_topics(timeout=10).topics["ck-ssl"].partitions) == 3, 30, "topic")
    producer = Producer(conf)
    for i in range(30):
        producer.produce("ck-ssl", value=b"v%d" % i, partition=i % 3)
    assert producer.flush(30) == 0
    consumer = Consumer({**conf, "group.id": "ck-group", "auto.offset.reset": "earliest"})
    consumer.subscribe(["ck-ssl"])
    got = []
    deadline = time.monotonic() + 40
    while len(got) < 30 and time.monotonic() < deadline:
        m = consumer.poll(1)
        if m is not None and not m.error():
            got.append(m.value())
    consumer.commit(asynchronous=False)
    consumer.close()
    assert sorted(got) == sorted(b"v%d" % i for i in range(30))


def test_kafka_python_over_ssl(cluster):
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka.admin import NewTopic

    p = cluster.properties()
    ssl_args = dict(security_protocol="SSL", ssl_cafile=p["ssl.ca.location"],
                    ssl_certfile=p["ssl.certificate.location"], ssl_keyfile=p["ssl.key.location"])
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, **ssl_args)
    admin.create_topics([NewTopic("kp-ssl", 2, 3)])
    wait_until(lambda: "kp-ssl" in admin.list_topics(), 30, "topic")
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, **ssl_args)
    for i in range(20):
        producer.send("kp-ssl", value=b"k%d" % i).get(30)
    producer.close()
    consumer = KafkaConsumer("kp-ssl", bootstrap_servers=cluster.bootstrap, group_id="kp-group",
                             auto_offset_reset="earliest", **ssl_args)
    got = []
    deadline = time.monotonic() + 40
    while len(got) < 20 and time.monotonic() < deadline:
        got += [r.value for records in consumer.poll(500).values() for r in records]
    consumer.commit()
    consumer.close()
    assert sorted(got) == sorted(b"k%d" % i for i in range(20))
    assert "kp-group" in str(admin.list_groups())
    admin.close()


def test_aiokafka_over_ssl(cluster):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.helpers import create_ssl_context

    p = cluster.properties()

    async def run():
        context = create_ssl_context(cafile=p["ssl.ca.location"], certfile=p["ssl.certificate.location"],
                                     keyfile=p["ssl.key.location"])
        ssl_args = dict(security_protocol="SSL", ssl_context=context)
        admin = AIOKafkaAdminClient(bootstrap_servers=cluster.bootstrap, **ssl_args)
        await admin.start()
        await admin.create_topics([NewTopic("aio-ssl", 2, 3)])
        deadline = time.monotonic() + 30
        while "aio-ssl" not in await admin.list_topics():
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)
        producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap, **ssl_args)
        await producer.start()
        for i in range(20):
            await producer.send_and_wait("aio-ssl", value=b"a%d" % i)
        await producer.stop()
        consumer = AIOKafkaConsumer("aio-ssl", bootstrap_servers=cluster.bootstrap, group_id="aio-group",
                                    auto_offset_reset="earliest", **ssl_args)
        await consumer.start()
        got = []
        deadline = time.monotonic() + 40
        while len(got) < 20 and time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                got += [r.value for r in records]
        await consumer.commit()
        await consumer.stop()
        groups = await admin.list_consumer_groups()
        await admin.close()
        return got, groups

    got, groups = asyncio.run(run())
    assert sorted(got) == sorted(b"a%d" % i for i in range(20))
    assert any(g[0] == "aio-group" for g in groups)


def test_our_cli_over_ssl_with_command_config(cluster, processes):
    proc = processes.start("topics", "--bootstrap-server", cluster.bootstrap, "--command-config",
                           cluster.properties_path, "--create", "--topic", "cli-ssl", "--replication-factor", "3")
    assert proc.wait(60) == 0, proc.output()
    proc = processes.start("topics", "--bootstrap-server", cluster.bootstrap, "--command-config",
                           cluster.properties_path, "--list")
    assert proc.wait(60) == 0, proc.output()
    assert "cli-ssl" in proc.lines
    proc = processes.start("quorum", "describe", "--bootstrap-controller", f"{HOST}:{cluster.controller_port(1)}",
                           "--command-config", cluster.properties_path, "--json")
    assert proc.wait(60) == 0, proc.output()
    assert '"leader_id"' in proc.output()
    proc = processes.start("topics", "--bootstrap-server", cluster.bootstrap, "--list")  # no TLS settings
    assert proc.wait(60) == 1
    assert len(proc.lines) == 1, proc.output()  # one clear line, no traceback


# -------------------------------------------------------------------- refused clients

def test_untrusted_client_certificate_is_refused_and_nodes_keep_serving(cluster, outsiders):
    from confluent_kafka.admin import AdminClient

    foreign = outsiders["foreign"]
    conf = {"bootstrap.servers": cluster.bootstrap, "security.protocol": "SSL", "ssl.ca.location": cluster.ca,
            "ssl.certificate.location": foreign.certificate, "ssl.key.location": foreign.key}
    logged_before = cluster.log(1).count("TLS handshake from 127.0.0.1 failed")
    refused = AdminClient(conf)
    with pytest.raises(Exception):
        refused.list_topics(timeout=5)
    # Raw handshakes with that certificate fail too; repeated ones are logged once a minute.
    for _ in range(3):
        assert tls_refused(cluster, cluster.client_port(1), foreign)
    good = AdminClient({"bootstrap.servers": cluster.bootstrap, **cluster.properties()})
    assert sorted(good.list_topics(timeout=10).brokers) == [1, 2, 3]
    wait_until(lambda: "TLS handshake from 127.0.0.1 failed" in cluster.log(1), 10, "the failure logged")
    assert cluster.log(1).count("TLS handshake from 127.0.0.1 failed") - logged_before <= 1


# -------------------------------------------------------------------- inter-node gate

def rpc_frame(message, correlation_id: int = 1) -> bytes:
    from wire.rpc import encode_frame

    return encode_frame(message, correlation_id)


def quorum_and_brokers(cluster):
    """(leader, epoch, high watermark, {broker id: fenced}) as the admin sees them."""
    import trio

    from metadata.controller.client import ControllerClient, ControllerConnection
    from raft.node_client import open_client
    from raft.messages import DescribeQuorumRequest
    from raftkafka.client.security import ClientSecurity
    from storage.env import RealEnv

    tls = ClientSecurity.from_properties(cluster.properties()).tls

    async def ask():
        env = RealEnv()
        async with open_client(env, HOST, cluster.controller_port(1), tls=tls) as client:
            quorum = await client.call(DescribeQuorumRequest(""), timeout=10)
        conn = ControllerConnection(env, {i: (HOST, cluster.controller_port(i)) for i in range(1, NODES + 1)},
                                    tls=tls)
        async with trio.open_nursery() as nursery:
            await nursery.start(conn.run)
            view = await ControllerClient(conn).describe_cluster(timeout_s=10)
            nursery.cancel_scope.cancel()
        return quorum, {b.broker_id: b.fenced for b in view.brokers}

    return trio.run(ask)


def intrusions(cluster_id: str, leader: int, epoch: int, broker_epoch: int):
    """What a non-member would send: a vote for itself, a new leader, a metadata append, a fence."""
    from metadata.controller.rpc import BrokerHeartbeatRequest
    from raft.codec import DiagAppendRequest
    from raft.messages import BeginQuorumEpochRequest, VoteRequest

    victim = 2 if leader != 2 else 3
    return [
        VoteRequest(cluster_id, epoch + 5, victim, 10**9, epoch + 4),
        BeginQuorumEpochRequest(cluster_id, epoch + 5, victim),
        DiagAppendRequest(cluster_id, [b"forged"]),
        BrokerHeartbeatRequest(cluster_id, victim, broker_epoch, 0, want_fence=True),
    ]


def test_non_members_cannot_vote_append_or_fence(cluster, outsiders):
    before, brokers_before = quorum_and_brokers(cluster)
    assert not any(brokers_before.values())
    cluster_id = open(os.path.join(cluster.data_dir, "node-1", "meta.properties")).read().split("cluster.id=")[1].split()[0]
    frames = b"".join(rpc_frame(m, i) for i, m in enumerate(intrusions(cluster_id, before.leader_id, before.epoch, 0), 1))
    for node in range(1, NODES + 1):
        port = cluster.controller_port(node)
        # Plaintext on a TLS port: the handshake never completes, the connection is closed.
        with socket.create_connection((HOST, port), timeout=10) as plain:
            plain.sendall(frames)
            assert closed_without_answer(plain)
        # A foreign CA's certificate: the handshake fails.
        assert tls_refused(cluster, port, outsiders["foreign"], frames)
        # The cluster CA's certificate, but not a member (User:intruder is not in super.users):
        # the handshake succeeds, the gate closes the connection before reading a frame.
        assert tls_refused(cluster, port, outsiders["intruder"], frames)
        # No certificate at all: client auth is required on the controller listener.
        assert tls_refused(cluster, port, None, frames)
    after, brokers_after = quorum_and_brokers(cluster)
    assert (after.leader_id, after.epoch) == (before.leader_id, before.epoch)
    assert not any(brokers_after.values())
    assert "User:intruder is not a cluster member" in cluster.log(1)


def test_non_member_cannot_fetch_as_a_replica(cluster, outsiders):
    from wire.protocol import FetchRequest, MetadataRequest, decode_response, encode_request
    from wire.protocol.framing import FrameReader

    def call(sock, request, version):
        sock.sendall(encode_request(request, version, 7, "intruder"))
        reader = FrameReader()
        while (frame := reader.next_frame()) is None:
            data = sock.recv(65536)
            if not data:
                return None
            reader.feed(data)
        return decode_response(frame, request.API_KEY, version)[1]

    s = tls_socket(cluster, cluster.client_port(1), outsiders["intruder"])
    # As an ordinary client the intruder may ask for metadata (no authorizer here) ...
    assert call(s, MetadataRequest(topics=None), 1) is not None
    # ... but not read as follower replica 2 (past the high watermark, moving the ISR).
    fetch = FetchRequest(replica_id=2, max_wait_ms=0, min_bytes=0, topics=[
        FetchRequest.FetchTopic(topic="ck-ssl", partitions=[
            FetchRequest.FetchTopic.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])],
        forgotten_topics_data=[])
    assert call(s, fetch, 11) is None
    s.close()
    wait_until(lambda: "not a cluster member" in cluster.log(1), 10, "the refusal logged")


def test_spark_source_and_sink_client_over_ssl(cluster):
    """The Spark source/sink's client (RemoteLogClient) with `kafka.security.protocol` / `kafka.ssl.*`."""
    from spark_source.cluster_io import RemoteLogClient, scan
    from spark_source.options import parse_sink_options
    from wire.records import SimpleRecord

    options = parse_sink_options({"kafka.bootstrap.servers": cluster.bootstrap, "topic": "spark-ssl",
                                  **{f"kafka.{k}": v for k, v in cluster.properties().items()}})
    client = RemoteLogClient(options.bootstrap_servers, request_timeout_ms=15_000, security=options.security)
    try:
        client.ensure_topic("spark-ssl", 1)
        client.produce([(("spark-ssl", 0), SimpleRecord(None, b"s%d" % i, (), 1_000 + i)) for i in range(10)])
        assert [r.value for r in scan(client, ("spark-ssl", 0), 0, 10)] == [b"s%d" % i for i in range(10)]
    finally:
        client.close()


def test_one_node_serves_plaintext_and_ssl_listeners_at_once(processes, tmp_path):
    """Each client sees the brokers' endpoints on the listener it connected to."""
    from confluent_kafka.admin import AdminClient

    from raftkafka.cli.dev_certs import CertificateAuthority
    from tests.e2e.procs import write_single_node

    ca = CertificateAuthority()
    ca_path = ca.write_truststore(str(tmp_path / "ca.pem"))
    node = ca.issue(str(tmp_path / "node.pem"), "node-1")
    base = free_base_port(2)
    config = write_single_node(
        str(tmp_path / "data"), base,
        ("listeners", f"PLAINTEXT://{HOST}:{base},CONTROLLER://{HOST}:{base + 1},SSL://{HOST}:{base + 2}"),
        ("ssl.keystore.location", node.keystore), ("ssl.truststore.location", ca_path))
    proc = processes.node(config)
    proc.wait_line(rf"serving Kafka clients on PLAINTEXT://{HOST}:{base}, SSL://{HOST}:{base + 2}", 60)
    plain = AdminClient({"bootstrap.servers": f"{HOST}:{base}"}).list_topics(timeout=10)
    tls = AdminClient({"bootstrap.servers": f"{HOST}:{base + 2}", "security.protocol": "SSL",
                       "ssl.ca.location": ca_path}).list_topics(timeout=10)
    assert [(b.host, b.port) for b in plain.brokers.values()] == [(HOST, base)]
    assert [(b.host, b.port) for b in tls.brokers.values()] == [(HOST, base + 2)]


def test_renewed_certificates_are_used_without_a_restart(cluster):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from raftkafka.cli.dev_certs import CertificateAuthority

    admin = types.SimpleNamespace(keystore=os.path.join(cluster.security, "admin.pem"))

    def served_serial() -> str:
        with tls_socket(cluster, cluster.client_port(1), admin) as s:
            return s.getpeercert()["serialNumber"]

    before = served_serial()
    ca = CertificateAuthority.load(cluster.ca, os.path.join(cluster.security, "ca-key.pem"))
    renewed = ca.issue(os.path.join(cluster.security, "node-1-renewed.pem"), "node-1")
    os.replace(renewed.keystore, os.path.join(cluster.security, "node-1.pem"))  # as a rotation would
    wait_until(lambda: served_serial() != before, 15, "the renewed certificate served")
    assert "TLS certificates reloaded" in cluster.log(1)
    # The node's peers accept its new certificate too: replication to it (acks=all, RF 3) goes on.
    conf = {"bootstrap.servers": cluster.bootstrap, **cluster.properties()}
    admin = AdminClient(conf)
    admin.create_topics([NewTopic("renewed", 3, 3)])["renewed"].result(30)
    producer = Producer({**conf, "acks": "all"})
    for i in range(10):
        producer.produce("renewed", value=b"after-%d" % i, partition=i % 3)
    assert producer.flush(30) == 0
