"""SASL_SSL end to end: a 3-node `dev --security sasl_ssl` cluster (every listener SASL over
TLS, nodes logging in to each other, replication factor 3) and one client per library with
the admin login from its client.properties: confluent-kafka (SCRAM-SHA-256), kafka-python
(PLAIN) and aiokafka (SCRAM-SHA-256) create a topic, produce and consume in a group; our
`quorum describe` logs in to the SASL_SSL controller listener with the same properties."""
from __future__ import annotations

import json
import os

import pytest

from tests.e2e.procs import HOST, Processes, free_base_port
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
