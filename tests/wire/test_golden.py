"""Golden bytes from real clients (captured by tests/tools/capture_golden.py).

Every captured request must decode with our codecs and re-encode to exactly
the bytes the client sent; the live-session tests replay each client against
the recording broker, which proves the real clients accept our responses.
"""
from __future__ import annotations

import json
import pathlib
import struct

import pytest

from tests.tools.client_sessions import SESSIONS, expected_values
from tests.tools.recording_broker import RecordingBroker
from wire import batch_header
from wire.protocol import (
    API_VERSIONS, ApiKey, UnsupportedRequestError, decode_assignment, decode_request, decode_subscription,
    encode_assignment, encode_request, encode_subscription,
)

# kafka-python loads its JSON schemas through deprecated importlib.resources calls.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

GOLDEN = pathlib.Path(__file__).resolve().parent.parent / "golden"
CLIENTS = sorted(SESSIONS)


def load(client: str) -> list[dict]:
    return json.loads((GOLDEN / client / "requests.json").read_text())


def frames(client: str) -> list[bytes]:
    return [bytes.fromhex(entry["frame"]) for entry in load(client)]


@pytest.mark.parametrize("client", CLIENTS)
def test_every_captured_request_reencodes_byte_identically(client):
    checked = 0
    for frame in frames(client):
        api_key, version = struct.unpack_from(">hh", frame)
        if api_key not in API_VERSIONS or version not in range(API_VERSIONS[api_key][0], API_VERSIONS[api_key][1] + 1):
            continue
        header, body = decode_request(frame)
        again = encode_request(body, header.api_version, header.correlation_id, header.client_id,
                               unknown_tags=header.unknown_tags)
        assert again == struct.pack(">i", len(frame)) + frame, (client, api_key, version)
        checked += 1
    assert checked >= 20


@pytest.mark.parametrize("client", CLIENTS)
def test_captures_cover_the_session(client):
    seen = {(e["api_key"], e["api_version"]) for e in load(client)}
    keys = {k for k, _ in seen}
    for api in (ApiKey.API_VERSIONS, ApiKey.METADATA, ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS,
                ApiKey.FIND_COORDINATOR, ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.OFFSET_COMMIT,
                ApiKey.OFFSET_FETCH, ApiKey.CREATE_TOPICS, ApiKey.DESCRIBE_GROUPS, ApiKey.LIST_GROUPS):
        assert api in keys, (client, api.name)
    # Every codec's batch reached the broker: gzip, snappy, lz4 and zstd plus uncompressed.
    codecs = set()
    for frame in frames(client):
        if struct.unpack_from(">h", frame)[0] == ApiKey.PRODUCE:
            _, body = decode_request(frame)
            for topic in body.topic_data:
                for part in topic.partition_data:
                    for _, head in batch_header.iter_batches(part.records):
                        codecs.add(head.compression)
    assert codecs == {0, 1, 2, 3, 4}


def test_produce_records_are_zero_copy_views_of_the_frame():
    frame = next(f for f in frames("confluent") if struct.unpack_from(">h", f)[0] == ApiKey.PRODUCE)
    _, body = decode_request(frame)
    records = body.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview)
    assert records.obj is frame  # a slice of the frame itself, not a copy
    batch_header.validate_batch(records)


def test_kafka_python_apiversions_v4_takes_the_fallback_path():
    v4 = [f for f in frames("kafka_python") if struct.unpack_from(">hh", f) == (ApiKey.API_VERSIONS, 4)]
    assert v4, "kafka-python starts with ApiVersions v4"
    with pytest.raises(UnsupportedRequestError) as info:
        decode_request(v4[0])
    assert info.value.header.correlation_id == struct.unpack_from(">i", v4[0], 4)[0]
    assert info.value.header.client_id == "golden-kafka-python"


@pytest.mark.parametrize("client", CLIENTS)
def test_embedded_consumer_protocol_from_real_clients(client):
    subscriptions, assignments, topics, assigned = 0, 0, set(), set()
    for frame in frames(client):
        api_key = struct.unpack_from(">h", frame)[0]
        if api_key == ApiKey.JOIN_GROUP:
            _, body = decode_request(frame)
            for protocol in body.protocols:
                version, sub = decode_subscription(protocol.metadata)
                topics.update(sub.topics)
                assert encode_subscription(sub, version) == protocol.metadata
                subscriptions += 1
        elif api_key == ApiKey.SYNC_GROUP:
            _, body = decode_request(frame)
            for a in body.assignments:
                version, assignment = decode_assignment(a.assignment)
                assigned.update(t.topic for t in assignment.assigned_partitions)
                assert encode_assignment(assignment, version) == a.assignment
                assignments += 1
    assert subscriptions > 0 and assignments > 0
    assert topics == assigned == {"golden-topic"}  # a first, empty assignment is normal


@pytest.mark.slow
@pytest.mark.parametrize("client", CLIENTS)
def test_live_session_against_recording_broker(client):
    session, prefix = SESSIONS[client]
    with RecordingBroker() as broker:
        got = session(f"{broker.host}:{broker.port}", "live-topic", "live-group")
    assert got == expected_values(prefix)
    assert broker.errors == []
    for frame in broker.recorded:  # everything the client sent parsed (or was a known fallback)
        api_key, version = struct.unpack_from(">hh", frame)
        if (api_key, version) == (ApiKey.API_VERSIONS, 4):
            continue
        decode_request(frame)
