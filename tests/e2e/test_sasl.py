"""SASL_PLAINTEXT with real clients and real node processes.

One 3-node `dev` cluster whose client (and inter-broker) listener is SASL_PLAINTEXT with PLAIN
(static JAAS users), SCRAM-SHA-256 and SCRAM-SHA-512 enabled: the SCRAM user is added with the
`configs` CLI, then confluent-kafka, kafka-python and aiokafka produce, consume in a group and
run an admin call with each mechanism; wrong passwords, an unknown mechanism and requests
before login are refused; the SCRAM credential still authenticates after the active controller
is killed with SIGKILL. A single node formatted with `format --add-scram` logs its seeded user in.
"""
from __future__ import annotations

import asyncio
import json
import logging
import socket
import time
import uuid

import pytest

from tests.e2e.procs import HOST, Processes, free_base_port, kill_pid, wait_until
from wire.protocol import (
    MetadataRequest, SaslHandshakeRequest, SaslHandshakeResponse, decode_response, encode_request,
)

pytestmark = pytest.mark.e2e

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-plain";')
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
SETTINGS = ["listener.security.protocol.map=PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
            f"listener.name.plaintext.plain.sasl.jaas.config={JAAS}",
            "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "connections.max.reauth.ms=2000",  # KIP-368: every client and replica fetcher crosses it
            "group.initial.rebalance.delay.ms=0"]


def alice_password(mechanism: str) -> str:
    return "alice-plain" if mechanism == "PLAIN" else "alice-scram"


def run_cli(procs: Processes, *args: str, timeout: float = 60) -> str:
    proc = procs.start(*args)
    code = proc.wait(timeout)
    assert code == 0, proc.output()
    return proc.output()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    procs = Processes()
    try:
        base = free_base_port(3)
        data = tmp_path_factory.mktemp("sasl")
        _, pids = procs.dev(3, base, str(data / "data"), *SETTINGS)
        admin = data / "admin.properties"
        admin.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                         "sasl.username=admin\nsasl.password=admin-secret\n")
        bootstrap = ",".join(f"{HOST}:{base + 2 * i}" for i in range(3))
        out = run_cli(procs, "configs", "--bootstrap-server", bootstrap, "--command-config", str(admin), "--alter",
                      "--entity-type", "users", "--entity-name", "alice", "--add-config",
                      "SCRAM-SHA-256=[iterations=8192,password=alice-scram],SCRAM-SHA-512=[password=alice-scram]")
        assert "Completed updating config for user alice." in out
        described = run_cli(procs, "configs", "--bootstrap-server", bootstrap, "--command-config", str(admin),
                            "--describe", "--entity-type", "users", "--entity-name", "alice")
        assert ("SCRAM credential configs for user-principal 'alice' are "
                "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096") in described
        yield {"bootstrap": bootstrap, "base": base, "pids": pids, "procs": procs}
    finally:
        procs.kill_all()


def confluent_conf(bootstrap, mechanism, password=None):
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
            "sasl.username": "alice", "sasl.password": password or alice_password(mechanism)}


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_kafka(cluster, mechanism):
    confluent_round_trip(confluent_conf(cluster["bootstrap"], mechanism), f"ck-{mechanism.lower()}")


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python(cluster, mechanism):
    auth = dict(bootstrap_servers=cluster["bootstrap"], security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
                sasl_plain_username="alice", sasl_plain_password=alice_password(mechanism))
    kafka_python_round_trip(auth, f"kp-{mechanism.lower()}")


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_aiokafka(cluster, mechanism):
    auth = dict(bootstrap_servers=cluster["bootstrap"], security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
                sasl_plain_username="alice", sasl_plain_password=alice_password(mechanism))
    aiokafka_round_trip(auth, f"aio-{mechanism.lower()}")


def confluent_round_trip(conf: dict, topic: str) -> None:
    """confluent-kafka with `conf`: create a replicated topic, produce 30, consume them in a group."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(conf)
    for future in admin.create_topics([NewTopic(topic, 3, 3)]).values():
        future.result(30)
    producer = Producer(conf)
    for i in range(30):
        producer.produce(topic, f"v{i}".encode(), key=str(i).encode())
    assert producer.flush(30) == 0
    consumer = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got, deadline = set(), time.time() + 30
    while len(got) < 30 and time.time() < deadline:
        msg = consumer.poll(1)
        if msg is not None and not msg.error():
            got.add(msg.value())
    consumer.close()
    assert got == {f"v{i}".encode() for i in range(30)}


def kafka_python_round_trip(auth: dict, topic: str) -> None:
    """kafka-python with the keyword arguments `auth`: admin, produce 20, consume them in a group."""
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(**auth)
    admin.create_topics([NewTopic(topic, 2, 3)])
    assert topic in admin.list_topics()
    admin.close()
    producer = KafkaProducer(**auth)
    for i in range(20):
        producer.send(topic, f"v{i}".encode()).get(30)
    producer.close()
    consumer = KafkaConsumer(topic, group_id=f"g-{topic}", auto_offset_reset="earliest", consumer_timeout_ms=15000,
                             **auth)
    got = set()
    for msg in consumer:
        got.add(msg.value)
        if len(got) == 20:
            break
    consumer.close()
    assert got == {f"v{i}".encode() for i in range(20)}


def aiokafka_round_trip(auth: dict, topic: str) -> None:
    """aiokafka with the keyword arguments `auth`: admin, produce 20, consume them in a group."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    async def main():
        admin = AIOKafkaAdminClient(**auth)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(topic, 2, 3)])
            assert topic in await admin.list_topics()
        finally:
            await admin.close()
        producer = AIOKafkaProducer(**auth)
        await producer.start()
        try:
            for i in range(20):
                await producer.send_and_wait(topic, f"v{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, group_id=f"g-{topic}", auto_offset_reset="earliest", **auth)
        await consumer.start()
        got = set()
        try:
            async with asyncio.timeout(30):
                async for msg in consumer:
                    got.add(msg.value)
                    if len(got) == 20:
                        break
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(main()) == {f"v{i}".encode() for i in range(20)}


def test_clients_keep_working_across_session_lifetimes(cluster):
    """Sessions end every 2 s: librdkafka re-authenticates (KIP-368), kafka-python and aiokafka
    reconnect; none loses a record."""
    from confluent_kafka import Producer
    from kafka import KafkaProducer

    conf = confluent_conf(cluster["bootstrap"], "SCRAM-SHA-256")
    producer = Producer(conf)
    failed = []
    kp = KafkaProducer(bootstrap_servers=cluster["bootstrap"], security_protocol="SASL_PLAINTEXT",
                       sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="alice", sasl_plain_password="alice-scram")
    for i in range(25):  # 5 s
        producer.produce("ck-scram-sha-256", b"long-lived", on_delivery=lambda e, m: e and failed.append(e))
        producer.poll(0)
        kp.send("kp-scram-sha-512", b"long-lived").get(30)
        time.sleep(0.2)
    assert producer.flush(30) == 0 and failed == []
    kp.close()


def test_wrong_password_is_refused_with_the_brokers_message(cluster, caplog):
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaProducer
    from kafka.errors import KafkaError as KafkaPythonError

    errors = []
    admin = AdminClient({**confluent_conf(cluster["bootstrap"], "SCRAM-SHA-256", "wrong"),
                         "error_cb": lambda e: errors.append(str(e))})
    with pytest.raises(Exception):
        admin.list_topics(timeout=2)
    admin.poll(1)  # serves error_cb
    assert any("Invalid user credentials" in e for e in errors), errors
    # kafka-python reads the answer too (the close waits connection.failed.authentication.delay.ms)
    with caplog.at_level(logging.WARNING, logger="kafka"), pytest.raises(KafkaPythonError):
        KafkaProducer(bootstrap_servers=cluster["bootstrap"], security_protocol="SASL_PLAINTEXT",
                      sasl_mechanism="PLAIN", sasl_plain_username="alice", sasl_plain_password="wrong",
                      bootstrap_timeout_ms=2000)
    assert "Authentication failed: Invalid username or password" in caplog.text


def _raw(port: int) -> socket.socket:
    sock = socket.create_connection((HOST, port), timeout=10)
    return sock


def _read_frame(sock) -> bytes | None:
    head = b""
    while len(head) < 4:
        chunk = sock.recv(4 - len(head))
        if not chunk:
            return None
        head += chunk
    size, body = int.from_bytes(head, "big"), b""
    while len(body) < size:
        chunk = sock.recv(size - len(body))
        if not chunk:
            return None
        body += chunk
    return body


def test_unknown_mechanism_and_requests_before_login_are_refused(cluster):
    sock = _raw(cluster["base"])
    sock.sendall(encode_request(SaslHandshakeRequest(mechanism="GSSAPI"), 1, 7, "raw"))
    _, resp = decode_response(_read_frame(sock), SaslHandshakeResponse.API_KEY, 1)
    assert resp.error_code == 33 and resp.mechanisms == MECHANISMS  # UNSUPPORTED_SASL_MECHANISM
    assert _read_frame(sock) is None  # then closed
    sock = _raw(cluster["base"] + 2)
    sock.sendall(encode_request(MetadataRequest(topics=None, allow_auto_topic_creation=False), 5, 1, "raw"))
    assert _read_frame(sock) is None  # closed, unanswered


def _active_controller(procs: Processes, base: int) -> int:
    out = run_cli(procs, "quorum", "describe", "--bootstrap-controller", f"{HOST}:{base + 1}", "--json")
    return json.loads(out[out.index("{"):])["leader_id"]


def test_scram_credentials_survive_a_controller_kill(cluster):
    """Last in the module: it kills a node."""
    from confluent_kafka import Producer

    procs, base = cluster["procs"], cluster["base"]
    leader = _active_controller(procs, base)
    kill_pid(cluster["pids"][leader])
    survivors = [i for i in (1, 2, 3) if i != leader]
    bootstrap = ",".join(f"{HOST}:{base + 2 * (i - 1)}" for i in survivors)
    wait_until(lambda: _active_controller(procs, base + 2 * (survivors[0] - 1)) in survivors, 30,
               "a new active controller")
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        producer = Producer(confluent_conf(bootstrap, mechanism))
        delivered = []
        producer.produce(f"ck-{mechanism.lower()}", b"after-failover", on_delivery=lambda e, m: delivered.append(e))
        assert producer.flush(30) == 0 and delivered == [None]


def test_format_add_scram_seeds_a_user(tmp_path, processes):
    from confluent_kafka import Producer

    port = free_base_port(1)
    log_dir = tmp_path / "node"
    config = tmp_path / "node.toml"
    scram_jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
                  'username="admin" password="admin-secret";')
    config.write_text("\n".join(f'"{k}" = {json.dumps(v)}' for k, v in {
        "node.id": 1, "process.roles": "broker,controller", "log.dirs": str(log_dir),
        "listeners": f"SASL_PLAINTEXT://{HOST}:{port},CONTROLLER://{HOST}:{port + 1}",
        "controller.quorum.voters": f"1@{HOST}:{port + 1}", "offsets.topic.replication.factor": 1,
        "sasl.enabled.mechanisms": "SCRAM-SHA-256", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": scram_jaas}.items()) + "\n")
    cluster_id = run_cli(processes, "format", "--random-uuid").strip().splitlines()[-1]
    assert cluster_id and uuid
    run_cli(processes, "format", "--config", str(config), "--cluster-id", cluster_id,
            "--add-scram", "SCRAM-SHA-256=[name=admin,password=admin-secret]")
    node = processes.node(str(config))
    node.wait_line(r"serving", 60)
    producer = Producer({"bootstrap.servers": f"{HOST}:{port}", "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "admin", "sasl.password": "admin-secret"})
    producer.produce("seeded", b"x")
    assert producer.flush(30) == 0
