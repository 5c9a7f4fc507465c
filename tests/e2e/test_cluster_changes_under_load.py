"""The operator's week on real processes, one scenario: a 3-node `dev` cluster with an idempotent
acks=all producer and a consumer group running (confluent-kafka). Node 4 joins as a broker and a
controller (`quorum add-controller`); the active controller is killed with SIGKILL once and
restarted; half of a topic's partitions move onto broker 4 and another topic goes from RF=2 to
RF=3 (`reassign-partitions --execute --throttle`, `--verify`); broker 1 is decommissioned (its
replicas moved off with `--generate --broker-list 2,3,4`, `remove-controller`, a controlled
shutdown, `cluster unregister`), so the quorum moves from {1,2,3} to {2,3,4}; a voter restarted
on another controller port has the voter set record it (UpdateRaftVoter). No acknowledged
record is lost or duplicated, no committed group offset goes back, and the moved replicas' logs
are gone from the brokers that held them."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from raftkafka.cli.dev import node_layout, prepare_node, voters_of
from storage.java_properties import parse_properties
from tests.e2e.procs import REPO, free_base_port, kill_pid, pid_alive, wait_until

pytestmark = pytest.mark.e2e

ORDERS, LEDGER, GROUP = "orders", "ledger", "members"
OFFSETS_PARTITIONS = 4  # __consumer_offsets kept small: broker 1's copies move with the rest


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "raftkafka", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def ok(*args: str) -> str:
    r = cli(*args)
    assert r.returncode == 0, f"{args}: {r.stderr}{r.stdout}"
    return r.stdout


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


def voter_endpoints(bootstrap: str) -> dict[int, list[str]]:
    """Each voter's controller endpoints, from `quorum describe --status`."""
    out = ok("quorum", "--bootstrap-server", bootstrap, "describe", "--status")
    status = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    return {v["id"]: v["endpoints"] for v in json.loads(status["CurrentVoters"])}


def until_accepted(*args: str, what: str, timeout: float = 40) -> None:
    """Retry a voter change while the quorum says not yet (not caught up, change pending, leader moving)."""
    deadline = time.monotonic() + timeout
    while True:
        r = cli(*args)
        if r.returncode == 0 or time.monotonic() > deadline:
            assert r.returncode == 0, f"{what}: {r.stderr}"
            return
        assert any(s in r.stderr for s in ("REQUEST_TIMED_OUT", "NOT_LEADER", "timed out")), r.stderr
        time.sleep(0.3)


def reassign(bootstrap: str, plan: dict, path, *extra: str) -> tuple[str, str]:
    """`--execute` the plan, then `--verify` until nothing is in progress: both commands' last output."""
    path.write_text(json.dumps(plan))
    executed = ok("reassign-partitions", "--bootstrap-server", bootstrap, "--reassignment-json-file", str(path),
             "--execute", *extra)
    assert "Successfully started partition reassignment" in executed, executed
    deadline = time.monotonic() + 60
    while True:
        out = ok("reassign-partitions", "--bootstrap-server", bootstrap, "--reassignment-json-file", str(path),
                 "--verify")
        if "still in progress" not in out or time.monotonic() > deadline:
            assert "still in progress" not in out, out
            return executed, out
        time.sleep(0.3)


class Traffic:
    """An idempotent acks=all producer and a consumer group, each in its own thread."""

    def __init__(self, bootstrap: str):
        from confluent_kafka import Consumer, Producer

        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                  "linger.ms": 5, "message.timeout.ms": 120000})
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False,
                                  "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 1000})
        self.acked: list[bytes] = []
        self.failed: list = []
        self.consumed = 0
        self.commits: dict[tuple[str, int], list[int]] = {}  # committed offsets, in commit order
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._produce), threading.Thread(target=self._consume)]
        for t in self.threads:
            t.start()

    def _produce(self):
        def delivered(err, msg):
            (self.failed if err is not None else self.acked).append(err or msg.value())

        i = 0
        while not self.stop.is_set():
            self.producer.produce(LEDGER if i % 3 == 0 else ORDERS, value=b"m-%06d" % i, on_delivery=delivered)
            i += 1
            self.producer.poll(0.01)
        self.producer.flush(90)

    def _consume(self):
        self.consumer.subscribe([ORDERS, LEDGER])
        while not self.stop.is_set():
            msgs = [m for m in self.consumer.consume(200, 0.2) if m.error() is None]
            if not msgs:
                continue
            self.consumed += len(msgs)
            try:
                for tp in self.consumer.commit(asynchronous=False) or []:
                    if tp.offset >= 0:
                        self.commits.setdefault((tp.topic, tp.partition), []).append(tp.offset)
            except Exception:  # a commit while the coordinator moves fails: the next one retries
                pass
        self.consumer.close()

    def wait_for_progress(self, records: int = 100) -> None:
        """Both clients make progress (after a change: the cluster still serves them)."""
        acked, consumed = len(self.acked), self.consumed
        wait_until(lambda: len(self.acked) >= acked + records and self.consumed > consumed, 60,
                   "the producer and the consumer to make progress", interval=0.1)

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(120)


def test_grow_rebalance_and_shrink_a_live_cluster(processes, tmp_path):
    from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, ElectionType, KafkaError, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    base = free_base_port(4)
    data = tmp_path / "data"
    setting = f"offsets.topic.num.partitions={OFFSETS_PARTITIONS}"
    dev, pids = processes.dev(3, base, str(data), setting)
    restarted = {}  # node id -> Proc, for nodes started again by this test
    bootstrap = ",".join(f"127.0.0.1:{base + 2 * i}" for i in range(4))
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([
        NewTopic(ORDERS, 6, replica_assignment=[[1, 2], [2, 3], [3, 1], [1, 2], [2, 3], [3, 1]]),
        NewTopic(LEDGER, 2, replica_assignment=[[1, 2], [2, 3]])])
    for f in futures.values():
        f.result(30)

    traffic = Traffic(bootstrap)
    try:
        traffic.wait_for_progress(300)

        # 1. Node 4, formatted with the current voters: it registers as a broker and catches up as
        #    an observer of the quorum, then joins it.
        layouts = [node_layout(i, 3, base, str(data / f"node-{i}")) for i in (1, 2, 3)]
        new = node_layout(4, 4, base, str(data / "node-4"),
                          {"controller.quorum.voters": layouts[0].settings["controller.quorum.voters"],
                           "offsets.topic.num.partitions": OFFSETS_PARTITIONS})
        cluster_id = parse_properties(open(data / "node-1" / "meta.properties").read())["cluster.id"]
        prepare_node(new, voters_of(layouts), cluster_id)
        restarted[4] = processes.node(new.config_path)
        pids[4] = restarted[4].pid
        wait_until(lambda: 4 in admin.list_topics(timeout=10).brokers, 30, "broker 4 registered")
        until_accepted("quorum", "--bootstrap-server", bootstrap, "--command-config", new.config_path,
                       "add-controller", what="add-controller 4")
        assert quorum(bootstrap)[1] == [1, 2, 3, 4]

        # 2. The active controller dies hard once; the other voters carry on, then it is back.
        leader = quorum(bootstrap)[0]
        kill_pid(pids[leader])
        wait_until(lambda: quorum(bootstrap)[0] not in (leader, -1), 30, "a new leader", interval=0.2)
        restarted[leader] = processes.node(str(data / f"node-{leader}" / "node.toml"))
        pids[leader] = restarted[leader].pid
        traffic.wait_for_progress()

        # 3. Half of `orders` moves onto broker 4, `ledger` goes from RF=2 to RF=3, throttled.
        target = {(ORDERS, 0): [4, 2], (ORDERS, 1): [2, 4], (ORDERS, 2): [3, 4],
                  (LEDGER, 0): [1, 2, 3], (LEDGER, 1): [2, 3, 4]}
        executed, out = reassign(bootstrap, {"version": 1, "partitions": [
            {"topic": t, "partition": p, "replicas": r} for (t, p), r in target.items()]},
            tmp_path / "grow.json", "--throttle", "50000000")
        assert "The inter-broker throttle limit was set to 50000000 B/s" in executed
        assert out.count("is completed.") == 5 and "Clearing topic-level throttles on topics ledger,orders" in out
        wait_until(lambda: not (data / "node-1" / f"{ORDERS}-0").exists(), 20, "broker 1's orders-0 log deleted")
        elected = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(t, p) for t, p in target]).result(30)
        assert all(e is None or e.code() == KafkaError.ELECTION_NOT_NEEDED for e in elected.values()), elected

        def placed():
            topics = admin.list_topics(timeout=10).topics
            return {key: (part.replicas, sorted(part.isrs), part.leader) for key in target
                    for part in [topics[key[0]].partitions[key[1]]]}
        wanted = {key: (r, sorted(r), r[0]) for key, r in target.items()}
        wait_until(lambda: placed() == wanted, 10, f"replicas, ISRs and preferred leaders {wanted}")
        traffic.wait_for_progress()

        # 4. Decommission broker 1: every replica it holds moves to brokers 2,3,4 (`--generate`),
        #    it leaves the quorum, stops with a controlled shutdown, and is unregistered.
        moving = tmp_path / "topics-to-move.json"
        moving.write_text(json.dumps({"version": 1, "topics": [
            {"topic": t} for t in (ORDERS, LEDGER, "__consumer_offsets")]}))
        out = ok("reassign-partitions", "--bootstrap-server", bootstrap, "--topics-to-move-json-file", str(moving),
                 "--broker-list", "2,3,4", "--generate")
        proposed = json.loads(out.split("Proposed partition reassignment configuration\n", 1)[1])
        assert all(1 not in p["replicas"] for p in proposed["partitions"])
        reassign(bootstrap, proposed, tmp_path / "shrink.json")
        topics = admin.list_topics(timeout=10).topics
        assert not [(t, p) for t in (ORDERS, LEDGER, "__consumer_offsets")
                    for p, part in topics[t].partitions.items() if 1 in part.replicas]
        traffic.wait_for_progress()

        directory_1 = parse_properties(open(data / "node-1" / "meta.properties").read())["directory.id"]
        until_accepted("quorum", "--bootstrap-server", bootstrap, "remove-controller", "--controller-id", "1",
                       "--controller-directory-id", directory_1, what="remove-controller 1")
        wait_until(lambda: quorum(bootstrap)[0] in (2, 3, 4) and quorum(bootstrap)[1] == [2, 3, 4], 30,
                   "voters {2,3,4} and a leader among them", interval=0.2)

        def stop(node: int) -> None:
            """SIGTERM: a controlled shutdown, which completes (exit code 0)."""
            os.kill(pids[node], signal.SIGTERM)
            if node in restarted:
                assert restarted[node].wait(60) == 0
                log = restarted[node].output()
            else:
                dev.wait_line(rf"^node {node} \(pid {pids[node]}\) exited with code 0", 60)
                log = (data / f"node-{node}" / "node.log").read_text()
            assert "controlled shutdown complete" in log

        stop(1)
        assert ok("cluster", "unregister", "--bootstrap-server", bootstrap, "--id", "1").strip() \
            == "Broker 1 is no longer registered."
        wait_until(lambda: sorted(admin.list_topics(timeout=10).brokers) == [2, 3, 4], 10, "broker 1 gone")
        traffic.wait_for_progress()

        # 5. A voter restarted on another controller port has the voter set record it: it sends
        #    UpdateRaftVoter itself, as Kafka's controllers do.
        moved = next(n for n in (2, 3, 4) if n != quorum(bootstrap)[0])
        stop(moved)
        config = data / f"node-{moved}" / "node.toml"
        port = free_base_port(1)
        config.write_text(config.read_text().replace(f"127.0.0.1:{base + 2 * moved - 1}", f"127.0.0.1:{port}"))
        restarted[moved] = processes.node(str(config))
        pids[moved] = restarted[moved].pid
        wait_until(lambda: voter_endpoints(bootstrap).get(moved) == [f"CONTROLLER://127.0.0.1:{port}"], 30,
                   f"node {moved}'s new controller endpoint in the voter set", interval=0.5)
        traffic.wait_for_progress()
    finally:
        traffic.finish()
        for node, proc in restarted.items():  # beside the dev nodes' node.log, for a failure's post-mortem
            (data / f"node-{node}" / "restarted.log").write_text(proc.output())

    assert traffic.failed == [] and len(traffic.acked) > 500
    # Every acknowledged record is in the topics exactly once (the producer is idempotent).
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "audit", "enable.auto.commit": False})
    reader.assign([TopicPartition(ORDERS, p, 0) for p in range(6)] + [TopicPartition(LEDGER, p, 0) for p in range(2)])
    seen: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(seen) < len(traffic.acked) and time.monotonic() < deadline:
        seen.extend(m.value() for m in reader.consume(1000, 0.5) if m.error() is None)
    reader.close()
    assert len(seen) == len(set(seen)), "duplicates in the topics"
    assert sorted(seen) == sorted(traffic.acked), f"{len(set(traffic.acked) - set(seen))} acknowledged records lost"
    # The group's committed offsets never went back, through every change (its coordinator moved too).
    for key, offsets in traffic.commits.items():
        assert offsets == sorted(offsets), key
    committed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(GROUP)])[GROUP].result(30)
    for tp in committed.topic_partitions:
        if traffic.commits.get((tp.topic, tp.partition)):
            assert tp.offset >= traffic.commits[(tp.topic, tp.partition)][-1]
    assert sorted(voter_endpoints(bootstrap)) == [2, 3, 4]
    assert not pid_alive(pids[1])
