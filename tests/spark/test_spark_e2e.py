"""The raftkafka data source in a real local[2] SparkSession against a real 3-node cluster
(`python -m raftkafka dev`, RF=3 topics; see conftest.py)."""
from __future__ import annotations

import json
import time

import pytest

from tests.spark.conftest import SPARK_AVAILABLE
from tests.spark.helpers import consume_all, create_topic, produce

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(not SPARK_AVAILABLE, reason="pyspark/pyarrow not installed")]


def src(spark, cluster, **options):
    reader = spark.read.format("raftkafka").option("kafka.bootstrap.servers", cluster.bootstrap_servers)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def rows_of(df):
    return sorted((r.partition, r.offset, r.key, r.value) for r in df.collect())


def test_batch_read_equals_what_was_produced_auto_discovered(spark, cluster):
    create_topic(cluster.bootstrap_servers, "sp-batch", 3)
    msgs = [(i % 3, None if i % 5 == 0 else b"k%d" % i, b"v%d" % i) for i in range(90)]
    produce(cluster.bootstrap_servers, "sp-batch", msgs)
    df = src(spark, cluster, subscribe="sp-batch")  # format("raftkafka") with no register(): auto-discovery
    assert [f.name for f in df.schema.fields] == ["key", "value", "topic", "partition", "offset", "timestamp",
                                                  "timestampType"]
    got = df.collect()
    assert len(got) == 90 and {r.topic for r in got} == {"sp-batch"} and {r.timestampType for r in got} == {0}
    expected = {}
    for p, k, v in msgs:
        expected.setdefault(p, []).append((k, v))
    per_partition = {}
    for r in sorted(got, key=lambda r: (r.partition, r.offset)):
        per_partition.setdefault(r.partition, []).append((r.key, r.value))
    assert per_partition == expected
    assert src(spark, cluster, subscribe="sp-batch", minPartitions="7").rdd.getNumPartitions() >= 6
    # The three small ranges are read by one task (minRecordsPerPartition); 0 plans one task per
    # partition, as Spark's Kafka source does. The rows are the same either way.
    assert df.rdd.getNumPartitions() == 1
    unpacked = src(spark, cluster, subscribe="sp-batch", minRecordsPerPartition="0")
    assert unpacked.rdd.getNumPartitions() == 3 and rows_of(unpacked) == rows_of(df)
    assert src(spark, cluster, subscribePattern="sp-ba.*").count() == 90


def test_batch_offsets_timestamps_headers_and_bad_options(spark, cluster):
    create_topic(cluster.bootstrap_servers, "sp-range", 2)
    base = int(time.time() * 1000) - 100_000
    for i in range(10):
        produce(cluster.bootstrap_servers, "sp-range", [(0, None, b"a%d" % i, [("h", b"%d" % i)]),
                                                          (1, None, b"b%d" % i)], timestamp=base + i * 1000)
    df = src(spark, cluster, subscribe="sp-range", startingOffsets='{"sp-range":{"0":3,"1":-2}}',
             endingOffsets='{"sp-range":{"0":5,"1":-1}}')
    assert [(p, o) for p, o, _, _ in rows_of(df)] == [(0, 3), (0, 4)] + [(1, i) for i in range(10)]
    df = src(spark, cluster, subscribe="sp-range", startingTimestamp=str(base + 7500))
    assert [(p, o) for p, o, _, _ in rows_of(df)] == [(0, 8), (0, 9), (1, 8), (1, 9)]
    df = src(spark, cluster, subscribe="sp-range", endingOffsetsByTimestamp=json.dumps({"sp-range": {"0": base + 2000}}))
    assert [(p, o) for p, o, _, _ in rows_of(df) if p == 0] == [(0, 0), (0, 1)]
    with_headers = src(spark, cluster, assign='{"sp-range":[0]}', includeHeaders="true").orderBy("offset").collect()
    assert [(h.key, bytes(h.value)) for h in with_headers[4].headers] == [("h", b"4")]
    ts = src(spark, cluster, assign='{"sp-range":[1]}').orderBy("offset").first().timestamp
    assert abs(ts.timestamp() * 1000 - base) < 1
    with pytest.raises(Exception, match="unknown option 'subscrib'"):
        src(spark, cluster, subscrib="x").collect()
    with pytest.raises(Exception, match="subscribe, subscribePattern, assign"):
        src(spark, cluster, subscribe="a", assign='{"a":[0]}').collect()


def _stream(spark, cluster, checkpoint, out, topic, **options):
    reader = spark.readStream.format("raftkafka").option("kafka.bootstrap.servers", cluster.bootstrap_servers)
    reader = reader.option("subscribe", topic).option("startingOffsets", "earliest")
    for k, v in options.items():
        reader = reader.option(k, v)
    query = (reader.load().selectExpr("partition", "offset", "value")
             .writeStream.format("parquet").option("path", out).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(120)
    finally:
        query.stop()
    return query


def test_streaming_checkpoint_restart_reads_exactly_the_new_records(spark, cluster, tmp_path):
    create_topic(cluster.bootstrap_servers, "sp-stream", 3)
    produce(cluster.bootstrap_servers, "sp-stream", [(i % 3, None, b"first-%d" % i) for i in range(60)])
    checkpoint, out = str(tmp_path / "cp"), str(tmp_path / "out")
    q = _stream(spark, cluster, checkpoint, out, "sp-stream", maxOffsetsPerTrigger="25")
    assert sum(p["numInputRows"] for p in q.recentProgress) == 60
    assert len([p for p in q.recentProgress if p["numInputRows"]]) >= 3  # the budget paced the batches
    produce(cluster.bootstrap_servers, "sp-stream", [(i % 3, None, b"second-%d" % i) for i in range(30)])
    q = _stream(spark, cluster, checkpoint, out, "sp-stream", maxOffsetsPerTrigger="25")
    assert sum(p["numInputRows"] for p in q.recentProgress) == 30
    rows = spark.read.parquet(out).collect()
    keys = [(r.partition, r.offset) for r in rows]
    assert len(keys) == len(set(keys)) == 90  # no duplicates
    for p in range(3):  # no gaps
        assert sorted(o for pp, o in keys if pp == p) == list(range(30))
    assert sorted(bytes(r.value) for r in rows) == sorted(
        [b"first-%d" % i for i in range(60)] + [b"second-%d" % i for i in range(30)])


def test_batch_sink_writes_what_a_kafka_client_reads(spark, cluster):
    create_topic(cluster.bootstrap_servers, "sp-sink", 2)
    df = spark.createDataFrame([(f"k{i}", f"v{i}", i % 2) for i in range(40)], "key string, value string, partition int")
    (df.write.format("raftkafka").option("kafka.bootstrap.servers", cluster.bootstrap_servers)
     .option("topic", "sp-sink").mode("append").save())
    got = consume_all(cluster.bootstrap_servers, "sp-sink", 40)
    assert sorted((p, k, v) for p, _, k, v, _ in got) == sorted((i % 2, b"k%d" % i, b"v%d" % i) for i in range(40))


def test_round_trip_topic_to_spark_to_topic_exactly_once_with_replay(spark, cluster, tmp_path):
    create_topic(cluster.bootstrap_servers, "sp-in", 2)
    create_topic(cluster.bootstrap_servers, "sp-out", 2)
    produce(cluster.bootstrap_servers, "sp-in", [(i % 2, b"k%d" % i, b"%d" % i) for i in range(50)])
    checkpoint = str(tmp_path / "cp")

    def run():
        q = (spark.readStream.format("raftkafka").option("kafka.bootstrap.servers", cluster.bootstrap_servers)
             .option("subscribe", "sp-in").option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "20")
             .load().selectExpr("key", "CAST(CAST(CAST(value AS STRING) AS INT) * 10 AS STRING) AS value")
             .writeStream.format("raftkafka").option("kafka.bootstrap.servers", cluster.bootstrap_servers)
             .option("topic", "sp-out").option("sinkId", "roundtrip").option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
        try:
            assert q.awaitTermination(120)
        finally:
            q.stop()

    run()
    # A crash after the sink committed a batch but before Spark recorded it: Spark re-runs the batch.
    commits = sorted((tmp_path / "cp" / "commits").iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1)
    last = [p for p in commits if p.name.isdigit()][-1]
    last.unlink()
    (last.parent / f".{last.name}.crc").unlink(missing_ok=True)  # Hadoop's checksum file goes with it
    produce(cluster.bootstrap_servers, "sp-in", [(i % 2, b"k%d" % i, b"%d" % i) for i in range(50, 60)])
    run()
    got = consume_all(cluster.bootstrap_servers, "sp-out", 60)
    values = sorted(int(v) for _, _, _, v, _ in got)
    assert values == [i * 10 for i in range(60)]  # every input exactly once, replayed batch included
    # keys keep Kafka's murmur2 placement, so the output is partitioned like the input
    assert all(h and h[0][0] == "raftkafka.sink" for _, _, _, _, h in got)
    # the replay really happened: the sink ledger holds two commits of the re-run batch
    from spark_source.cluster_io import scan, shared_client
    from spark_source.sink_protocol import ledger_topic
    client = shared_client(cluster.bootstrap_servers, "test", 10_000)
    tp = (ledger_topic("roundtrip"), 0)
    entries = [json.loads(r.value) for r in scan(client, tp, 0, client.list_offsets([tp], -1)[tp])]
    commits = [e["batch"] for e in entries if e["kind"] == "commit"]
    assert commits.count(int(last.name)) == 2


def test_latest_start_with_source_id_is_kept_across_restarts(spark, cluster, tmp_path):
    create_topic(cluster.bootstrap_servers, "sp-latest", 2)
    produce(cluster.bootstrap_servers, "sp-latest", [(i % 2, None, b"before-%d" % i) for i in range(10)])
    checkpoint, out = str(tmp_path / "cp"), str(tmp_path / "out")
    # The first run resolves latest (10 records in) and stores it under the sourceId; nothing new, no batch.
    q = _stream(spark, cluster, checkpoint, out, "sp-latest", startingOffsets="latest", sourceId="sp-latest-q")
    assert sum(p["numInputRows"] for p in q.recentProgress) == 0
    produce(cluster.bootstrap_servers, "sp-latest", [(i % 2, None, b"after-%d" % i) for i in range(6)])
    # The restart has no committed batch, so Spark asks for the initial offsets again: it gets the
    # stored ones (a fresh "latest" would now skip the six records).
    _stream(spark, cluster, checkpoint, out, "sp-latest", startingOffsets="latest", sourceId="sp-latest-q")
    assert sorted(bytes(r.value) for r in spark.read.parquet(out).collect()) == sorted(b"after-%d" % i
                                                                                       for i in range(6))
    # Without a sourceId the same job still runs (a Kafka-source job changes only the format name);
    # it starts at the current end, so none of the 16 records already there is read.
    q2 = _stream(spark, cluster, str(tmp_path / "cp2"), str(tmp_path / "out2"), "sp-latest",
                 startingOffsets="latest")
    assert sum(p["numInputRows"] for p in q2.recentProgress) == 0


def test_kill_9_of_a_partition_leader_between_micro_batches_loses_and_duplicates_nothing(spark, cluster,
                                                                                        tmp_path):
    topic = "sp-kill"
    create_topic(cluster.bootstrap_servers, topic, 3)
    produce(cluster.bootstrap_servers, topic, [(i % 3, None, b"%d" % i) for i in range(90)])
    victim = cluster.leader(topic, 0)
    seen, killed = [], []

    def each_batch(df, batch_id):
        seen.extend((r.partition, r.offset, bytes(r.value)) for r in df.collect())
        if batch_id == 0:  # the next micro-batches must find partition 0's new leader
            cluster.kill(victim)
            killed.append(batch_id)

    try:
        query = (spark.readStream.format("raftkafka").option("kafka.bootstrap.servers", cluster.bootstrap_servers)
                 .option("subscribe", topic).option("startingOffsets", "earliest")
                 .option("maxOffsetsPerTrigger", "30").load()
                 .writeStream.foreachBatch(each_batch).option("checkpointLocation", str(tmp_path / "cp"))
                 .trigger(availableNow=True).start())
        try:
            assert query.awaitTermination(180)
        finally:
            query.stop()
        assert killed == [0] and len([p for p in query.recentProgress if p["numInputRows"]]) >= 3
        assert cluster.leader(topic, 0) not in (victim, -1)
        # records produced while the old leader is dead, read by a restart from the checkpoint
        produce(cluster.bootstrap_servers, topic, [(i % 3, None, b"%d" % i) for i in range(90, 120)])
        query = (spark.readStream.format("raftkafka").option("kafka.bootstrap.servers", cluster.bootstrap_servers)
                 .option("subscribe", topic).option("startingOffsets", "earliest").load()
                 .writeStream.foreachBatch(each_batch).option("checkpointLocation", str(tmp_path / "cp"))
                 .trigger(availableNow=True).start())
        try:
            assert query.awaitTermination(180)
        finally:
            query.stop()
    finally:
        cluster.restart(victim)
    keys = [(p, o) for p, o, _ in seen]
    assert len(keys) == len(set(keys)) == 120  # no duplicates
    for p in range(3):  # no gaps
        assert sorted(o for pp, o in keys if pp == p) == list(range(40))
    assert sorted(int(v) for _, _, v in seen) == list(range(120))


def test_sink_stays_exactly_once_while_an_output_partition_leader_is_killed(spark, cluster, tmp_path):
    from pyspark.sql.streaming import StreamingQueryListener

    create_topic(cluster.bootstrap_servers, "sp-kin", 3)
    create_topic(cluster.bootstrap_servers, "sp-kout", 3)
    produce(cluster.bootstrap_servers, "sp-kin", [(i % 3, b"k%d" % i, b"%d" % i) for i in range(90)])
    victim = cluster.leader("sp-kout", 0)
    killed = []

    class KillAfterFirstBatch(StreamingQueryListener):
        def onQueryStarted(self, event):
            pass

        def onQueryProgress(self, event):
            if event.progress.numInputRows and not killed:
                cluster.kill(victim)  # the next batches' writes meet a leader change
                killed.append(event.progress.batchId)

        def onQueryIdle(self, event):
            pass

        def onQueryTerminated(self, event):
            pass

    listener = KillAfterFirstBatch()
    spark.streams.addListener(listener)
    try:
        q = (spark.readStream.format("raftkafka").option("kafka.bootstrap.servers", cluster.bootstrap_servers)
             .option("subscribe", "sp-kin").option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "20")
             .load().selectExpr("key", "value", "partition")
             .writeStream.format("raftkafka").option("kafka.bootstrap.servers", cluster.bootstrap_servers)
             .option("topic", "sp-kout").option("sinkId", "kill-sink")
             .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start())
        try:
            assert q.awaitTermination(180)
        finally:
            q.stop()
        assert killed and len([p for p in q.recentProgress if p["numInputRows"]]) >= 4
    finally:
        spark.streams.removeListener(listener)
        if killed:
            cluster.restart(victim)
    got = consume_all(cluster.bootstrap_servers, "sp-kout", 90)
    assert sorted(int(v) for _, _, _, v, _ in got) == list(range(90))  # each row once
    assert all(p == int(v) % 3 for p, _, _, v, _ in got)  # in the partition the row named


def test_a_deleted_topic_fails_the_query_or_warns_per_fail_on_data_loss(spark, cluster, tmp_path):
    from raftkafka.client.blocking import BlockingAdmin
    create_topic(cluster.bootstrap_servers, "sp-gone", 2)
    produce(cluster.bootstrap_servers, "sp-gone", [(i % 2, None, b"%d" % i) for i in range(20)])
    for name in ("strict", "lenient"):
        q = _stream(spark, cluster, str(tmp_path / name / "cp"), str(tmp_path / name / "out"), "sp-gone")
        assert sum(p["numInputRows"] for p in q.recentProgress) == 20
    with BlockingAdmin(cluster.bootstrap_servers) as admin:
        assert admin.delete_topics(["sp-gone"]) == {"sp-gone": None}
        deadline = time.monotonic() + 30
        while "sp-gone" in admin.list_topics():
            assert time.monotonic() < deadline, "the topic never went away"
            time.sleep(0.1)
    with pytest.raises(Exception, match="failOnDataLoss"):
        _stream(spark, cluster, str(tmp_path / "strict" / "cp"), str(tmp_path / "strict" / "out"), "sp-gone")
    q = _stream(spark, cluster, str(tmp_path / "lenient" / "cp"), str(tmp_path / "lenient" / "out"), "sp-gone",
                failOnDataLoss="false")
    assert sum(p["numInputRows"] for p in q.recentProgress) == 0
    assert spark.read.parquet(str(tmp_path / "lenient" / "out")).count() == 20
