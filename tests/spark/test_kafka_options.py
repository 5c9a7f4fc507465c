"""A job written for Spark's `format("kafka")`, with the `kafka.*` client properties such jobs
carry, runs unchanged on `format("raftkafka")` (real local[2] SparkSession, real 3-node
cluster); and how those options are applied, warned about or refused."""
from __future__ import annotations

import logging

import pytest

from spark_source import client_properties
from spark_source.options import InvalidOptionError, parse_sink_options, parse_source_options
from tests.spark.conftest import SPARK_AVAILABLE
from tests.spark.helpers import consume_all, create_topic, produce

BOOT = {"kafka.bootstrap.servers": "127.0.0.1:9092"}

# What a format("kafka") job typically sets, source side and sink side.
SOURCE_OPTIONS = {
    "kafka.max.poll.records": "25", "kafka.fetch.max.bytes": "1048576", "kafka.max.partition.fetch.bytes": "65536",
    "kafka.fetch.min.bytes": "1", "kafka.fetch.max.wait.ms": "100", "kafka.request.timeout.ms": "20000",
    "kafka.client.id": "orders-etl", "kafka.isolation.level": "read_committed", "kafka.group.id": "orders-etl-group",
    "kafka.session.timeout.ms": "30000", "kafka.receive.buffer.bytes": "65536",
    "kafkaConsumer.pollTimeoutMs": "30000", "fetchOffset.numRetries": "5", "fetchOffset.retryIntervalMs": "50",
    "failOnDataLoss": "true",
}
SINK_OPTIONS = {
    "kafka.acks": "all", "kafka.compression.type": "gzip", "kafka.linger.ms": "10", "kafka.batch.size": "32768",
    "kafka.enable.idempotence": "true", "kafka.retries": "5", "kafka.max.in.flight.requests.per.connection": "5",
    "kafka.delivery.timeout.ms": "60000", "kafka.request.timeout.ms": "20000", "kafka.client.id": "orders-sink",
    "kafka.buffer.memory": "33554432", "kafka.max.request.size": "1048576",
}


def kafka_job(spark, fmt: str, bootstrap: str, source_topic: str, sink_topic: str) -> None:
    """Upper-case every value of one topic into another: batch read, batch write."""
    from pyspark.sql import functions as F
    reader = (spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("subscribe", source_topic)
              .option("startingOffsets", "earliest").option("endingOffsets", "latest"))
    for key, value in SOURCE_OPTIONS.items():
        reader = reader.option(key, value)
    df = reader.load().select("key", F.upper(F.col("value").cast("string")).alias("value"))
    writer = df.write.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("topic", sink_topic)
    for key, value in SINK_OPTIONS.items():
        writer = writer.option(key, value)
    writer.mode("append").save()


@pytest.mark.e2e
@pytest.mark.skipif(not SPARK_AVAILABLE, reason="pyspark/pyarrow not installed")
def test_a_format_kafka_job_with_its_client_properties_runs_on_raftkafka(spark, cluster):
    create_topic(cluster.bootstrap_servers, "sp-kopts-in", 2)
    create_topic(cluster.bootstrap_servers, "sp-kopts-out", 1)
    produce(cluster.bootstrap_servers, "sp-kopts-in", [(i % 2, b"k%d" % i, b"order-%d" % i) for i in range(120)])
    kafka_job(spark, "raftkafka", cluster.bootstrap_servers, "sp-kopts-in", "sp-kopts-out")
    got = consume_all(cluster.bootstrap_servers, "sp-kopts-out", 120)
    assert sorted((k, v) for _, _, k, v, _ in got) == sorted((b"k%d" % i, b"ORDER-%d" % i) for i in range(120))


def test_known_client_properties_are_applied_to_our_clients():
    source = parse_source_options({**BOOT, "subscribe": "t", **SOURCE_OPTIONS}, streaming=False)
    assert dict(source.tuning.consumer) == {
        "max_poll_records": 25, "fetch_max_bytes": 1048576, "max_partition_fetch_bytes": 65536, "fetch_min_bytes": 1,
        "fetch_max_wait_ms": 100, "isolation_level": "read_committed"}
    assert (source.client_id, source.request_timeout_ms) == ("orders-etl", 20000)
    assert source.tuning.group_id == "orders-etl-group"
    assert (source.tuning.offset_retries, source.tuning.offset_retry_interval_ms, source.poll_timeout_ms) == (5, 50, 30000)
    sink = parse_sink_options({**BOOT, "topic": "t", **SINK_OPTIONS})
    assert dict(sink.tuning.producer) == {
        "acks": "all", "compression": "gzip", "linger_ms": 10, "batch_size": 32768, "enable_idempotence": True,
        "max_in_flight_requests_per_connection": 5, "delivery_timeout_ms": 60000, "buffer_memory": 33554432,
        "max_request_size": 1048576}
    # groupIdPrefix names the group when kafka.group.id does not (a fresh suffix per query, as Spark's).
    prefixed = parse_source_options({**BOOT, "subscribe": "t", "groupIdPrefix": "etl"}, streaming=False)
    assert prefixed.tuning.group_id.startswith("etl-")
    assert parse_source_options({**BOOT, "subscribe": "t"}, streaming=False).tuning.group_id is None


def test_properties_without_effect_are_warned_about_once(caplog):
    client_properties._warned.discard("heartbeat.interval.ms")
    with caplog.at_level(logging.WARNING, logger="raftkafka.spark"):
        for _ in range(3):
            parse_source_options({**BOOT, "subscribe": "t", "kafka.heartbeat.interval.ms": "3000"}, streaming=False)
    warned = [r.getMessage() for r in caplog.records if "heartbeat.interval.ms" in r.getMessage()]
    assert len(warned) == 1 and "no effect" in warned[0]


@pytest.mark.parametrize("options, message", [
    ({"kafka.auto.offset.reset": "earliest"}, "'auto.offset.reset' is not supported"),
    ({"kafka.enable.auto.commit": "true"}, "'enable.auto.commit' is not supported"),
    ({"kafka.value.deserializer": "x"}, "'value.deserializer' is not supported"),
    ({"kafka.max.poll.records": "0"}, "'kafka.max.poll.records': invalid value '0'"),
    ({"kafka.isolation.level": "dirty"}, "one of read_uncommitted, read_committed"),
    ({"kafka.group.id": " "}, "'kafka.group.id' is empty"),
    ({"fetchOffset.numRetries": "-1"}, "fetchOffset.numRetries"),
    ({"kafkaConsumer.pollTimeoutMs": "soon"}, "kafkaConsumer.pollTimeoutMs"),
])
def test_source_contradictions_are_refused(options, message):
    with pytest.raises(InvalidOptionError, match=message):
        parse_source_options({**BOOT, "subscribe": "t", **options}, streaming=False)


@pytest.mark.parametrize("options, message", [
    ({"kafka.key.serializer": "x"}, "'key.serializer' is not supported"),
    ({"kafka.acks": "1", "kafka.enable.idempotence": "true"}, "idempotence needs acks=all"),
    ({"kafka.compression.type": "brotli"}, "one of none, gzip"),
])
def test_sink_contradictions_are_refused(options, message):
    with pytest.raises(InvalidOptionError, match=message):
        parse_sink_options({**BOOT, "topic": "t", **options})


def test_acks_other_than_all_turns_idempotence_off_as_kafka_does():
    sink = parse_sink_options({**BOOT, "topic": "t", "kafka.acks": "1"})
    assert dict(sink.tuning.producer) == {"acks": "1", "enable_idempotence": False}
