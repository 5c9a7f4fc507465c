"""MirrorMaker 2 with our command: `python -m raftkafka mirror mm2.properties` between two
clusters on loopback, both ways at once (MM2's active/active), topics under produce load on
both, the mirror killed with kill -9 twice.

- A->B: ten topics, exactly-once (`B.exactly.once.source.support = enabled`) in two tasks (one
  after the second kill): a read_committed reader of B sees every record of A exactly once, in
  order. A consumer group
  then moves to B at the offsets the mirror translated for it and sees every record it had not
  read (no gap).
- B->A: three topics, at-least-once (Kafka's default) in one task: every record of B is on A.

The clusters are two 3-node `dev` clusters (RF=3 everywhere); RAFTKAFKA_MIRROR_TEST_NODES=1
runs the same test on two single nodes.
"""
from __future__ import annotations

import os
import threading
import time

import pytest

from raftkafka.connect.mirror_records import Checkpoint
from tests.e2e.procs import free_base_port, wait_until

pytestmark = pytest.mark.e2e

TOPICS = [f"orders-{i}" for i in range(10)]
B_TOPICS = TOPICS[:3]  # B's own topics, mirrored to A
PARTITIONS = 2
NODES = int(os.environ.get("RAFTKAFKA_MIRROR_TEST_NODES", "3"))

MM2 = """\
clusters = A, B
A.bootstrap.servers = {a}
B.bootstrap.servers = {b}
A->B.enabled = true
A->B.topics = orders-.*
A->B.tasks.max = 2
B.exactly.once.source.support = enabled
A.consumer.isolation.level = read_committed
B->A.enabled = true
B->A.topics = orders-.*
replication.factor = {rf}
offset-syncs.topic.replication.factor = {rf}
checkpoints.topic.replication.factor = {rf}
offset.storage.replication.factor = {rf}
heartbeats.topic.replication.factor = {rf}
refresh.topics.interval.seconds = 1
sync.topic.configs.interval.seconds = 1
emit.checkpoints.interval.seconds = 1
sync.group.offsets.enabled = true
sync.group.offsets.interval.seconds = 1
offset.flush.interval.ms = 500
"""


def _cluster(processes, tmp_path, name: str) -> str:
    """A cluster of NODES nodes; its bootstrap servers."""
    base = free_base_port(NODES)
    if NODES == 1:
        node = processes.start("--base-port", str(base), "--data-dir", str(tmp_path / name))
        node.wait_line(r"serving Kafka clients", 60)
    else:
        processes.dev(NODES, base, str(tmp_path / name), f"default.replication.factor={NODES}",
                      f"offsets.topic.replication.factor={NODES}", "min.insync.replicas=2")
    return ",".join(f"localhost:{base + 2 * i}" for i in range(NODES))


def _consume(bootstrap: str, group: str, topics: list[str], count: int) -> None:
    """Read `count` records as `group` (from the start), commit, close."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(topics)
    got = 0
    deadline = time.monotonic() + 60
    while got < count and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            got += 1
    consumer.commit(asynchronous=False)
    consumer.close()
    assert got >= count


def _end_offset(bootstrap: str, topic: str, partition: int = 0) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=20)[1]
    finally:
        consumer.close()


def _read_topic(bootstrap: str, topic: str, partitions: int,
                committed: bool = False) -> dict[int, list[tuple[int, bytes, bytes]]]:
    """partition -> (offset, key, value) of every record (`committed`: of committed transactions
    only), up to the partitions' ends now."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False,
                         "isolation.level": "read_committed" if committed else "read_uncommitted"})
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    ends = {tp.partition: consumer.get_watermark_offsets(tp, timeout=20)[1] for tp in tps}
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    out: dict[int, list] = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + 60
    while any(ends[tp.partition] > 0 and tp.offset < ends[tp.partition] for tp in consumer.position(tps)) \
            and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            out[msg.partition()].append((msg.offset(), msg.key(), msg.value()))
    consumer.close()
    return out


def _values(bootstrap: str, topics: list[str], committed: bool = False) -> dict[tuple[str, int], list[bytes]]:
    return {(t, p): [v for _, _, v in records] for t in topics
            for p, records in _read_topic(bootstrap, t, PARTITIONS, committed).items()}


def test_mirror_both_ways_survives_two_kill_9s_exactly_once_into_b_and_a_group_moves_without_a_gap(
        processes, tmp_path):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    source, target = _cluster(processes, tmp_path, "a"), _cluster(processes, tmp_path, "b")
    admin_a = AdminClient({"bootstrap.servers": source})
    for future in admin_a.create_topics([NewTopic(t, PARTITIONS, NODES, config={"retention.ms": "86400000"})
                                         for t in TOPICS]).values():
        future.result(30)
    admin_b = AdminClient({"bootstrap.servers": target})
    for future in admin_b.create_topics([NewTopic(t, PARTITIONS, NODES) for t in B_TOPICS]).values():
        future.result(30)

    stop = threading.Event()
    errors = []

    def produce(bootstrap: str, topics: list[str], per_round: int) -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
        n = 0
        while not stop.is_set():
            for _ in range(per_round):
                topic = topics[n % len(topics)]
                producer.produce(topic, value=b"%s:%d" % (topic.encode(), n), key=b"%d" % n,
                                 on_delivery=lambda err, msg: err and errors.append(err))
                n += 1
            producer.poll(0)
            time.sleep(0.05)
        assert producer.flush(30) == 0

    loads = [threading.Thread(target=produce, args=(source, TOPICS, 100), daemon=True),
             threading.Thread(target=produce, args=(target, B_TOPICS, 30), daemon=True)]
    for load in loads:
        load.start()
    _consume(source, "app", TOPICS, 2000)

    (tmp_path / "mm2.properties").write_text(MM2.format(a=source, b=target, rf=NODES))
    mirror = processes.start("mirror", "mm2.properties", cwd=str(tmp_path))
    # Each way, the other way's heartbeats topic is mirrored too (MM2 mirrors heartbeats by default).
    mirror.wait_line(rf"A->B: replicating {len(TOPICS) + 1} topics .* in 2 tasks, exactly-once", 60)
    mirror.wait_line(rf"B->A: replicating {len(B_TOPICS) + 1} topics .* in 1 task, at-least-once", 60)
    for kill in range(2):
        # Kill once this run has committed a few transactions: mid-stream, with transactions open.
        written = _end_offset(target, "mm2-offsets.A.internal")
        try:
            wait_until(lambda: _end_offset(target, "mm2-offsets.A.internal") >= written + 40, 90,
                       "the mirror's progress moving", interval=0.2)
        except AssertionError as e:
            raise AssertionError(f"{e}; mirror:\n{mirror.output()[-3000:]}") from None
        mirror.popen.kill()  # kill -9 under load
        mirror.wait(30)
        if kill == 1:  # the last run has one task: it fences task 1 of the run before
            (tmp_path / "mm2.properties").write_text(
                MM2.format(a=source, b=target, rf=NODES).replace("A->B.tasks.max = 2", "A->B.tasks.max = 1"))
        mirror = processes.start("mirror", "mm2.properties", cwd=str(tmp_path))
        mirror.wait_line(rf"A->B: replicating {len(TOPICS) + 1} topics \(\d+ partitions resume", 60)
    assert "(0 partitions resume" not in mirror.output() and "in 1 task, exactly-once" in mirror.output()
    time.sleep(1)
    stop.set()
    for load in loads:
        load.join(60)
    assert errors == []
    _consume(source, "app", TOPICS, 3000)  # the group moves on upstream after the kills

    # Every source record is on the target, in the same partition of the renamed topic: into B
    # (read_committed) each exactly once and in order; into A (at-least-once) each at least once.
    source_records = {}
    for t in TOPICS:
        for p, records in _read_topic(source, t, PARTITIONS).items():
            source_records[(t, p)] = [(o, v) for o, _, v in records]
    wanted = {(f"A.{t}", p): [v for _, v in records] for (t, p), records in source_records.items()}
    got = {}

    def copied_exactly_once() -> bool:
        # Cheap first: B's partitions reach past A's ends (B's also hold transaction markers).
        if any(_end_offset(target, t, p) < len(values) for (t, p), values in wanted.items()):
            return False
        got.update(_values(target, [f"A.{t}" for t in TOPICS], committed=True))
        return all(len(got[tp]) >= len(values) for tp, values in wanted.items())

    try:
        wait_until(copied_exactly_once, 90, "as many records on B as on A", interval=1)
    except AssertionError:
        raise AssertionError(f"B has {sum(map(len, got.values()))} of {sum(map(len, wanted.values()))} records; "
                             f"mirror:\n{mirror.output()[-3000:]}")
    for tp, values in wanted.items():
        assert got[tp] == values, f"{tp}: {len(got[tp])} records on B, {len(values)} on A, " \
                                  f"{len(got[tp]) - len(set(got[tp]))} duplicates"
    b_records = _values(target, B_TOPICS)
    wait_until(lambda: all(set(values) <= set(_values(source, [f"B.{t}"])[(f"B.{t}", p)])
                           for (t, p), values in b_records.items()), 60, "every record of B on A", interval=1)
    metadata = admin_b.list_topics(timeout=20)
    assert {t: len(metadata.topics[f"A.{t}"].partitions) for t in TOPICS} == {t: PARTITIONS for t in TOPICS}
    assert "heartbeats" in metadata.topics and "A.checkpoints.internal" in metadata.topics
    described = admin_b.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "A.orders-0")])
    assert list(described.values())[0].result(20)["retention.ms"].value == "86400000"

    # The mirror translates the group's final upstream offsets and commits them on the target.
    committed = {}
    consumer = Consumer({"bootstrap.servers": source, "group.id": "app"})
    for tp in consumer.committed([TopicPartition(t, p) for t in TOPICS for p in range(PARTITIONS)], timeout=20):
        if tp.offset >= 0:  # partitions the group never read have no offset to translate
            committed[(tp.topic, tp.partition)] = tp.offset
    consumer.close()
    assert len(committed) >= 2

    def checkpoints() -> dict:
        latest = {}
        for _, key, value in _read_topic(target, "A.checkpoints.internal", 1)[0]:
            cp = Checkpoint.decode(key, value)
            if cp.group == "app":
                latest[(cp.topic, cp.partition)] = cp
        return latest

    last = {}

    def translated() -> dict | None:
        latest = last["checkpoints"] = checkpoints()
        if any(latest.get((f"A.{t}", p)) is None or latest[(f"A.{t}", p)].upstream != committed[(t, p)]
               for t, p in committed):
            return None
        check = Consumer({"bootstrap.servers": target, "group.id": "app"})
        on_target = {(tp.topic, tp.partition): tp.offset for tp in check.committed(
            [TopicPartition(f"A.{t}", p) for t, p in committed], timeout=20)}
        check.close()
        last["on_target"] = on_target
        wanted = {tp: latest[tp].downstream for tp in on_target}
        return wanted if on_target == wanted else None

    try:
        offsets = wait_until(translated, 60, "the group's translated offsets committed on the target", interval=1)
    except AssertionError:
        raise AssertionError(f"committed upstream {committed}\nlast {last}\nmirror:\n{mirror.output()[-3000:]}")

    # The group switches to the target (read_committed, as readers of an exactly-once mirror
    # read): it reads from the translated offsets and misses nothing.
    switched = Consumer({"bootstrap.servers": target, "group.id": "app", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    switched.subscribe([f"A.{t}" for t in TOPICS])
    seen: dict[tuple[str, int], set] = {}
    first: dict[tuple[str, int], int] = {}
    ends = {(f"A.{t}", p): _end_offset(target, f"A.{t}", p) for t in TOPICS for p in range(PARTITIONS)}
    behind = [TopicPartition(t, p) for (t, p), end in ends.items() if offsets.get((t, p), 0) < end]
    deadline = time.monotonic() + 120
    while behind and time.monotonic() < deadline:
        msg = switched.poll(0.2)
        if msg is None or msg.error() is not None:
            # Every partition of B ends with a transaction marker: the last record is below end - 1.
            behind = [tp for tp in switched.position(behind) if tp.offset < ends[(tp.topic, tp.partition)] - 1]
            continue
        tp = (msg.topic()[2:], msg.partition())
        first.setdefault(tp, msg.offset())
        seen.setdefault(("values",) + tp, set()).add(msg.value())
    switched.close()
    for t in TOPICS:
        for p in range(PARTITIONS):
            if (t, p) in committed and offsets[(f"A.{t}", p)] < ends[(f"A.{t}", p)] - 1:
                # it started where the mirror put it, or past markers and aborted records there
                assert first[(t, p)] >= offsets[(f"A.{t}", p)]
            unread = {v for o, v in source_records[(t, p)] if o >= committed.get((t, p), 0)}
            assert unread <= seen.get(("values", t, p), set()), f"{t}-{p}: records the group never read are missing"
