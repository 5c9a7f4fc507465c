"""Controller membership (KIP-853) on real processes: with an idempotent acks=all producer and a
consumer group running on a 3-node `dev` cluster, a 4th node joins, the controller quorum moves
from {1,2,3} to {2,3,4} (`quorum add-controller`, then `remove-controller` of node 1) while the
active controller is killed with SIGKILL once (and restarted); no acknowledged record is lost or
duplicated, no committed group offset goes back, and `quorum describe` shows the new set."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest

from raftkafka.cli.dev import node_layout, prepare_node, voters_of
from storage.java_properties import parse_properties
from tests.e2e.procs import REPO, free_base_port, kill_pid, wait_until

pytestmark = pytest.mark.e2e

TOPIC = "membership"
PARTITIONS = 3


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "raftkafka", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def quorum(bootstrap: str) -> tuple[int, list[int]]:
    """(leader, voters) from DescribeQuorum on the Kafka port, asked in-process (polled often)."""
    import trio

    from raftkafka.client.admin import Admin
    from raftkafka.client.operations import describe_quorum
    from storage.env import RealEnv

    async def ask():
        async with Admin(RealEnv(), bootstrap) as admin:
            partition, _ = await describe_quorum(admin.cluster)
            return partition.leader_id, sorted(v.replica_id for v in partition.current_voters)

    try:
        return trio.run(ask)
    except Exception:  # no leader at this moment
        return -1, []


def quorum_status(bootstrap: str) -> dict:
    r = cli("quorum", "--bootstrap-server", bootstrap, "describe", "--status")
    assert r.returncode == 0, r.stderr
    out = {}
    for line in r.stdout.splitlines():
        key, _, value = line.partition(":")
        out[key.strip()] = value.strip()
    out["voters"] = sorted(v["id"] for v in json.loads(out["CurrentVoters"]))
    return out


def until_accepted(*args: str, what: str, timeout: float = 40) -> subprocess.CompletedProcess:
    """Retry a voter change while the quorum says not yet (not caught up, change pending, leader moving)."""
    deadline = time.monotonic() + timeout
    while True:
        r = cli(*args)
        if r.returncode == 0 or time.monotonic() > deadline:
            assert r.returncode == 0, f"{what}: {r.stderr}"
            return r
        assert any(s in r.stderr for s in ("REQUEST_TIMED_OUT", "NOT_LEADER", "timed out")), r.stderr
        time.sleep(0.3)


class Traffic:
    """An idempotent acks=all producer and a consumer group, each in its own thread."""

    def __init__(self, bootstrap: str):
        from confluent_kafka import Consumer, Producer

        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "linger.ms": 5, "message.timeout.ms": 120000})
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "members", "enable.auto.commit": False,
                                  "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 1000})
        self.acked: list[bytes] = []
        self.failed: list = []
        self.consumed: list[bytes] = []
        self.commits: dict[int, list[int]] = {}  # partition -> committed offsets, in commit order
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._produce), threading.Thread(target=self._consume)]

    def start(self):
        for t in self.threads:
            t.start()

    def _produce(self):
        def delivered(err, msg):
            (self.failed if err is not None else self.acked).append(err or msg.value())

        i = 0
        while not self.stop.is_set():
            self.producer.produce(TOPIC, value=b"m-%06d" % i, on_delivery=delivered)
            i += 1
            self.producer.poll(0.01)
        self.producer.flush(90)

    def _consume(self):
        self.consumer.subscribe([TOPIC])
        while not self.stop.is_set():
            msgs = [m for m in self.consumer.consume(200, 0.2) if m.error() is None]
            if not msgs:
                continue
            self.consumed.extend(m.value() for m in msgs)
            try:
                for tp in self.consumer.commit(asynchronous=False) or []:
                    if tp.offset >= 0:
                        self.commits.setdefault(tp.partition, []).append(tp.offset)
            except Exception:  # a commit during a coordinator move fails: the next one retries
                pass
        self.consumer.close()

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(120)


def test_move_the_controller_quorum_to_a_new_node_under_load(processes, tmp_path):
    from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    base = free_base_port(4)
    data = tmp_path / "data"
    _, pids = processes.dev(3, base, str(data))
    bootstrap = ",".join(f"127.0.0.1:{base + 2 * i}" for i in range(4))
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(30)
    assert quorum(bootstrap)[1] == [1, 2, 3]

    traffic = Traffic(bootstrap)
    traffic.start()
    try:
        # A 4th node, formatted with the current voters: it starts as an observer and catches up.
        layouts = [node_layout(i, 3, base, str(data / f"node-{i}")) for i in (1, 2, 3)]
        new = node_layout(4, 4, base, str(data / "node-4"),
                          {"controller.quorum.voters": layouts[0].settings["controller.quorum.voters"]})
        cluster_id = parse_properties(open(data / "node-1" / "meta.properties").read())["cluster.id"]
        prepare_node(new, voters_of(layouts), cluster_id)
        pids = {**pids, 4: processes.node(new.config_path).pid}
        until_accepted("quorum", "--bootstrap-server", bootstrap, "--command-config", new.config_path,
                       "add-controller", what="add-controller 4")
        assert quorum(bootstrap)[1] == [1, 2, 3, 4]

        # The active controller dies hard once; the other three voters carry on, then it is back.
        leader = quorum(bootstrap)[0]
        kill_pid(pids[leader])
        wait_until(lambda: quorum(bootstrap)[0] not in (leader, -1), 30, "a new leader", interval=0.2)
        processes.node(str(data / f"node-{leader}" / "node.toml"))

        directory_1 = parse_properties(open(data / "node-1" / "meta.properties").read())["directory.id"]
        until_accepted("quorum", "--bootstrap-server", bootstrap, "remove-controller", "--controller-id", "1",
                       "--controller-directory-id", directory_1, what="remove-controller 1")
        wait_until(lambda: quorum(bootstrap)[0] in (2, 3, 4) and quorum(bootstrap)[1] == [2, 3, 4], 30,
                   "voters {2,3,4} and a leader among them", interval=0.2)
        time.sleep(1.0)  # traffic on the new quorum
    finally:
        traffic.finish()

    assert traffic.failed == [] and len(traffic.acked) > 100
    # Every acknowledged record is in the topic exactly once (the producer is idempotent).
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "audit", "enable.auto.commit": False})
    reader.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    seen: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(seen) < len(traffic.acked) and time.monotonic() < deadline:
        seen.extend(m.value() for m in reader.consume(1000, 0.5) if m.error() is None)
    reader.close()
    assert sorted(seen) == sorted(traffic.acked)
    assert len(set(seen)) == len(seen)
    # The group's committed offsets never went back, through every change.
    for partition, offsets in traffic.commits.items():
        assert offsets == sorted(offsets), partition
    admin2 = AdminClient({"bootstrap.servers": bootstrap})
    committed = admin2.list_consumer_group_offsets([ConsumerGroupTopicPartitions("members")])["members"].result(30)
    for tp in committed.topic_partitions:
        if traffic.commits.get(tp.partition):
            assert tp.offset >= traffic.commits[tp.partition][-1]
    status = quorum_status(bootstrap)
    assert status["voters"] == [2, 3, 4]
    r = cli("quorum", "--bootstrap-server", bootstrap, "describe", "--replication")
    assert r.returncode == 0, r.stderr
    rows = {line.split()[0]: line.split()[-1] for line in r.stdout.splitlines()[1:]}
    assert rows.get("1") == "Observer" and {rows.get(n) for n in ("2", "3", "4")} <= {"Leader", "Follower"}
