"""Partition replication with real `python -m raftkafka node` processes and librdkafka clients.

- Durability: 3 combined nodes, RF=3, min.insync.replicas=2; an acks=all producer writes a
  numbered sequence while the partition leader is killed -9 (its followers frozen just before,
  so it dies holding appended-but-uncommitted records) and restarted, three times: every
  acknowledged number is read back, each offset holds exactly one record, and all three
  replicas' logs are byte-identical below the high watermark afterwards.
- ISR: a SIGSTOPped follower leaves the ISR after replica.lag.time.max.ms (its broker session
  is longer, so this is the leader's lag check, not fencing) and rejoins after SIGCONT.
- With two of three replicas dead, acks=all fails with NOT_ENOUGH_REPLICAS, and nothing
  acknowledged before disappears once they are back.
"""
from __future__ import annotations

import os
import signal
import threading
import time

import pytest
import trio

from raftkafka.bench.replication import ReplicationProcesses
from storage.env import RealEnv
from storage.log import LogConfig, PartitionLog
from tests.broker import builders as B
from tests.broker.harness import RawClient
from wire.batch_header import iter_batches
from wire.error_codes import ErrorCode as E

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def wait_until(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = predicate()
        except Exception:  # noqa: BLE001 - brokers restarting: ask again
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def create_topic(admin: AdminClient, topic: str, *, assignment=None, min_isr: int = 2) -> None:
    spec = (NewTopic(topic, len(assignment), replica_assignment=assignment, config={"min.insync.replicas": str(min_isr)})
            if assignment else NewTopic(topic, 1, 3, config={"min.insync.replicas": str(min_isr)}))

    def attempt():
        try:
            admin.create_topics([spec])[topic].result(10)
        except Exception as exc:  # noqa: BLE001
            if "already exists" not in str(exc).lower() and "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise
        return True
    wait_until(attempt, 60, f"creating {topic}")


def leader_and_isr(admin: AdminClient, topic: str):
    p = admin.list_topics(topic, timeout=5).topics[topic].partitions[0]
    return p.leader, tuple(sorted(p.isrs))


def leader_and_isr_from(port: int, topic: str):
    """As `leader_and_isr`, but asking one given broker: librdkafka may route a metadata
    request to a SIGSTOPped broker (its connection looks healthy) and wait out the timeout."""
    async def ask():
        client = await RawClient.connect(port)
        try:
            resp = await client.call(B.metadata(topic, auto_create=False), 5, timeout=5)
        finally:
            await client.aclose()
        p = resp.topics[0].partitions[0]
        return p.leader_id, tuple(sorted(p.isr_nodes))
    return trio.run(ask)


def read_all(bootstrap: str, topic: str, end: int) -> list[tuple[int, bytes]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "verify", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 60
    try:
        while (not out or out[-1][0] < end - 1) and time.monotonic() < deadline:
            for m in c.consume(1000, 0.2):
                if m.error() is None:
                    out.append((m.offset(), m.value()))
    finally:
        c.close()
    return out


def replica_logs(procs: ReplicationProcesses, topic: str, upto: int) -> dict[int, bytes]:
    """Each node's partition log read from disk (after the processes are gone), below `upto`."""
    async def read(i):
        log = await PartitionLog.open(RealEnv(), os.path.join(procs.kafka_dir(i), f"{topic}-0"), LogConfig())
        data, offset = b"", 0
        while offset < upto:
            chunk = log.read_bytes(offset, 1 << 30, max_offset=upto)
            if not chunk:
                break
            data += chunk
            offset = [h for _, h in iter_batches(chunk)][-1].next_offset
        await log.close()
        return data
    return {i: trio.run(read, i) for i in procs.ids}


class Watcher:
    """A consumer tailing the partition throughout, remembering every (offset, value) it saw."""

    def __init__(self, bootstrap: str, topic: str):
        self.seen: dict[int, bytes] = {}
        self.conflicts: list[int] = []
        self._stop = threading.Event()
        self._consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watch",
                                   "enable.auto.commit": False, "fetch.wait.max.ms": 50})
        self._consumer.assign([TopicPartition(topic, 0, 0)])
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            for m in self._consumer.consume(500, 0.05):
                if m.error() is None:
                    if self.seen.setdefault(m.offset(), m.value()) != m.value():
                        self.conflicts.append(m.offset())

    def stop(self):
        self._stop.set()
        self._thread.join(10)
        self._consumer.close()


class NumberedProducer:
    """acks=all, numbered values at ~`rate`/s in a thread; records which numbers were acknowledged."""

    def __init__(self, bootstrap: str, topic: str, rate: float = 500.0, *, acks: str = "all", prefix: bytes = b""):
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "enable.idempotence": False,
                                  "linger.ms": 5, "message.timeout.ms": 60000, "retry.backoff.ms": 100})
        self.topic, self.rate, self.prefix = topic, rate, prefix
        self.acked: set[int] = set()
        self.failed: list[tuple[int, str]] = []
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _done(self, err, msg):
        n = int(msg.value()[len(self.prefix):])
        if err is None:
            self.acked.add(n)
        else:
            self.failed.append((n, str(err)))

    def _run(self):
        start = time.monotonic()
        while not self._stop.is_set():
            if self.sent >= self.rate * (time.monotonic() - start):
                self.producer.poll(0.005)
                continue
            self.producer.produce(self.topic, self.prefix + str(self.sent).encode(), on_delivery=self._done)
            self.sent += 1
            self.producer.poll(0)

    def __enter__(self):
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self._thread.join(10)
        assert self.producer.flush(90) == 0, "producer did not finish"

    def __exit__(self, *exc):
        if not self._stop.is_set():
            self._stop.set()
            self._thread.join(10)


def test_acks_all_records_survive_repeated_kill_9_of_the_leader(tmp_path):
    procs = ReplicationProcesses(str(tmp_path))
    try:
        procs.format()
        for i in procs.ids:
            procs.start(i)
        admin = AdminClient({"bootstrap.servers": procs.bootstrap})
        create_topic(admin, "dur")
        wait_until(lambda: leader_and_isr(admin, "dur")[1] == (1, 2, 3), 60, "full ISR")
        watcher = Watcher(procs.bootstrap, "dur")
        # An acks=1 writer alongside: what the leader appends while its followers are frozen
        # never reaches them (acks=all requests wait one at a time per connection, these do not).
        with NumberedProducer(procs.bootstrap, "dur") as producer, \
                NumberedProducer(procs.bootstrap, "dur", 300, acks="1", prefix=b"x") as loose:
            for _ in range(3):
                time.sleep(1.5)
                leader = wait_until(lambda: leader_and_isr(admin, "dur")[0] in procs.ids
                                    and leader_and_isr(admin, "dur")[0], 30, "a leader")
                # Freeze the followers first: what the leader appends now cannot be replicated, so
                # it must not be acknowledged; the kill then leaves it uncommitted on the old leader,
                # which truncates it when it rejoins.
                followers = [i for i in procs.ids if i != leader]
                for i in followers:
                    procs.signal(i, signal.SIGSTOP)
                time.sleep(0.3)
                procs.kill(leader)
                for i in followers:
                    procs.signal(i, signal.SIGCONT)
                time.sleep(0.5)
                procs.start(leader)
                # Its session lapses (or its unclean re-registration lands): a new leader...
                wait_until(lambda: leader_and_isr(admin, "dur")[0] in set(followers), 30, "a new leader")
                # ...and the restarted replica catches up and rejoins the ISR.
                wait_until(lambda: leader_and_isr(admin, "dur")[1] == (1, 2, 3), 60, "the ISR healed")
            time.sleep(1.0)
            producer.stop()
            loose.stop()
        assert len(producer.acked) > 1000
        c = Consumer({"bootstrap.servers": procs.bootstrap, "group.id": "wm"})
        hw = wait_until(lambda: c.get_watermark_offsets(TopicPartition("dur", 0), timeout=5)[1], 30, "the HW")
        c.close()
        records = read_all(procs.bootstrap, "dur", hw)
        assert [o for o, _ in records] == list(range(hw)), "each offset exactly once, no gaps"
        numbers = {int(v) for _, v in records if not v.startswith(b"x")}
        assert producer.acked <= numbers, f"lost acknowledged records: {sorted(producer.acked - numbers)[:10]}"
        # No consumer ever saw a record that was later truncated: whatever it read at an offset
        # is what the healed log holds there.
        watcher.stop()
        final = dict(records)
        assert watcher.conflicts == [] and len(watcher.seen) > 1000
        assert all(final[o] == v for o, v in watcher.seen.items())
        # The old leaders did die holding uncommitted records, and cut them off when they rejoined.
        node_logs = "".join(open(os.path.join(procs.base, f"node{i}.log")).read() for i in procs.ids)
        assert "truncating to" in node_logs
        wait_until(lambda: leader_and_isr(admin, "dur")[1] == (1, 2, 3), 30, "full ISR at the end")
        time.sleep(1.0)  # the followers' next fetches bring every ISR member to the HW
        procs.stop_all()
        logs = replica_logs(procs, "dur", hw)
        assert len(logs[1]) > 0 and logs[1] == logs[2] == logs[3]
    finally:
        procs.stop_all()


def test_a_stopped_follower_leaves_the_isr_after_the_lag_time_and_rejoins_after_sigcont(tmp_path):
    procs = ReplicationProcesses(str(tmp_path), settings={"broker.session.timeout.ms": "30000"},
                                 static={"replica.lag.time.max.ms": "1500"})
    try:
        procs.format()
        for i in procs.ids:
            procs.start(i)
        admin = AdminClient({"bootstrap.servers": procs.bootstrap})
        create_topic(admin, "isr")
        wait_until(lambda: leader_and_isr(admin, "isr")[1] == (1, 2, 3), 60, "full ISR")
        leader = leader_and_isr(admin, "isr")[0]
        follower = next(i for i in procs.ids if i != leader)
        with NumberedProducer(procs.bootstrap, "isr", rate=200) as producer:
            time.sleep(0.5)
            procs.signal(follower, signal.SIGSTOP)
            stopped = time.monotonic()
            on_leader = procs.kafka_ports[leader]
            wait_until(lambda: follower not in leader_and_isr_from(on_leader, "isr")[1], 20, "the ISR to shrink")
            assert time.monotonic() - stopped >= 1.0  # not before the lag time (loosely)
            time.sleep(1.0)
            assert follower not in leader_and_isr_from(on_leader, "isr")[1]  # a stopped follower stays out
            assert f"Topic: isr\tPartition: 0" in under_replicated_partitions(on_leader)
            procs.signal(follower, signal.SIGCONT)
            wait_until(lambda: leader_and_isr(admin, "isr")[1] == (1, 2, 3), 30, "the follower to rejoin")
            assert "Topic: isr" not in under_replicated_partitions(on_leader)
            producer.stop()
        assert producer.failed == [] and len(producer.acked) == producer.sent
    finally:
        procs.stop_all()


def under_replicated_partitions(port: int) -> str:
    """`python -m raftkafka topics --describe --under-replicated-partitions` against one broker."""
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-m", "raftkafka", "topics", "--bootstrap-server", f"127.0.0.1:{port}",
                           "--describe", "--under-replicated-partitions"], capture_output=True, text=True,
                          timeout=60, check=True).stdout


async def _produce_raw(port: int, topic: str, value: bytes, acks: int = -1):
    client = await RawClient.connect(port)
    try:
        r = B.one_partition(await client.call(B.produce(topic, 0, B.batch(1, value_size=len(value)), acks=acks,
                                                        timeout_ms=3000), 8, timeout=30))
        return r.error_code, r.base_offset
    finally:
        await client.aclose()


def test_two_of_three_replicas_down_refuses_acks_all_and_loses_nothing_acknowledged(tmp_path):
    # Node 1 is the only controller (the metadata quorum stays up); replicas are 2, 3, 4.
    procs = ReplicationProcesses(str(tmp_path), n=4, controllers=(1,))
    try:
        procs.format()
        for i in procs.ids:
            procs.start(i)
        admin = AdminClient({"bootstrap.servers": procs.bootstrap})
        create_topic(admin, "two", assignment=[[2, 3, 4]])
        wait_until(lambda: leader_and_isr(admin, "two")[1] == (2, 3, 4)
                   and leader_and_isr(admin, "two")[0] in (2, 3, 4), 60, "full ISR")
        leader = leader_and_isr(admin, "two")[0]  # 2 unless it registered late
        others = [i for i in (2, 3, 4) if i != leader]
        port = procs.kafka_ports[leader]
        # The admin's metadata may come from a broker that learnt of the leadership before the
        # leader itself did (UNKNOWN_TOPIC_OR_PARTITION until then; nothing is written).
        first = wait_until(lambda: (r := trio.run(_produce_raw, port, "two", b"v"))[0] == E.NONE and r, 30,
                           "the leader to take a write")
        assert first == (E.NONE, 0)
        for expected in range(1, 20):
            assert trio.run(_produce_raw, port, "two", b"v") == (E.NONE, expected)
        for i in others:
            procs.kill(i)
        wait_until(lambda: leader_and_isr(admin, "two")[1] == (leader,), 30, "the ISR to shrink to the leader")
        # The leader answers Metadata from its metadata image, which it updates before its
        # partition takes the new ISR (as Kafka's broker does): a produce in between is appended
        # and waits for the old ISR, never acknowledged. After that, acks=all is refused.
        unacknowledged = 0
        while (answer := trio.run(_produce_raw, port, "two", b"v")) != (E.NOT_ENOUGH_REPLICAS, -1):
            assert answer == (E.REQUEST_TIMED_OUT, -1) and unacknowledged < 3, answer
            unacknowledged += 1
        for i in others:
            procs.start(i)
        wait_until(lambda: leader_and_isr(admin, "two")[1] == (2, 3, 4), 60, "the ISR to heal")
        code, offset = trio.run(_produce_raw, port, "two", b"v")
        assert code == E.NONE and offset == 20 + unacknowledged
        records = read_all(procs.bootstrap, "two", 21 + unacknowledged)
        assert [o for o, _ in records] == list(range(21 + unacknowledged))
    finally:
        procs.stop_all()
