"""Client quotas on real node processes with librdkafka (confluent-kafka).

Behaviour only, with generous bounds (the rates themselves are measured by
`python -m raftkafka.bench.quota`, docs/quotas.md): a producer and a consumer under a
byte-rate quota set with the `configs` CLI on a running node are throttled (librdkafka
reports it through throttle_cb and its statistics) and move far fewer bytes than clients
with another client-id on the same broker, which are not throttled; the node's Prometheus
endpoint shows the entity's rate, bound and throttle time. On a 3-node cluster a quota
still applies, and can still be changed, after the active controller is killed with SIGKILL.
"""
from __future__ import annotations

import json
import threading
import time
import urllib.request

import pytest

from tests.e2e.procs import HOST, Processes, free_base_port, kill_pid, wait_until, write_single_node
from tests.test_metrics import parse_exposition

pytestmark = pytest.mark.e2e

QUOTA = 500_000  # bytes/s: its first 10 windows' worth (5 MB) pass before any throttle, as in Kafka
SMALL_QUOTA = 100_000  # 1 MB before a throttle: whatever the load, a few seconds of producing exceed it
CAP = 40_000_000  # bytes one client moves at most
PAYLOAD = b"q" * 10_000


def run_cli(procs: Processes, *args: str) -> str:
    proc = procs.start(*args)
    assert proc.wait(60) == 0, proc.output()
    return proc.output()


class Seen:
    """What librdkafka told one client about throttling."""

    def __init__(self):
        self.callbacks: list[float] = []
        self.stats_max = 0

    def conf(self) -> dict:
        return {"throttle_cb": lambda event: self.callbacks.append(event.throttle_time),
                "stats_cb": self._stats, "statistics.interval.ms": 500}

    def _stats(self, text: str) -> None:
        for broker in json.loads(text)["brokers"].values():
            self.stats_max = max(self.stats_max, broker.get("throttle", {}).get("max", 0))

    @property
    def throttled(self) -> bool:
        return any(t > 0 for t in self.callbacks) and self.stats_max > 0


def produce(bootstrap: str, topic: str, client_id: str, seconds: float, out: dict) -> None:
    from confluent_kafka import Producer

    seen = Seen()
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5,
                         "queue.buffering.max.kbytes": 2048, **seen.conf()})
    sent = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and sent < CAP:
        try:
            producer.produce(topic, PAYLOAD)
            sent += len(PAYLOAD)
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    producer.purge()  # what is still queued was not sent within the time
    producer.flush(10)
    producer.poll(1)  # the last statistics
    out[client_id] = (producer_acked(sent, producer), seen)


def warm_up(bootstrap: str, topic: str) -> None:
    """One record acknowledged: the topic has a leader its producers know of."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "client.id": "warm-up"})
    producer.produce(topic, b"first")
    assert producer.flush(30) == 0


def producer_acked(sent: int, producer) -> int:
    return sent - len(producer) * len(PAYLOAD)


def consume(bootstrap: str, topic: str, client_id: str, seconds: float, out: dict) -> None:
    from confluent_kafka import Consumer, TopicPartition

    seen = Seen()
    consumer = Consumer({"bootstrap.servers": bootstrap, "client.id": client_id, "group.id": client_id,
                         "enable.auto.commit": False, **seen.conf()})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and got < CAP:
        for message in consumer.consume(100, 0.2):
            if message.error() is None:
                got += len(message.value())
    consumer.poll(0.6)  # the last statistics
    consumer.close()
    out[client_id] = (got, seen)


def side_by_side(target, bootstrap: str, topic: str, seconds: float, *client_ids: str) -> dict:
    out: dict = {}
    threads = [threading.Thread(target=target, args=(bootstrap, topic, c, seconds, out)) for c in client_ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 30)
    return out


def create_topic(bootstrap: str, topic: str, replication: int = 1) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, replication)])[topic].result(30)


def test_byte_rate_quotas_throttle_one_client_id_and_not_another(processes, tmp_path):
    base = free_base_port(3)
    metrics_port = base + 2
    bootstrap = f"{HOST}:{base}"
    config = write_single_node(str(tmp_path / "data"), base, ("metrics.port", metrics_port))
    processes.node(config).wait_line(r"serving Kafka clients", 60)
    create_topic(bootstrap, "q")
    # set on the running node: applies without a restart
    for client, key in (("slow", "producer_byte_rate"), ("slow-reader", "consumer_byte_rate")):
        out = run_cli(processes, "configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type", "clients",
                      "--entity-name", client, "--add-config", f"{key}={QUOTA}")
        assert f"Completed updating config for client-id '{client}'." in out
    described = run_cli(processes, "configs", "--bootstrap-server", bootstrap, "--describe", "--entity-type",
                        "clients")
    assert f"Quota configs for client-id 'slow' are producer_byte_rate={float(QUOTA)}" in described

    produced = side_by_side(produce, bootstrap, "q", 3, "slow", "fast")
    (slow, slow_seen), (fast, fast_seen) = produced["slow"], produced["fast"]
    assert slow_seen.throttled and not fast_seen.callbacks
    assert slow < fast / 3, (slow, fast)

    consumed = side_by_side(consume, bootstrap, "q", 3, "slow-reader", "fast-reader")
    (slow, slow_seen), (fast, fast_seen) = consumed["slow-reader"], consumed["fast-reader"]
    assert slow_seen.throttled and not fast_seen.callbacks
    assert slow < fast / 3, (slow, fast)

    with urllib.request.urlopen(f"http://{HOST}:{metrics_port}/metrics", timeout=10) as answer:
        families = parse_exposition(answer.read().decode())

    def value(family: str, quota: str, client: str) -> float:
        [v] = [v for _, labels, v in families[family]["samples"]
               if labels == {"quota": quota, "user": "", "client_id": client}]
        return v

    assert value("raftkafka_client_quota_bound", "producer_byte_rate", "slow") == QUOTA
    assert value("raftkafka_client_quota_rate", "producer_byte_rate", "slow") > 0
    assert value("raftkafka_client_quota_throttle_time_ms", "producer_byte_rate", "slow") > 0
    assert value("raftkafka_client_quota_throttle_time_ms", "consumer_byte_rate", "slow-reader") > 0
    assert value("raftkafka_client_quota_rate", "producer_byte_rate", "fast") > 0


def _active_controller(procs: Processes, base: int) -> int:
    out = run_cli(procs, "quorum", "describe", "--bootstrap-controller", f"{HOST}:{base + 1}", "--json")
    return json.loads(out[out.index("{"):])["leader_id"]


def test_quotas_hold_and_change_after_the_active_controller_is_killed(processes, tmp_path):
    base = free_base_port(3)
    _, pids = processes.dev(3, base, str(tmp_path / "data"))
    bootstrap = ",".join(f"{HOST}:{base + 2 * i}" for i in range(3))
    run_cli(processes, "configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type", "users",
            "--entity-default", "--entity-type", "clients", "--entity-name", "slow",
            "--add-config", f"producer_byte_rate={SMALL_QUOTA}")
    leader = _active_controller(processes, base)
    kill_pid(pids[leader])
    survivors = [i for i in (1, 2, 3) if i != leader]
    bootstrap = ",".join(f"{HOST}:{base + 2 * (i - 1)}" for i in survivors)
    first = base + 2 * (survivors[0] - 1)
    wait_until(lambda: _active_controller(processes, first) in survivors, 30, "a new active controller")
    described = run_cli(processes, "configs", "--bootstrap-server", bootstrap, "--describe",
                        "--entity-type", "users", "--entity-default", "--entity-type", "clients")
    assert (f"Quota configs for the default user-principal, client-id 'slow' are "
            f"producer_byte_rate={float(SMALL_QUOTA)}") in described
    create_topic(bootstrap, "after", replication=2)
    warm_up(bootstrap, "after")
    (sent, seen), = side_by_side(produce, bootstrap, "after", 3, "slow").values()
    assert seen.throttled, (sent, seen.callbacks, seen.stats_max)
    # the new active controller takes changes: without the quota, "slow" is not throttled again
    run_cli(processes, "configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type", "users",
            "--entity-default", "--entity-type", "clients", "--entity-name", "slow",
            "--delete-config", "producer_byte_rate")
    (_, seen), = side_by_side(produce, bootstrap, "after", 2, "slow").values()
    assert not seen.callbacks
