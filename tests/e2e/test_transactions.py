"""Transactions with real clients on a 3-node `dev` cluster of real processes (issue 22):
confluent-kafka's transactional producer commits and aborts across partitions,
read_committed consumers see only committed records and read_uncommitted ones see the
aborted too; kafka-python's and aiokafka's commit records with a group's offsets and
abort; the cleaner removes the aborted records of a compacted topic; then, with each of
confluent-kafka, kafka-python and aiokafka, consume-transform-produce with
send_offsets_to_transaction while a partition leader that is not the coordinator is killed
with SIGKILL (and started again), then the transaction coordinator's node (and started
again): the producer re-initialises and the read_committed output holds every input record
exactly once. One cluster serves the module (the kill tests come last)."""
from __future__ import annotations

import glob
import os
import signal
import time

import pytest

from broker.groups.hashing import partition_for_group
from tests.e2e.procs import HOST, Processes, free_base_port, pid_alive, wait_until
from tests.e2e.transactional_pipelines import PARTITIONS, AiokafkaPipeline, ConfluentPipeline, KafkaPythonPipeline

pytestmark = pytest.mark.e2e


class Cluster:
    def __init__(self, processes: Processes, dev, base: int, pids: dict[int, int], data: str):
        from confluent_kafka.admin import AdminClient
        self.processes, self.dev, self.base, self.pids, self.data = processes, dev, base, pids, data
        self.bootstrap = ",".join(f"{HOST}:{base + 2 * (i - 1)}" for i in pids)
        self.admin = AdminClient({"bootstrap.servers": self.bootstrap})

    def topics(self, topic: str | None = None) -> dict:
        """Topic metadata; asked again when the broker asked first was just killed (its
        request then times out rather than failing over)."""
        from confluent_kafka import KafkaException
        for attempt in range(5):
            try:
                return self.admin.list_topics(topic, timeout=10).topics
            except KafkaException:
                if attempt == 4:
                    raise

    def create(self, topic: str) -> None:
        from confluent_kafka.admin import NewTopic
        self.admin.create_topics([NewTopic(topic, PARTITIONS, 3)])[topic].result(30)
        wait_until(lambda: all(len(p.isrs) == 3 for p in
                               self.topics(topic)[topic].partitions.values()),
                   30, f"full ISRs of {topic}")

    def kill_a_leader_except(self, topic: str, spared: int) -> int:
        """A node leading a partition of `topic` that is not `spared`."""
        partitions = self.topics(topic)[topic].partitions.values()
        return next(p.leader for p in partitions if p.leader != spared)

    def restart(self, node_id: int) -> None:
        """Start a killed node again from the configuration `dev` wrote for it; wait until it
        serves clients (the controller unfenced it) and the ISRs are full. The controller may
        not have noticed the death yet, so full ISRs alone could mean the node is still down."""
        config = next(path for path in glob.glob(os.path.join(self.data, "*", "node.toml"))
                      if f'"node.id" = {node_id}\n' in open(path).read())
        proc = self.processes.node(config)
        self.pids[node_id] = proc.popen.pid
        proc.wait_line(r"serving Kafka clients", 60)
        wait_until(lambda: pid_alive(proc.popen.pid) and all(
            len(p.isrs) == 3 for t in self.topics().values()
            if not t.topic.startswith("__") for p in t.partitions.values()), 60, f"node {node_id} back in the ISRs")

    def coordinator_of(self, transactional_id: str) -> int:
        """The leader of the id's __transaction_state partition (50 partitions, as Kafka)."""
        topic = self.topics("__transaction_state")["__transaction_state"]
        return topic.partitions[partition_for_group(transactional_id, 50)].leader


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    processes = Processes()
    try:
        base = free_base_port(3)
        # The cleaner looks for work every 0.5 s (Kafka's log.cleaner.backoff.ms is 15 s).
        data = str(tmp_path_factory.mktemp("txn") / "data")
        dev, pids = processes.dev(3, base, data, "log.cleaner.backoff.ms=500")
        yield Cluster(processes, dev, base, pids, data)
    finally:
        processes.kill_all()


def read_all(bootstrap: str, topic: str, isolation: str, expected: int, timeout: float = 30) -> list[bytes]:
    """Every record of `topic` from the beginning, until `expected` came and the ends were reached."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{isolation}-{time.monotonic()}",
                         "isolation.level": isolation, "enable.auto.commit": False,
                         "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    got: list[bytes] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and (len(got) < expected or len(at_end) < PARTITIONS):
        for msg in consumer.consume(500, 0.2):
            if msg.error() is None:
                got.append(msg.value())
                at_end.discard(msg.partition())
            elif msg.error().code() == msg.error()._PARTITION_EOF:
                at_end.add(msg.partition())
    consumer.close()
    return got


def test_committed_and_aborted_transactions_across_partitions(cluster):
    from confluent_kafka import Producer
    cluster.create("txn-basic")
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "basic"})
    producer.init_transactions(60)
    expected_committed, aborted = [], []
    for round_ in range(4):
        producer.begin_transaction()
        values = [b"r%d-%02d" % (round_, i) for i in range(12)]
        for i, value in enumerate(values):
            producer.produce("txn-basic", value=value, partition=i % PARTITIONS)
        if round_ % 2:
            producer.flush(30)  # the records are in the log before the abort
            producer.abort_transaction(30)
            aborted += values
        else:
            producer.commit_transaction(30)
            expected_committed += values
    # One left open: read_committed must stop below it, read_uncommitted sees it.
    producer.begin_transaction()
    producer.produce("txn-basic", value=b"open", partition=0)
    producer.flush(30)

    committed = read_all(cluster.bootstrap, "txn-basic", "read_committed", len(expected_committed))
    assert sorted(committed) == sorted(expected_committed)
    uncommitted = read_all(cluster.bootstrap, "txn-basic", "read_uncommitted", len(expected_committed) + len(aborted) + 1)
    assert sorted(uncommitted) == sorted(expected_committed + aborted + [b"open"])

    producer.commit_transaction(30)
    assert b"open" in read_all(cluster.bootstrap, "txn-basic", "read_committed", len(expected_committed) + 1)

    # A second producer with the same id fences the first (Kafka: INVALID_PRODUCER_EPOCH / fenced).
    zombie, fresh = producer, Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "basic"})
    fresh.init_transactions(60)
    zombie.begin_transaction()
    zombie.produce("txn-basic", value=b"zombie", partition=1)
    with pytest.raises(Exception) as raised:
        zombie.commit_transaction(30)
    assert raised.value.args[0].fatal() or "fenced" in str(raised.value).lower()
    fresh.begin_transaction()
    fresh.produce("txn-basic", value=b"fresh", partition=1)
    fresh.commit_transaction(30)
    final = read_all(cluster.bootstrap, "txn-basic", "read_committed", len(expected_committed) + 2)
    assert b"fresh" in final and b"zombie" not in final


def committed_offsets(bootstrap: str, group: str, topic: str) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return [tp.offset for tp in consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], 30)]
    finally:
        consumer.close()


def test_kafka_python_and_aiokafka_transactions_commit_offsets_and_abort(cluster):
    """Each client reads the input, writes it transformed and commits the group's offsets in
    one transaction, then aborts a second one; read_committed sees the first only."""
    import asyncio

    from aiokafka import AIOKafkaProducer
    from aiokafka.structs import TopicPartition as AioTopicPartition
    from kafka import KafkaProducer
    from kafka.structs import OffsetAndMetadata, TopicPartition as KpTopicPartition
    cluster.create("multi-in")
    cluster.create("multi-out")
    seed = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
    for i in range(30):
        seed.send("multi-in", b"%02d" % i, partition=i % PARTITIONS)
    seed.flush()
    seed.close()
    inputs = read_all(cluster.bootstrap, "multi-in", "read_committed", 30)
    ends = [10, 10, 10]

    kp = KafkaProducer(bootstrap_servers=cluster.bootstrap, transactional_id="kafka-python")
    kp.init_transactions()
    kp.begin_transaction()
    for value in inputs:
        kp.send("multi-out", b"kp-" + value, partition=int(value) % PARTITIONS)
    kp.send_offsets_to_transaction({KpTopicPartition("multi-in", p): OffsetAndMetadata(ends[p], "", -1)
                                    for p in range(PARTITIONS)}, "kp-group")
    kp.commit_transaction()
    kp.begin_transaction()
    kp.send("multi-out", b"kp-aborted", partition=0)
    kp.flush()
    kp.abort_transaction()
    kp.close()

    async def aiokafka_pipeline():
        producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap, transactional_id="aiokafka")
        await producer.start()
        try:
            async with producer.transaction():
                for value in inputs:
                    await producer.send("multi-out", b"ap-" + value, partition=int(value) % PARTITIONS)
                await producer.send_offsets_to_transaction(
                    {AioTopicPartition("multi-in", p): ends[p] for p in range(PARTITIONS)}, "ap-group")
            await producer.begin_transaction()
            await producer.send_and_wait("multi-out", b"ap-aborted", partition=1)
            await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(aiokafka_pipeline())
    out = read_all(cluster.bootstrap, "multi-out", "read_committed", 60)
    assert sorted(out) == sorted([b"kp-" + v for v in inputs] + [b"ap-" + v for v in inputs])
    uncommitted = read_all(cluster.bootstrap, "multi-out", "read_uncommitted", 62)
    assert b"kp-aborted" in uncommitted and b"ap-aborted" in uncommitted
    assert committed_offsets(cluster.bootstrap, "kp-group", "multi-in") == ends
    assert committed_offsets(cluster.bootstrap, "ap-group", "multi-in") == ends


def test_our_transactional_producer_and_read_committed_consumer(cluster):
    """raftkafka.client: a transaction over 3 partitions with a group's offsets commits, one
    aborts after its records were acknowledged, and one is left open; our read_committed
    consumer sees what confluent-kafka's does (the committed records only, its end offsets
    held at the open transaction's first offset), read_uncommitted sees all. A second
    producer of the same transactional id fences the first: its commit fails fatally."""
    import trio

    from raftkafka.client import Consumer, KafkaError, Producer
    from storage.env import RealEnv
    cluster.create("ours-out")
    open_tail: dict = {}

    async def scenario():
        env = RealEnv()
        async with Producer(env, cluster.bootstrap, transactional_id="ours") as producer:
            await producer.init_transactions()
            producer.begin_transaction()
            for i in range(9):
                await producer.send("ours-out", b"committed-%d" % i, partition=i % PARTITIONS)
            await producer.send_offsets_to_transaction({("ours-out", 0): 7}, "ours-group")
            await producer.commit_transaction()
            producer.begin_transaction()
            for i in range(3):
                await producer.send_and_wait("ours-out", b"aborted-%d" % i, partition=i % PARTITIONS)
            await producer.send_offsets_to_transaction({("ours-out", 0): 99}, "ours-group")
            await producer.abort_transaction()
            producer.begin_transaction()
            for i in range(3):
                await producer.send("ours-out", b"committed-late-%d" % i, partition=i % PARTITIONS)
            await producer.commit_transaction()
            producer.begin_transaction()
            metadata = await producer.send_and_wait("ours-out", b"open", partition=2)
            open_tail["offset"] = metadata.offset
            ours = await read_ours(env, "read_committed", 12)
            open_tail["end"] = (await _end_offsets(env, "read_committed"))[("ours-out", 2)]
            theirs = read_all(cluster.bootstrap, "ours-out", "read_committed", 12)
            assert sorted(ours) == sorted(theirs) == sorted(
                [b"committed-%d" % i for i in range(9)] + [b"committed-late-%d" % i for i in range(3)])
            uncommitted = await read_ours(env, "read_uncommitted", 16)
            assert sorted(uncommitted) == sorted(theirs + [b"aborted-%d" % i for i in range(3)] + [b"open"])
            async with Producer(env, cluster.bootstrap, transactional_id="ours") as zombie_killer:
                await zombie_killer.init_transactions()  # aborts the open transaction
            with pytest.raises(KafkaError) as fenced:
                await producer.commit_transaction()
            assert fenced.value.code.name in ("PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH")
            with pytest.raises(KafkaError):
                producer.begin_transaction()  # fatal: stays failed

    async def read_ours(env, isolation: str, expected: int) -> list[bytes]:
        async with Consumer(env, cluster.bootstrap, isolation_level=isolation, auto_offset_reset="earliest",
                            fetch_max_wait_ms=100) as consumer:
            consumer.assign([("ours-out", p) for p in range(PARTITIONS)])
            got: list[bytes] = []
            with trio.move_on_after(30):
                while len(got) < expected:
                    got += [r.value for r in await consumer.poll(0.5)]
                got += [r.value for r in await consumer.poll(1.0)]  # nothing more comes
            return got

    async def _end_offsets(env, isolation: str) -> dict:
        async with Consumer(env, cluster.bootstrap, isolation_level=isolation) as consumer:
            return await consumer.end_offsets([("ours-out", p) for p in range(PARTITIONS)])

    trio.run(scenario)
    assert open_tail["end"] == open_tail["offset"]  # the last stable offset stops at the open transaction
    assert committed_offsets(cluster.bootstrap, "ours-group", "ours-out")[0] == 7


def test_the_cleaner_removes_aborted_records_and_never_lets_them_displace_committed_ones(cluster):
    """A compacted topic: a committed transaction writes k1, k2; an aborted one writes them
    again (records acknowledged, then aborted); plain writes roll segments. The cleaner removes
    the aborted records (read_uncommitted no longer sees them) while read_committed still
    reads the committed values, which the aborted ones never displaced."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewTopic
    topic = "txn-compacted"
    config = {"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
              "delete.retention.ms": "1000"}
    cluster.admin.create_topics([NewTopic(topic, 1, 3, config=config)])[topic].result(30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "compacted"})
    producer.init_transactions(30)
    for values, commit in (((b"committed-1", b"committed-2"), True), ((b"aborted-1", b"aborted-2"), False)):
        producer.begin_transaction()
        for key, value in zip((b"k1", b"k2"), values):
            producer.produce(topic, key=key, value=value, partition=0)
        assert producer.flush(30) == 0
        producer.commit_transaction(30) if commit else producer.abort_transaction(30)
    plain = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    uncommitted = []
    deadline = time.monotonic() + 60
    for i in range(1000):  # each write may roll the active segment (segment.ms), so the cleaner can take it
        plain.produce(topic, key=b"plain-%d" % i, value=b"plain", partition=0)
        assert plain.flush(30) == 0
        time.sleep(0.2)
        if i % 10 == 9:
            uncommitted = [v for v in read_one(cluster.bootstrap, topic, "read_uncommitted") if v != b"plain"]
            if not any(v.startswith(b"aborted") for v in uncommitted) or time.monotonic() > deadline:
                break
    assert sorted(uncommitted) == [b"committed-1", b"committed-2"], "the cleaner did not remove the aborted records"
    committed = [v for v in read_one(cluster.bootstrap, topic, "read_committed") if v != b"plain"]
    assert sorted(committed) == [b"committed-1", b"committed-2"]


def read_one(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    """Partition 0 of `topic` from the beginning to its end."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"one-{isolation}-{time.monotonic()}",
                         "isolation.level": isolation, "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got: list[bytes] = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        if msg.error() is None:
            got.append(msg.value())
        elif msg.error().code() == msg.error()._PARTITION_EOF:
            break
    consumer.close()
    return got


def consume_transform_produce_under_kills(cluster, pipeline_class, name: str, total: int) -> None:
    """`total` input records go through `pipeline_class` (tests/e2e/transactional_pipelines.py)
    in transactions of at most 40, each committing the consumer's positions with
    send_offsets_to_transaction. After the second transaction a partition leader that is not
    the coordinator dies (SIGKILL) with records of an open transaction on it and starts
    again: the producer carries on, or aborts and rewinds. After the third, the pipeline
    dies with a transaction open and with it the coordinator's node: a new incarnation
    re-inits on the new coordinator, which fences the old producer and aborts the
    transaction it loaded as Ongoing; the node then starts again. Errors on the way abort
    (or re-init when the producer is fenced) and rewind to the group's committed offsets.
    The read_committed output holds every input record exactly once, and the group's
    offsets are at the input's end."""
    from confluent_kafka import Producer
    source, sink, txn_id = f"{name}-in", f"{name}-out", f"{name}-pipeline"
    cluster.create(source)
    cluster.create(sink)
    seed = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(total):
        seed.produce(source, value=b"in-%04d" % i, partition=i % PARTITIONS)
    assert seed.flush(30) == 0

    pipeline = pipeline_class(cluster.bootstrap, source, txn_id, name)

    def done() -> bool:
        committed, ends = pipeline.committed_and_ends()
        return committed == ends

    def transform(records):
        return [(partition, b"out-" + value[3:]) for partition, value in records]

    def kill(node_id: int) -> None:
        """SIGKILL; `dev` or this test (for a node it restarted) is the parent that reaps it."""
        pid = cluster.pids[node_id]
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: not pid_alive(pid), 30, f"node {node_id} (pid {pid}) gone")

    pipeline.new_producer()
    pipeline.rewind()
    killed = leader_killed = None
    transactions = reinits = 0
    deadline = time.monotonic() + 150
    try:
        while time.monotonic() < deadline:
            records = pipeline.poll()
            if not records:
                if done():
                    break
                continue
            if leader_killed is None and transactions == 2:
                leader_killed = cluster.kill_a_leader_except(sink, cluster.coordinator_of(txn_id))
                pipeline.begin()
                pipeline.produce(sink, transform(records))
                pipeline.flush(1)
                kill(leader_killed)
                cluster.restart(leader_killed)
                try:
                    pipeline.commit_with_offsets(60)
                    transactions += 1
                except pipeline.errors as exc:
                    reinits += pipeline.recover(exc)
                    pipeline.rewind()
                continue
            if killed is None and transactions == 3:
                pipeline.begin()
                pipeline.produce(sink, transform(records))
                assert pipeline.flush(30)
                killed = cluster.coordinator_of(txn_id)
                kill(killed)
                if pipeline.reinit_after_coordinator_moved:
                    wait_until(lambda: cluster.coordinator_of(txn_id) != killed, 30, "the coordinator moved")
                pipeline.new_producer()
                reinits += 1
                wait_until(lambda: cluster.coordinator_of(txn_id) != killed, 10, "metadata naming the new coordinator")
                pipeline.rewind()
                cluster.restart(killed)
                continue
            try:
                pipeline.begin()
                pipeline.produce(sink, transform(records))
                pipeline.commit_with_offsets(30)
                transactions += 1
            except pipeline.errors as exc:
                reinits += pipeline.recover(exc)
                pipeline.rewind()
        assert leader_killed is not None and killed is not None and leader_killed != killed
        assert done(), f"pipeline did not finish ({transactions} transactions, {reinits} re-inits)"
    finally:
        pipeline.close()
        for node_id, pid in list(cluster.pids.items()):
            if not pid_alive(pid):  # a failure above left it down: the next test needs 3 nodes
                cluster.restart(node_id)
    out = read_all(cluster.bootstrap, sink, "read_committed", total, timeout=60)
    assert len(out) == total and sorted(out) == [b"out-%04d" % i for i in range(total)]
    assert committed_offsets(cluster.bootstrap, name, source) == [len(range(p, total, PARTITIONS))
                                                                  for p in range(PARTITIONS)]


# The kill tests come last: they restart the nodes they kill, but leave leaderships moved.
def test_confluent_kafka_consume_transform_produce_survives_kills_of_a_partition_leader_and_the_coordinator(cluster):
    consume_transform_produce_under_kills(cluster, ConfluentPipeline, "eos", 600)


def test_kafka_python_consume_transform_produce_survives_kills_of_a_partition_leader_and_the_coordinator(cluster):
    consume_transform_produce_under_kills(cluster, KafkaPythonPipeline, "eos-kp", 240)


def test_aiokafka_consume_transform_produce_survives_kills_of_a_partition_leader_and_the_coordinator(cluster):
    consume_transform_produce_under_kills(cluster, AiokafkaPipeline, "eos-ap", 240)
