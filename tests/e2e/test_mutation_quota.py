"""controller_mutation_rate (KIP-599) on a real node with real admin clients.

kafka-python's admin speaks the strict versions (CreateTopics v6, DeleteTopics v5,
CreatePartitions v3): once its client-id's bucket is in debt, a mutation is refused with
THROTTLING_QUOTA_EXCEEDED and nothing changes. librdkafka's admin (confluent-kafka) speaks
the versions before them (CreateTopics v4, CreatePartitions v2), which are permissive, as in
Kafka: its topics are created, and the throttle reaches its throttle_cb. Our admin client
(raftkafka.client, strict versions) sends what was refused again after the throttle time, as the
Java AdminClient does, until the call's timeout.
"""
from __future__ import annotations

import time
import urllib.request

import pytest
import trio

from raftkafka.client import Admin
from raftkafka.client import NewTopic as OurNewTopic
from storage.env import RealEnv
from tests.e2e.procs import HOST, free_base_port, write_single_node
from tests.e2e.test_quotas import run_cli
from tests.test_metrics import parse_exposition

pytestmark = pytest.mark.e2e

RATE = 5  # partitions/s: a bucket of 50
THROTTLING_QUOTA_EXCEEDED = 89


def test_strict_versions_refuse_over_the_quota_and_older_ones_only_throttle(processes, tmp_path):
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
    from kafka import KafkaAdminClient

    base = free_base_port(3)
    bootstrap = f"{HOST}:{base}"
    config = write_single_node(str(tmp_path / "data"), base, ("metrics.port", base + 2))
    processes.node(config).wait_line(r"serving Kafka clients", 60)
    for client, rate in (("strict-admin", RATE), ("librdkafka-admin", RATE), ("retrying-admin", 1)):
        run_cli(processes, "configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type", "clients",
                "--entity-name", client, "--add-config", f"controller_mutation_rate={rate}")

    strict = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="strict-admin")
    try:
        # 45 of 50 tokens, then 10 more: admitted while the bucket is not in debt (5 into it)
        created = strict.create_topics({"a": {"num_partitions": 45, "replication_factor": 1},
                                        "b": {"num_partitions": 10, "replication_factor": 1},
                                        "c": {"num_partitions": 1, "replication_factor": 1}}, raise_errors=False)
        codes = {t["name"]: t["error_code"] for t in created["topics"]}
        assert codes == {"a": 0, "b": 0, "c": THROTTLING_QUOTA_EXCEEDED}, created
        assert {t["name"]: t["num_partitions"] for t in created["topics"]}["a"] == 45  # v5+: what was created
        time.sleep(1.1)  # kafka-python holds the connection for the 1 s throttle (KIP-219) and refuses to send
        grown = strict.create_partitions({"b": 30}, raise_errors=False)
        # after the throttle the debt is paid, so this one is admitted
        assert [r.error_code for r in grown.results] == [0]
        refused = strict.delete_topics(["a"], raise_errors=False)  # ~20 into debt again: ~4 s to refill
        assert [t["error_code"] for t in refused["topics"]] == [THROTTLING_QUOTA_EXCEEDED]
    finally:
        strict.close()

    throttles: list[float] = []
    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "librdkafka-admin",
                         "throttle_cb": lambda event: throttles.append(event.throttle_time)})
    futures = admin.create_topics([NewTopic("d", 40, 1), NewTopic("e", 20, 1)])  # 10 over the bucket
    for future in futures.values():
        future.result(30)
    admin.create_partitions([NewPartitions("d", 41)])["d"].result(30)  # in debt: still created
    admin.poll(1)
    assert throttles and max(throttles) > 0, throttles
    topics = admin.list_topics(timeout=10).topics
    assert {"a", "b", "d", "e"} <= set(topics) and "c" not in topics  # what was refused changed nothing
    assert (len(topics["b"].partitions), len(topics["d"].partitions)) == (30, 41)

    async def retrying_admin():
        async with Admin(RealEnv(), bootstrap, client_id="retrying-admin") as ours:
            started = time.monotonic()
            # 8 + 4 of 10 tokens: "h" is refused (2 in debt: 2 s), then sent again and created
            created = await ours.create_topics([OurNewTopic("f", 8, 1), OurNewTopic("g", 4, 1), OurNewTopic("h", 10, 1)])
            waited = time.monotonic() - started
        # 10 in debt now (10 s). Over new connections (the old one holds back its requests for
        # the throttle time), a refusal is the answer without retries, or when the throttle
        # outlasts the call's timeout
        async with Admin(RealEnv(), bootstrap, client_id="retrying-admin") as ours:
            unretried = await ours.create_partitions({"f": 9}, retry_on_quota_violation=False)
        async with Admin(RealEnv(), bootstrap, client_id="retrying-admin") as ours:
            timed_out = await ours.delete_topics(["g"], timeout_ms=3000)
        return created, waited, unretried, timed_out

    created, waited, unretried, timed_out = trio.run(retrying_admin)
    assert created == {"f": None, "g": None, "h": None} and waited >= 1.9, (created, waited)
    assert [e.code for e in unretried.values()] == [THROTTLING_QUOTA_EXCEEDED], unretried
    assert [e.code for e in timed_out.values()] == [THROTTLING_QUOTA_EXCEEDED], timed_out
    topics = admin.list_topics(timeout=10).topics
    assert {"f", "g", "h"} <= set(topics) and len(topics["f"].partitions) == 8

    # the active controller's metrics per quota entity (here: client-ids)
    with urllib.request.urlopen(f"http://{HOST}:{base + 2}/metrics", timeout=10) as answer:
        families = parse_exposition(answer.read().decode())

    def value(family: str, client: str) -> float:
        [v] = [v for _, labels, v in families[f"raftkafka_controller_mutation_{family}"]["samples"]
               if labels == {"user": "", "client_id": client}]
        return v

    assert value("quota", "strict-admin") == RATE and value("quota", "retrying-admin") == 1
    # (the rates and throttles are over the last 11 s: the latest client's are there for sure)
    assert value("rate", "retrying-admin") > 0 and value("throttle_time_ms", "retrying-admin") > 0
    assert value("tokens", "retrying-admin") < 10  # in debt, or refilling: a full bucket holds 10
