"""Issue 9's acceptance check: scrape GET /metrics during a produce/consume run against a real broker.

Bytes in must equal the bytes produced, records in the records produced, bytes
out the record bytes the consumer received, and the per-API request counters
and latency histograms must count exactly the requests sent.

The counting is the broker's own (`Broker(metrics=registry)`: the server times
every request, the produce and fetch handlers count what they append and answer).
"""
from __future__ import annotations

import trio

from broker.metrics import BrokerMetrics
from metrics.registry import MetricsRegistry
from raftkafka.node.metrics_http import MetricsServer
from raftkafka.node.metrics_wiring import register_broker_gauges
from tests.broker.harness import RawClient, running_cluster
from tests.test_metrics import parse_exposition
from wire.batch_header import iter_batches
from wire.protocol import ApiKey, CreateTopicsRequest, FetchRequest, ProduceRequest
from wire.records import SimpleRecord, build_batch

TOPIC = "orders"


def _create_topic(partitions: int) -> CreateTopicsRequest:
    C = CreateTopicsRequest
    return C(topics=[C.CreatableTopic(name=TOPIC, num_partitions=partitions, replication_factor=1,
                                      assignments=[], configs=[])], timeout_ms=5000, validate_only=False)


def _produce(partition: int, records: bytes, topic: str = TOPIC) -> ProduceRequest:
    P = ProduceRequest
    return P(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[P.TopicProduceData(
        name=topic, partition_data=[P.PartitionProduceData(index=partition, records=records)])])


def _fetch(partition: int, offset: int) -> FetchRequest:
    F = FetchRequest
    return F(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0,
             session_epoch=-1, topics=[F.FetchTopic(topic=TOPIC, partitions=[F.FetchPartition(
                 partition=partition, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
                 partition_max_bytes=1 << 20)])], forgotten_topics_data=[], rack_id="")


async def _scrape(port: int) -> dict[str, dict]:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(b"GET /metrics HTTP/1.0\r\nHost: test\r\n\r\n")
        raw = bytearray()
        with trio.fail_after(10):
            while chunk := await stream.receive_some(65536):
                raw += chunk
    head, _, body = bytes(raw).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ")
    return parse_exposition(body.decode())


def _value(families, name: str, **labels) -> float:
    for sample_name, sample_labels, value in families[name]["samples"]:
        if sample_name == name and sample_labels == {k: str(v) for k, v in labels.items()}:
            return value
    raise KeyError(f"{name}{labels} not exported")


def _latency_count(families, api: str) -> float:
    name = "raftkafka_request_latency_seconds"
    return _value({name + "_count": {"samples": families[name]["samples"]}}, name + "_count", api=api)


async def test_scraped_counters_match_what_was_produced_and_consumed():
    registry = MetricsRegistry()
    async with running_cluster(1) as cluster:
        broker = cluster.brokers[0]
        broker.metrics = BrokerMetrics(registry)  # the harness built it; count into our registry
        register_broker_gauges(registry, broker)
        async with trio.open_nursery() as nursery:
            metrics_port = await nursery.start(MetricsServer(broker.env, registry).serve, "127.0.0.1", 0)
            client = await RawClient.connect(broker.port)
            created = await client.call(_create_topic(2), 4)
            assert created.topics[0].error_code == 0

            before = await _scrape(metrics_port)  # mid-run scrape: nothing produced yet
            assert "raftkafka_broker_topic_bytes_in_total" not in before or not _samples(before)
            assert _value(before, "raftkafka_leader_partitions") == 2
            assert _value(before, "raftkafka_uncleanable_partitions") == 0

            produced_bytes = produced_records = produce_calls = 0
            for i in range(12):
                batch = build_batch([SimpleRecord(b"k%d" % j, b"v" * (10 + i * 7 + j)) for j in range(1 + i % 4)])
                resp = await client.call(_produce(i % 2, batch), 8)
                assert resp.responses[0].partition_responses[0].error_code == 0
                produced_bytes += len(batch)
                produced_records += 1 + i % 4
                produce_calls += 1
            # A corrupt batch is a failed produce and adds no bytes; a produce to a partition
            # that does not exist adds no series at all.
            corrupt = bytearray(build_batch([SimpleRecord(b"x", b"y" * 20)]))
            corrupt[-3] ^= 0xFF
            bad = await client.call(_produce(0, bytes(corrupt)), 8)
            assert bad.responses[0].partition_responses[0].error_code != 0
            missing = await client.call(_produce(0, build_batch([SimpleRecord(b"x", b"y")]), "nope"), 8)
            assert missing.responses[0].partition_responses[0].error_code != 0
            produce_calls += 2

            mid = await _scrape(metrics_port)
            assert _value(mid, "raftkafka_broker_topic_bytes_in_total", topic=TOPIC) == produced_bytes
            assert _value(mid, "raftkafka_broker_topic_messages_in_total", topic=TOPIC) == produced_records
            assert _value(mid, "raftkafka_broker_topic_failed_produce_requests_total", topic=TOPIC) == 1
            assert not [s for fam in mid.values() for s in fam["samples"] if s[1].get("topic") == "nope"]
            assert _value(mid, "raftkafka_request_total", api="Produce") == produce_calls
            assert _latency_count(mid, "Produce") == produce_calls
            # Each error_code field of an answer counts once, NONE included (Kafka's ErrorsPerSec).
            assert _value(mid, "raftkafka_request_errors_total", api="Produce", error="NONE") == 12
            assert _value(mid, "raftkafka_request_errors_total", api="Produce", error="CORRUPT_MESSAGE") == 1
            assert _value(mid, "raftkafka_request_errors_total", api="Produce",
                          error="UNKNOWN_TOPIC_OR_PARTITION") == 1

            consumed_bytes = consumed_records = fetch_calls = 0
            for partition in (0, 1):
                offset = 0
                while True:
                    resp = await client.call(_fetch(partition, offset), 11)
                    fetch_calls += 1
                    data = bytes(resp.responses[0].partitions[0].records)
                    if not data:
                        break
                    consumed_bytes += len(data)
                    for _, h in iter_batches(data):
                        consumed_records += h.last_offset_delta + 1
                        offset = h.next_offset

            after = await _scrape(metrics_port)
            assert consumed_records == produced_records and consumed_bytes == produced_bytes
            assert _value(after, "raftkafka_broker_topic_bytes_out_total", topic=TOPIC) == consumed_bytes
            assert _value(after, "raftkafka_broker_topic_bytes_in_total", topic=TOPIC) == produced_bytes
            assert _value(after, "raftkafka_request_total", api="Fetch") == fetch_calls
            assert _latency_count(after, "Fetch") == fetch_calls
            assert _value(after, "raftkafka_request_total", api="CreateTopics") == 1
            # a Fetch answer carries its own error code and one per partition
            assert _value(after, "raftkafka_request_errors_total", api="Fetch", error="NONE") == 2 * fetch_calls
            assert _value(after, "raftkafka_request_errors_total", api="CreateTopics", error="NONE") == 1
            assert _value(after, "raftkafka_under_replicated_partitions") == 0
            assert _value(after, "raftkafka_partitions") == 2
            assert _value(after, "raftkafka_broker_connections") == 1
            nursery.cancel_scope.cancel()


def _samples(families) -> list:
    return families["raftkafka_broker_topic_bytes_in_total"]["samples"]
