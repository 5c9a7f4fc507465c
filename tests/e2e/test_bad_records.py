"""Issue 16, cases 3 and 7 against a real node: what a client must not write is refused with
Kafka's error codes, and the node goes on serving real clients.

- a batch with a correct CRC around garbage records: INVALID_RECORD (it used to be appended and
  stall consumers and the cleaner);
- null keys on a compacted topic from confluent-kafka: INVALID_RECORD;
- a produce to __consumer_offsets: INVALID_TOPIC_EXCEPTION (it used to be appended, and the next
  coordinator could not load the partition).
"""
from __future__ import annotations

import socket
import struct
import time

import pytest

from tests.e2e.procs import HOST, free_base_port
from tests.e2e.test_single_node import consume_all, produce
from tests.wire.raw_batches import batch_around, raw_record
from wire.error_codes import ErrorCode
from wire.protocol import ProduceRequest, decode_response, encode_request
from wire.records import SimpleRecord, build_batch

pytestmark = pytest.mark.e2e


def raw_produce(port: int, topic: str, records: bytes):
    """One Produce v8 (acks=1) on a fresh connection; the partition's answer."""
    request = ProduceRequest(transactional_id=None, acks=1, timeout_ms=10_000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=records)])])
    with socket.create_connection((HOST, port), timeout=20) as sock:
        sock.sendall(encode_request(request, 8, 7, "e2e-raw"))
        size = struct.unpack(">i", _read(sock, 4))[0]
        _, response = decode_response(_read(sock, size), 0, 8)
    return response.responses[0].partition_responses[0]


def _read(sock, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, "connection closed"
        data += chunk
    return data


def test_bad_records_are_refused_and_real_clients_carry_on(processes, tmp_path):
    from confluent_kafka import KafkaError, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    base = free_base_port()
    bootstrap = f"localhost:{base}"
    node = processes.start("--base-port", str(base), cwd=str(tmp_path))
    node.wait_line(r"serving Kafka clients", 60)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic("plain", 1), NewTopic(
            "keyed", 1, config={"cleanup.policy": "compact"})]).values():
        future.result(30)
    now = int(time.time() * 1000)

    garbage = batch_around(b"\x07" * 40, count=3, base_timestamp=now)
    answer = raw_produce(base, "plain", garbage)
    assert answer.error_code == ErrorCode.INVALID_RECORD and "plain-0" in answer.error_message
    gap = batch_around(raw_record(offset_delta=0) + raw_record(offset_delta=5), count=2, base_timestamp=now)
    assert raw_produce(base, "plain", gap).error_code == ErrorCode.INVALID_RECORD

    null_keys = build_batch([SimpleRecord(b"a", b"1", timestamp=now), SimpleRecord(None, b"2", timestamp=now)])
    answer = raw_produce(base, "keyed", null_keys)
    assert answer.error_code == ErrorCode.INVALID_RECORD and [e.batch_index for e in answer.record_errors] == [1]

    offsets_commit = build_batch([SimpleRecord(b"\xff\xffjunk", b"hello", timestamp=now)])
    answer = raw_produce(base, "__consumer_offsets", offsets_commit)
    assert answer.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    outcomes = []
    for key, value in ((None, b"no key"), (b"k", b"with key")):  # one batch each: a refusal fails its batch
        producer.produce("keyed", key=key, value=value, on_delivery=lambda err, msg: outcomes.append(err))
        assert producer.flush(30) == 0
    assert outcomes[0] is not None and outcomes[0].code() == KafkaError.INVALID_RECORD
    assert outcomes[1] is None

    produce(bootstrap, "plain", 50, b"after")
    assert consume_all(bootstrap, "plain", 50) == [(i, b"k%d" % i, b"after-%d" % i) for i in range(50)]
    assert [value for _, _, value in consume_all(bootstrap, "keyed", 1)] == [b"with key"]
    assert node.popen.poll() is None  # still running
