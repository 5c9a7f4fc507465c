"""SASL_SSL end to end: a 3-node `dev --security sasl_ssl` cluster (every listener SASL over
TLS, nodes logging in to each other, replication factor 3) and one client per library with
the admin login from its client.properties: confluent-kafka (SCRAM-SHA-256), kafka-python
(PLAIN) and aiokafka (SCRAM-SHA-256) create a topic, produce and consume in a group; our
`quorum describe` logs in to the SASL_SSL controller listener with the same properties."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.e2e.procs import HOST, REPO, Processes, free_base_port
from tests.e2e.test_sasl import aiokafka_round_trip, confluent_round_trip, kafka_python_round_trip, run_cli

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    procs = Processes()
    try:
        base = free_base_port(3)
        data_dir = str(tmp_path_factory.mktemp("sasl-ssl") / "data")
        procs.dev(3, base, data_dir, "group.initial.rebalance.delay.ms=0", security="sasl_ssl")
        properties = dict(line.strip().split("=", 1) for line in open(os.path.join(data_dir, "client.properties"))
                          if "=" in line and not line.startswith("#"))
        yield {"bootstrap": ",".join(f"{HOST}:{base + 2 * i}" for i in range(3)), "base": base,
               "properties": properties, "properties_path": os.path.join(data_dir, "client.properties"),
               "procs": procs}
    finally:
        procs.kill_all()


def _python_auth(cluster, mechanism: str) -> dict:
    p = cluster["properties"]
    assert p["security.protocol"] == "SASL_SSL"
    return dict(bootstrap_servers=cluster["bootstrap"], security_protocol="SASL_SSL", sasl_mechanism=mechanism,
                sasl_plain_username=p["sasl.username"], sasl_plain_password=p["sasl.password"])


def test_confluent_kafka_over_sasl_ssl(cluster):
    conf = {"bootstrap.servers": cluster["bootstrap"], **cluster["properties"], "sasl.mechanism": "SCRAM-SHA-256"}
    confluent_round_trip(conf, "ck-sasl-ssl")


def test_kafka_python_over_sasl_ssl(cluster):
    auth = _python_auth(cluster, "PLAIN")
    kafka_python_round_trip({**auth, "ssl_cafile": cluster["properties"]["ssl.ca.location"]}, "kp-sasl-ssl")


def test_aiokafka_over_sasl_ssl(cluster):
    from aiokafka.helpers import create_ssl_context

    auth = _python_auth(cluster, "SCRAM-SHA-256")
    context = create_ssl_context(cafile=cluster["properties"]["ssl.ca.location"])
    aiokafka_round_trip({**auth, "ssl_context": context}, "aio-sasl-ssl")


def test_quorum_describe_logs_in_to_the_controller_listener(cluster):
    out = run_cli(cluster["procs"], "quorum", "describe", "--bootstrap-controller", f"{HOST}:{cluster['base'] + 1}",
                  "--command-config", cluster["properties_path"], "--json")
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["leader_id"] in (1, 2, 3) and [v["id"] for v in summary["voters"]] == [1, 2, 3]


def _cli(cluster, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "raftkafka", *args], input=stdin, capture_output=True, text=True,
                          timeout=90, env=env)


def test_the_admin_runs_every_cli_command_on_the_deny_by_default_cluster(cluster):
    """dev --security turns the authorizer on; the admin's client.properties is a super user's."""
    b, props = cluster["bootstrap"], cluster["properties_path"]

    def ok(*args, stdin=None) -> str:
        done = _cli(cluster, *args, stdin=stdin)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done.stdout

    ok("topics", "--bootstrap-server", b, "--command-config", props, "--create", "--topic", "admin-cli",
       "--partitions", "2", "--replication-factor", "3")
    assert "admin-cli" in ok("topics", "--bootstrap-server", b, "--command-config", props, "--list").split()
    assert "PartitionCount: 2" in ok("topics", "--bootstrap-server", b, "--command-config", props, "--describe",
                                     "--topic", "admin-cli")
    ok("produce", "--bootstrap-server", b, "--producer.config", props, "--topic", "admin-cli", stdin="a\nb\nc\n")
    got = ok("consume", "--bootstrap-server", b, "--consumer.config", props, "--topic", "admin-cli",
             "--group", "admin-readers", "--from-beginning", "--max-messages", "3", "--timeout-ms", "30000")
    assert sorted(got.split()) == ["a", "b", "c"]
    assert "admin-readers" in ok("groups", "--bootstrap-server", b, "--command-config", props, "--list").split()
    assert "admin-cli" in ok("groups", "--bootstrap-server", b, "--command-config", props, "--describe",
                             "--group", "admin-readers")
    offsets = ok("get-offsets", "--bootstrap-server", b, "--command-config", props, "--topic", "admin-cli")
    assert sum(int(line.rsplit(":", 1)[1]) for line in offsets.split()) == 3
    ok("configs", "--bootstrap-server", b, "--command-config", props, "--alter", "--entity-type", "topics",
       "--entity-name", "admin-cli", "--add-config", "retention.ms=600000")
    assert "retention.ms=600000" in ok("configs", "--bootstrap-server", b, "--command-config", props,
                                       "--describe", "--entity-type", "topics", "--entity-name", "admin-cli")
    ok("acls", "--bootstrap-server", b, "--command-config", props, "--list")


def test_a_new_scram_user_is_denied_until_the_acls_cli_grants_it(cluster):
    from confluent_kafka import KafkaError, Producer

    b, props = cluster["bootstrap"], cluster["properties_path"]
    done = _cli(cluster, "configs", "--bootstrap-server", b, "--command-config", props, "--alter",
                "--entity-type", "users", "--entity-name", "carol", "--add-config",
                "SCRAM-SHA-256=[password=carol-secret]")
    assert done.returncode == 0, done.stdout + done.stderr
    done = _cli(cluster, "topics", "--bootstrap-server", b, "--command-config", props, "--create",
                "--topic", "carols", "--partitions", "1", "--replication-factor", "3")
    assert done.returncode == 0, done.stdout + done.stderr
    carol = {"bootstrap.servers": b, "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
             "sasl.username": "carol", "sasl.password": "carol-secret",
             "ssl.ca.location": cluster["properties"]["ssl.ca.location"]}

    def produce() -> list:
        errors = []
        producer = Producer({**carol, "message.timeout.ms": 15000})
        for i in range(2):
            producer.produce("carols", f"m{i}".encode(), on_delivery=lambda err, msg: errors.append(err))
        producer.flush(30)
        return errors

    errors = produce()  # carol logs in, but no ACL names her
    assert errors and all(e is not None and e.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED for e in errors)
    listing = _cli(cluster, "topics", "--bootstrap-server", b, "--command-config", _carol_properties(cluster, carol),
                   "--list")
    assert "carols" not in listing.stdout.split()

    done = _cli(cluster, "acls", "--bootstrap-server", b, "--command-config", props, "--add",
                "--allow-principal", "User:carol", "--producer", "--topic", "carols")
    assert done.returncode == 0, done.stdout + done.stderr
    assert produce() == [None, None]


def _carol_properties(cluster, conf: dict) -> str:
    path = os.path.join(os.path.dirname(cluster["properties_path"]), "carol.properties")
    with open(path, "w") as f:
        f.writelines(f"{k}={v}\n" for k, v in conf.items() if k != "bootstrap.servers")
    return path
