"""Every metric the shipped Grafana dashboard and Prometheus alert rules use, scraped over HTTP
from a running 3-node cluster (real `python -m raftkafka node` processes) under load.

The cluster gets a replicated producer load (RF=3, acks=all), a consumer group that
stops with lag on partitions led by every node, a produce the broker refuses, and one
node killed with -9 and restarted. Across the scrapes taken meanwhile, each metric
must show a non-zero value, except the ones that are zero in any cluster without a
damaged disk (HEALTHY_ZERO), which must be exported with a sample line.
"""
from __future__ import annotations

import json
import os
import re
import urllib.request

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic

from raftkafka.cli.dev import node_layout, prepare_node, voters_of
from metrics.registry import CATALOGUE
from tests.e2e.procs import HOST, free_base_port, wait_until
from tests.test_metrics import parse_exposition


REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OPS = os.path.join(REPO, "ops")
CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
GROUP = "lagging"
COMMITTED = 10
PER_PARTITION = 100

# Zero in a cluster whose disks are fine: a log dir that failed, a compacted log the cleaner
# cannot decode. The test shows them exported (a sample line), not their value.
HISTOGRAMS = {d.name for d in CATALOGUE if d.kind == "histogram"}
HEALTHY_ZERO = {"raftkafka_offline_log_partitions", "raftkafka_uncleanable_partitions"}


def referenced_metrics() -> set[str]:
    """Metric families in the dashboard's and the alert rules' expressions."""
    with open(os.path.join(OPS, "grafana", "raftkafka-dashboard.json")) as f:
        dashboard = json.load(f)
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    with open(os.path.join(OPS, "prometheus", "alerts.yml")) as f:
        exprs += re.findall(r"^\s*expr:\s*(.+)$", f.read(), re.M)
    names = set()
    for expr in exprs:
        for token in re.findall(r"\braftkafka_[a-z0-9_]+", expr):
            family = re.sub(r"_(bucket|sum|count)$", "", token)
            names.add(family if HISTOGRAMS & {family} else token)
    return names


def scrape(port: int) -> dict[str, list[tuple[dict, float]]]:
    """Family name -> [(labels, value)], histogram series under their family."""
    with urllib.request.urlopen(f"http://{HOST}:{port}/metrics", timeout=10) as answer:
        assert answer.status == 200
        body = answer.read().decode()
    return {name: [(labels, value) for _, labels, value in fam["samples"]]
            for name, fam in parse_exposition(body).items()}


class Seen:
    """The largest value of each family (any series, any node) over every scrape."""

    def __init__(self, ports: dict[int, int]):
        self.ports = ports
        self.peak: dict[str, float] = {}
        self.last: dict[int, dict] = {}

    def scrape(self, nodes) -> dict[int, dict]:
        for node in nodes:
            families = self.last[node] = scrape(self.ports[node])
            for name, samples in families.items():
                self.peak[name] = max([self.peak.get(name, 0.0)] + [v for _, v in samples])
        return {n: self.last[n] for n in nodes}


def group_lag(scrapes: dict[int, dict]) -> dict[tuple[str, str], float]:
    return {(labels["topic"], labels["partition"]): value
            for families in scrapes.values()
            for labels, value in families.get("raftkafka_consumer_group_lag", [])
            if labels["group"] == GROUP}


def total(scrapes: dict[int, dict], name: str) -> float:
    return sum(v for families in scrapes.values() for _, v in families.get(name, []))


def test_a_loaded_cluster_exports_a_value_for_every_dashboard_and_alert_metric(tmp_path, processes):
    procs = processes
    base = free_base_port(5)  # 6 Kafka/controller ports, then 3 metrics ports
    metrics_ports = {i: base + 5 + i for i in (1, 2, 3)}
    layouts = {i: node_layout(i, 3, base, str(tmp_path / f"node-{i}"), {
        "metrics.port": metrics_ports[i], "replica.lag.time.max.ms": 1500,
        "broker.session.timeout.ms": 2500, "broker.heartbeat.interval.ms": 300}) for i in (1, 2, 3)}
    for layout in layouts.values():
        prepare_node(layout, voters_of(list(layouts.values())), CLUSTER_ID)
    nodes = {i: procs.node(layouts[i].config_path) for i in (1, 2, 3)}
    for proc in nodes.values():
        proc.wait_line("serving Kafka clients", 60)
    bootstrap = ",".join(f"{HOST}:{layouts[i].client_port}" for i in (1, 2, 3))
    seen = Seen(metrics_ports)

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([
            NewTopic("replicated", num_partitions=3, replication_factor=3),
            NewTopic("spread", num_partitions=3, replication_factor=1),  # one replica each: led by different nodes
            NewTopic("tiny", num_partitions=1, replication_factor=1, config={"max.message.bytes": "200"})]).values():
        future.result(30)
    leaders = {p.leader for p in admin.list_topics("spread", timeout=10).topics["spread"].partitions.values()}
    assert leaders == {1, 2, 3}  # so the group's coordinator does not host two of its partitions

    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(2000):
        producer.produce("replicated", value=b"r" * 100, key=str(i).encode())
    for partition in range(3):
        for i in range(PER_PARTITION):
            producer.produce("spread", value=b"s" * 50, partition=partition)
    refused = []
    producer.produce("tiny", value=b"x" * 1000, on_delivery=lambda err, msg: refused.append(err))
    assert producer.flush(30) == 0
    assert refused and refused[0].code() == confluent_kafka.KafkaError.MSG_SIZE_TOO_LARGE

    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.subscribe(["spread"])
    received = []

    def consumed_some() -> bool:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            received.append(msg)
        return len(received) >= 30
    wait_until(consumed_some, 30, "the group to receive records")
    consumer.commit(offsets=[confluent_kafka.TopicPartition("spread", p, COMMITTED) for p in range(3)],
                    asynchronous=False)
    consumer.close()

    # Lag of every partition, whichever node leads it, from the coordinator alone.
    expected = {("spread", str(p)): PER_PARTITION - COMMITTED for p in range(3)}
    wait_until(lambda: group_lag(seen.scrape((1, 2, 3))) == expected, 30, f"group lag {expected}")
    assert total(seen.last, "raftkafka_broker_topic_replication_bytes_in_total") > 0

    # One node killed: partitions go under-replicated and offline, ISRs shrink, the broker is fenced.
    active = next(i for i in (1, 2, 3) if total({i: seen.last[i]}, "raftkafka_active_controller") == 1)
    victim = next(i for i in (3, 2, 1) if i != active)
    alive = [i for i in (1, 2, 3) if i != victim]
    nodes[victim].popen.kill()
    nodes[victim].wait(10)
    more = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(50):
        more.produce("replicated", value=b"m" * 100)
    assert more.flush(30) == 0

    def outage_visible():
        s = seen.scrape(alive)
        return all(total(s, name) > 0 for name in (
            "raftkafka_under_replicated_partitions", "raftkafka_offline_partitions",
            "raftkafka_fenced_brokers", "raftkafka_isr_shrinks_total", "raftkafka_raft_follower_lag"))
    wait_until(outage_visible, 30, "the outage in the metrics", interval=0.3)

    # Back again: its replicas catch up and rejoin the ISRs.
    nodes[victim] = procs.node(layouts[victim].config_path)
    nodes[victim].wait_line("serving Kafka clients", 60)
    wait_until(lambda: total(seen.scrape((1, 2, 3)), "raftkafka_isr_expands_total") > 0, 30,
               "ISR expansions", interval=0.3)

    # The controllers count their answers to the brokers' RPCs: heartbeats, and the ISR changes.
    answered: dict[tuple[str, str], float] = {}
    for families in seen.last.values():
        for labels, value in families.get("raftkafka_controller_request_errors_total", []):
            answered[labels["rpc"], labels["error"]] = answered.get((labels["rpc"], labels["error"]), 0) + value
    assert answered.get(("BrokerHeartbeat", "NONE"), 0) > 0 and answered.get(("AlterPartition", "NONE"), 0) > 0

    wanted = referenced_metrics()
    assert {"raftkafka_consumer_group_lag", "raftkafka_offline_partitions",
            "raftkafka_request_latency_seconds"} <= wanted  # the parse found the expressions
    missing = sorted(name for name in wanted if name not in seen.peak)
    assert not missing, f"not exported: {missing}"
    zero = sorted(name for name in wanted - HEALTHY_ZERO if seen.peak[name] <= 0)
    assert not zero, f"never non-zero: {zero}"
    for name in HEALTHY_ZERO & wanted:
        assert all(seen.last[i].get(name) for i in (1, 2, 3)), f"{name} has no sample line"

