"""Malformed input: truncations, bad lengths and varints, random and mutated bytes.

Whatever arrives, decoding either succeeds or raises `DecodeError` (or a
subclass) — never IndexError, struct.error, UnicodeDecodeError and friends.
"""
from __future__ import annotations

import json
import pathlib
import struct

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tests.tools.protocol_strategies import message_strategy
from wire.errors import DecodeError, UnsupportedVersionError
from wire.protocol import (
    REQUESTS, RESPONSES, AlterUserScramCredentialsRequest, ApiVersionsRequest, ApiVersionsResponse, DescribeClusterResponse, FetchResponse,
    FrameReader, IncrementalAlterConfigsRequest, MalformedRequestError, MetadataRequest, ProduceRequest,
    UnsupportedRequestError, decode_assignment, decode_request, decode_response, decode_subscription,
    encode_request,
)

GOLDEN = pathlib.Path(__file__).resolve().parent.parent / "golden"
GOLDEN_FRAMES = [bytes.fromhex(e["frame"]) for client in ("aiokafka", "confluent", "kafka_python")
                 for e in json.loads((GOLDEN / client / "requests.json").read_text())]
SUPPORTED_GOLDEN = [f for f in GOLDEN_FRAMES if struct.unpack_from(">hh", f) != (18, 4)]
MESSAGES = [cls for table in (REQUESTS, RESPONSES) for cls in table.values()]
CASES = [(cls, v) for cls in MESSAGES for v in range(cls.VERSIONS.lo, cls.VERSIONS.hi + 1)]
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def decode_or_reject(frame) -> None:
    try:
        decode_request(frame)
    except DecodeError:
        pass


@pytest.mark.parametrize("frame", SUPPORTED_GOLDEN[::3], ids=lambda f: f"{f[:4].hex()}")
def test_every_truncation_of_a_real_request_is_a_decode_error(frame):
    for cut in range(len(frame)):
        with pytest.raises(DecodeError):
            decode_request(frame[:cut])


@pytest.mark.parametrize(("cls", "version"), CASES, ids=[f"{c.__name__}-v{v}" for c, v in CASES])
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_truncation_of_a_random_message_is_a_decode_error(cls, version, data):
    encoded = data.draw(message_strategy(cls, version)).encode(version)
    for cut in range(len(encoded)):
        with pytest.raises(DecodeError):
            cls.decode(encoded[:cut], version)


def test_trailing_bytes_are_rejected():
    frame = encode_request(MetadataRequest(topics=None), 4, 7, "c")[4:]
    with pytest.raises(MalformedRequestError) as info:
        decode_request(frame + b"\x00")
    assert info.value.header.correlation_id == 7


def test_librdkafkas_extra_tag_section_after_alter_user_scram_credentials_is_read_past():
    """librdkafka (its test 0081) ends AlterUserScramCredentials with a second empty tag section;
    Kafka never reads it. One such zero byte is accepted, anything more is still malformed."""
    R = AlterUserScramCredentialsRequest
    body = R(deletions=[], upsertions=[R.ScramCredentialUpsertion(
        name="u", mechanism=1, iterations=4096, salt=b"s", salted_password=b"p")])
    frame = encode_request(body, 0, 7, "c")[4:]
    assert decode_request(frame + b"\x00")[1] == body
    for extra in (b"\x00\x00", b"\x01"):
        with pytest.raises(MalformedRequestError):
            decode_request(frame + extra)


@FUZZ
@given(st.binary(max_size=200))
def test_random_bytes_only_raise_decode_error(blob):
    decode_or_reject(blob)


@FUZZ
@given(st.sampled_from(list(REQUESTS)), st.integers(0, 12), st.binary(max_size=120))
def test_random_bodies_behind_valid_headers_only_raise_decode_error(api_key, version, body):
    decode_or_reject(struct.pack(">hhih", api_key, version, 1, -1) + body)


@FUZZ
@given(st.sampled_from(SUPPORTED_GOLDEN), st.data())
def test_mutated_real_requests_only_raise_decode_error(frame, data):
    mutated = bytearray(frame)
    for _ in range(data.draw(st.integers(1, 4))):
        mutated[data.draw(st.integers(0, len(mutated) - 1))] = data.draw(st.integers(0, 255))
    decode_or_reject(bytes(mutated))


@FUZZ
@given(st.sampled_from(list(RESPONSES)), st.binary(max_size=120))
def test_random_response_bodies_only_raise_decode_error(api_key, body):
    lo, hi = RESPONSES[api_key].VERSIONS.lo, RESPONSES[api_key].VERSIONS.hi
    for version in (lo, hi):
        try:
            decode_response(b"\x00\x00\x00\x01" + body, api_key, version)
        except DecodeError:
            pass


@FUZZ
@given(st.binary(max_size=80))
def test_random_consumer_protocol_bytes_only_raise_decode_error(blob):
    for decode in (decode_subscription, decode_assignment):
        try:
            decode(blob)
        except DecodeError:
            pass


def test_unknown_api_key_and_version_are_unsupported_with_header():
    frame = struct.pack(">hhih", 999, 0, 42, 3) + b"abc"
    with pytest.raises(UnsupportedRequestError) as info:
        decode_request(frame)
    assert (info.value.api_key, info.value.header.correlation_id, info.value.header.client_id) == (999, 42, "abc")
    frame = struct.pack(">hhih", 1, 3, 43, -1)  # Fetch v3: below our range
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request(frame)
    assert info.value.version == 3
    with pytest.raises(UnsupportedVersionError):
        ProduceRequest.decode(b"", 11)  # above our range (v11 needs KIP-890 part 2)


def test_bad_varints_in_flexible_messages():
    # IncrementalAlterConfigs v1 is flexible: the resources count is a uvarint.
    head = struct.pack(">hhih", 44, 1, 5, -1) + b"\x00"
    for bad in (b"\xff\xff\xff\xff\xff\x01", b"\x80", b"\xff\xff\xff\xff\x7f"):
        with pytest.raises(DecodeError):
            decode_request(head + bad)
    ok = IncrementalAlterConfigsRequest(resources=[]).encode(1)
    assert decode_request(head + ok)[1] == IncrementalAlterConfigsRequest()


def test_nulls_where_not_nullable_and_negative_lengths():
    with pytest.raises(DecodeError, match="null"):
        ApiVersionsResponse.decode(b"\x00\x00\xff\xff\xff\xff", 0)  # null api_keys array
    with pytest.raises(DecodeError):
        ApiVersionsResponse.decode(b"\x00\x00\xff\xff\xff\xfe", 0)  # length -2
    # Metadata topics: null is legal from v1 (all topics)
    assert MetadataRequest.decode(b"\xff\xff\xff\xff", 1).topics is None
    with pytest.raises(DecodeError):
        MetadataRequest.decode(b"\x7f\xff\xff\xff", 1)  # count far beyond the frame


def test_bad_utf8_is_a_decode_error():
    with pytest.raises(DecodeError):
        decode_request(struct.pack(">hhih", 18, 0, 1, 2) + b"\xff\xfe")


def test_tagged_fields_out_of_order_or_overrunning():
    base = DescribeClusterResponse(cluster_id="c").encode(0)[:-1]  # drop the empty tag section
    with pytest.raises(DecodeError, match="order"):
        DescribeClusterResponse.decode(base + b"\x02\x05\x00\x03\x00", 0)
    with pytest.raises(DecodeError):
        DescribeClusterResponse.decode(base + b"\x01\x05\x09\x00", 0)


def test_frame_reader_handles_split_and_coalesced_input():
    frames = [encode_request(ApiVersionsRequest(), 0, i, "x") for i in range(5)]
    blob = b"".join(frames)
    reader = FrameReader()
    got = []
    for i in range(len(blob)):  # byte by byte
        reader.feed(blob[i:i + 1])
        got.extend(reader)
    assert got == [f[4:] for f in frames]
    reader.feed(blob)  # all at once
    assert list(reader) == [f[4:] for f in frames]
    assert reader.buffered == 0


@FUZZ
@given(st.lists(st.binary(max_size=300), max_size=8), st.lists(st.integers(1, 400), min_size=1, max_size=30))
def test_frame_reader_gives_back_the_frames_of_any_chunking(payloads, cuts):
    """Frames of any size, empty ones too, fed in chunks of any sizes (a frame inside one
    chunk, across many, its prefix split): the same frames come out, and nothing is left."""
    blob = b"".join(struct.pack(">i", len(p)) + p for p in payloads)
    reader = FrameReader()
    got, pos, i = [], 0, 0
    while pos < len(blob):
        step = cuts[i % len(cuts)]
        chunk = blob[pos:pos + step]
        reader.feed(chunk if i % 2 else bytearray(chunk))  # trio hands bytes; a bytearray is copied
        pos, i = pos + len(chunk), i + 1
        got.extend(reader)
        assert reader.buffered == pos - sum(4 + len(f) for f in got)  # received, not yet taken out
    assert got == payloads and reader.buffered == 0


def test_a_size_prefix_alone_counts_as_a_frame_arriving():
    """A server times a connection holding only a request's size prefix as a request arriving
    (socket.request.read.timeout), not as an idle one (broker/request_reader.py)."""
    reader = FrameReader()
    reader.feed(struct.pack(">i", 10))
    assert reader.next_frame() is None and reader.pending_size() == 10 and reader.buffered == 4
    reader.feed(b"0123456789")
    assert reader.next_frame() == b"0123456789" and reader.buffered == 0


@pytest.mark.parametrize("size", [-1, -(1 << 31), 1 << 20])
def test_frame_reader_rejects_bad_sizes(size):
    reader = FrameReader(max_frame_size=1 << 19)
    reader.feed(struct.pack(">i", size))
    with pytest.raises(DecodeError):
        reader.next_frame()


@FUZZ
@given(st.binary(max_size=64))
def test_frame_reader_never_crashes_on_garbage(blob):
    reader = FrameReader(max_frame_size=1024)
    reader.feed(blob)
    try:
        for frame in reader:
            decode_or_reject(frame)
    except DecodeError:
        pass


def test_fetch_response_records_stay_views():
    data = b"\x00" * 1000
    body = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic="t", partitions=[
        FetchResponse.PartitionData(partition_index=0, records=data)])])
    decoded = FetchResponse.decode(body.encode(11), 11)
    records = decoded.responses[0].partitions[0].records
    assert isinstance(records, memoryview) and records == data


def test_librdkafkas_all_topics_metadata_v9_plus_is_read_as_kafka_reads_it():
    """librdkafka #5049: a null topic array as a varint in a 4-byte placeholder (3 extra bytes)."""
    header = encode_request(MetadataRequest(topics=[]), 12, 3, "rdkafka")[4:][:-4]  # up to the body
    header, body = decode_request(header + bytes.fromhex("00000000010000"))
    assert (header.api_version, body.topics, body.include_topic_authorized_operations) == (12, None, False)
    with pytest.raises(MalformedRequestError):  # only Metadata, only v9+
        decode_request(encode_request(MetadataRequest(topics=None), 8, 7, "c")[4:] + b"\x00")
