"""Internal RPC frames: versioned msgpack structs, incremental framing, trio helper."""
from __future__ import annotations

import enum
import os
import struct
import uuid
from dataclasses import dataclass, field

import msgpack
import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wire.errors import DecodeError, UnsupportedVersionError
from wire.rpc import Frame, FrameDecoder, Registry, RpcConnection, decode_payload, encode_frame, rpc_message

REGISTRY = Registry()


class Role(enum.IntEnum):
    FOLLOWER = 0
    LEADER = 1


@dataclass(slots=True, frozen=True)
class Voter:
    node_id: int
    directory_id: uuid.UUID


@rpc_message("Vote", version=2, registry=REGISTRY)
@dataclass(slots=True, frozen=True)
class Vote:
    epoch: int
    candidate: Voter
    last_epoch_end: tuple[int, int]
    voters: tuple[Voter, ...]
    pre_vote: bool = False  # added in v2


@rpc_message("Fetch", version=1, registry=REGISTRY)
@dataclass(slots=True, frozen=True)
class Fetch:
    replica_id: int
    records: bytes | None
    role: Role
    ratio: float
    labels: dict[str, int] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)
    note: str | None = None


VOTE = Vote(7, Voter(1, uuid.UUID(int=11)), (6, 1234), (Voter(2, uuid.UUID(int=22)), Voter(3, uuid.UUID(int=33))), True)
FETCH = Fetch(3, b"\x00batch", Role.LEADER, 0.5, {"b": 2, "a": 1}, ["x", "y"], "note")


def payload_of(*value) -> bytes:
    return msgpack.packb(list(value), use_bin_type=True)


def frame_of(payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + payload


@pytest.mark.parametrize("message", [VOTE, FETCH, Fetch(0, None, Role.FOLLOWER, 1, {}, [], None)])
def test_round_trip(message):
    decoder = FrameDecoder(registry=REGISTRY)
    decoder.feed(encode_frame(message, 99, registry=REGISTRY))
    frame = decoder.next_frame()
    assert frame == Frame(type(message).__name__, 2 if isinstance(message, Vote) else 1, 99, message)
    assert decoder.next_frame() is None and decoder.buffered == 0


def test_payload_is_a_compact_array_with_fields_in_order():
    data = encode_frame(VOTE, 5, registry=REGISTRY)
    (length,) = struct.unpack_from(">I", data)
    assert length == len(data) - 4
    assert msgpack.unpackb(data[4:]) == [
        "Vote", 2, 5,
        [7, [1, uuid.UUID(int=11).bytes], [6, 1234],
         [[2, uuid.UUID(int=22).bytes], [3, uuid.UUID(int=33).bytes]], True],
    ]


def test_map_fields_encode_deterministically():
    one = Fetch(1, None, Role.LEADER, 0.0, {"b": 2, "a": 1})
    other = Fetch(1, None, Role.LEADER, 0.0, {"a": 1, "b": 2})
    assert encode_frame(one, 1, registry=REGISTRY) == encode_frame(other, 1, registry=REGISTRY)


def test_older_version_frames_take_defaults_for_newer_fields():
    v1_body = [7, [1, uuid.UUID(int=11).bytes], [6, 1234], []]
    frame = decode_payload(payload_of("Vote", 1, 4, v1_body), registry=REGISTRY)
    assert frame.version == 1 and frame.message.pre_vote is False and frame.message.epoch == 7


def test_newer_version_is_unsupported():
    with pytest.raises(UnsupportedVersionError, match="v3 is newer than this build's v2"):
        decode_payload(payload_of("Vote", 3, 4, []), registry=REGISTRY)


BAD_PAYLOADS = {
    "not msgpack": (b"\xc1", "malformed"),
    "truncated msgpack": (payload_of("Vote", 2, 1, [1])[:-1], "malformed"),
    "trailing bytes": (payload_of("Fetch", 1, 1, [1, None, 0, 0.0]) + b"\x00", "malformed"),
    "not an array": (msgpack.packb({"type": "Vote"}), "must be an array"),
    "array of three": (payload_of("Vote", 2, 1), "must be an array"),
    "unknown type": (payload_of("Nope", 1, 1, []), "unknown rpc message type 'Nope'"),
    "type not a string": (payload_of(1, 1, 1, []), "unknown rpc message type"),
    "version zero": (payload_of("Fetch", 0, 1, [1, None, 0, 0.0]), "invalid version"),
    "version a string": (payload_of("Fetch", "1", 1, [1, None, 0, 0.0]), "invalid version"),
    "correlation id not int": (payload_of("Fetch", 1, "x", [1, None, 0, 0.0]), "correlation id"),
    "body not array": (payload_of("Fetch", 1, 1, {"replica_id": 1}), "expected Fetch array"),
    "missing field": (payload_of("Fetch", 1, 1, [1, None, 0]), "missing field 'ratio'"),
    "surplus field": (payload_of("Fetch", 1, 1, [1, None, 0, 0.0, {}, [], None, 9]), "8 fields, Fetch has 7"),
    "str for int": (payload_of("Fetch", 1, 1, ["1", None, 0, 0.0]), "Fetch v1.replica_id: expected int, got str"),
    "bool for int": (payload_of("Fetch", 1, 1, [True, None, 0, 0.0]), "replica_id: expected int, got bool"),
    "str for bytes": (payload_of("Fetch", 1, 1, [1, "text", 0, 0.0]), "records: expected bytes"),
    "unknown enum value": (payload_of("Fetch", 1, 1, [1, None, 7, 0.0]), "7 is not a valid Role"),
    "str for float": (payload_of("Fetch", 1, 1, [1, None, 0, "0.5"]), "ratio: expected float"),
    "list for map": (payload_of("Fetch", 1, 1, [1, None, 0, 0.0, []]), "labels: expected map"),
    "bad map value": (payload_of("Fetch", 1, 1, [1, None, 0, 0.0, {"a": "x"}]), r"labels\['a'\]: expected int"),
    "bad list item": (payload_of("Fetch", 1, 1, [1, None, 0, 0.0, {}, ["a", 2]]), r"tags\[1\]: expected str"),
    "short uuid": (payload_of("Vote", 2, 1, [1, [1, b"\x00" * 15], [0, 0], []]), "16-byte uuid"),
    "wrong tuple arity": (payload_of("Vote", 2, 1, [1, [1, b"\x00" * 16], [0], []]), "array of 2"),
    "nested missing field": (payload_of("Vote", 2, 1, [1, [1], [0, 0], []]), "candidate: missing field 'directory_id'"),
    "invalid utf-8": (b"\x94\xa2\xff\xfe\x01\x01\x90", "malformed"),
    "ext type": (payload_of("Fetch", 1, 1, [msgpack.ExtType(1, b"x"), None, 0, 0.0]), "expected int, got ExtType"),
}


@pytest.mark.parametrize("case", sorted(BAD_PAYLOADS))
def test_bad_payloads_raise_decode_error_naming_the_problem(case):
    payload, message = BAD_PAYLOADS[case]
    with pytest.raises(DecodeError, match=message):
        decode_payload(payload, registry=REGISTRY)


# --------------------------------------------------------------------------- #
# Registry
# --------------------------------------------------------------------------- #


def test_registry_refuses_duplicates_and_non_dataclasses():
    registry = Registry()
    rpc_message("Vote", version=1, registry=registry)(Vote)
    with pytest.raises(ValueError):
        rpc_message("Vote", version=1, registry=registry)(Fetch)
    with pytest.raises(ValueError):
        rpc_message("Other", version=1, registry=registry)(Vote)
    with pytest.raises(TypeError):
        rpc_message("Plain", version=1, registry=registry)(int)
    with pytest.raises(ValueError):
        rpc_message("Fetch", version=0, registry=registry)(Fetch)
    assert registry.names() == ["Vote"]


def test_encoding_an_unregistered_message_is_a_type_error():
    with pytest.raises(TypeError):
        encode_frame(Voter(1, uuid.UUID(int=1)), 1, registry=REGISTRY)


@dataclass
class Unsupported:
    value: set[int]


def test_unsupported_field_type_is_reported():
    registry = Registry()
    rpc_message("Unsupported", version=1, registry=registry)(Unsupported)
    with pytest.raises(TypeError, match="unsupported rpc field type"):
        encode_frame(Unsupported({1}), 1, registry=registry)


# --------------------------------------------------------------------------- #
# FrameDecoder
# --------------------------------------------------------------------------- #


def test_decoder_byte_at_a_time_and_many_frames_per_feed():
    stream = b"".join(encode_frame(m, i, registry=REGISTRY) for i, m in enumerate([VOTE, FETCH, VOTE]))
    decoder = FrameDecoder(registry=REGISTRY)
    frames = []
    for i in range(len(stream)):
        decoder.feed(stream[i : i + 1])
        frames.extend(decoder)
    assert [(f.correlation_id, f.message) for f in frames] == [(0, VOTE), (1, FETCH), (2, VOTE)]

    decoder.feed(stream)
    assert [f.correlation_id for f in decoder] == [0, 1, 2]


def test_oversized_frame_is_refused_before_its_body_arrives():
    decoder = FrameDecoder(max_frame_size=100, registry=REGISTRY)
    decoder.feed(struct.pack(">I", 101))
    with pytest.raises(DecodeError, match="exceeds the 100-byte limit"):
        decoder.next_payload()


def test_partial_frame_waits():
    data = encode_frame(FETCH, 1, registry=REGISTRY)
    decoder = FrameDecoder(registry=REGISTRY)
    decoder.feed(data[:3])
    assert decoder.next_payload() is None
    decoder.feed(data[3:-1])
    assert decoder.next_payload() is None and decoder.buffered == len(data) - 1
    decoder.feed(data[-1:])
    assert decoder.next_frame().message == FETCH


FUZZ = settings(
    max_examples=int(os.environ.get("RAFTKAFKA_FUZZ_EXAMPLES", "200")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@FUZZ
@given(st.binary(max_size=300))
def test_random_bytes_raise_only_decode_errors(data):
    decoder = FrameDecoder(max_frame_size=1000, registry=REGISTRY)
    decoder.feed(data)
    try:
        list(decoder)
    except DecodeError:
        pass


@FUZZ
@given(
    st.sampled_from([VOTE, FETCH]),
    st.lists(st.tuples(st.integers(0, 1000), st.integers(1, 255)), min_size=1, max_size=3),
)
def test_mutated_payloads_raise_only_decode_errors(message, flips):
    payload = bytearray(encode_frame(message, 1, registry=REGISTRY)[4:])
    for where, xor in flips:
        payload[where % len(payload)] ^= xor
    try:
        decode_payload(bytes(payload), registry=REGISTRY)
    except DecodeError:
        pass


# --------------------------------------------------------------------------- #
# RpcConnection over a trio stream
# --------------------------------------------------------------------------- #


async def test_connection_exchanges_frames_both_ways():
    left_stream, right_stream = trio.testing.memory_stream_pair()
    left = RpcConnection(left_stream, registry=REGISTRY)
    right = RpcConnection(right_stream, registry=REGISTRY)
    await left.send_frame(VOTE, 1)
    assert (await right.receive_frame()) == Frame("Vote", 2, 1, VOTE)
    await right.send_frame(FETCH, 1)
    assert (await left.receive_frame()).message == FETCH


async def test_concurrent_senders_never_interleave_frames():
    left_stream, right_stream = trio.testing.lockstep_stream_pair()
    left = RpcConnection(left_stream, registry=REGISTRY)
    right = RpcConnection(right_stream, registry=REGISTRY, receive_size=7)
    big = Fetch(1, bytes(50_000), Role.LEADER, 1.0)
    received = []

    async def receive_all():
        for _ in range(20):
            received.append(await right.receive_frame())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(receive_all)
        for i in range(20):
            nursery.start_soon(left.send_frame, big if i % 2 else VOTE, i)
    assert sorted(f.correlation_id for f in received) == list(range(20))
    assert all(f.message == (big if f.correlation_id % 2 else VOTE) for f in received)


async def test_clean_end_of_stream_between_frames():
    left_stream, right_stream = trio.testing.memory_stream_pair()
    left = RpcConnection(left_stream, registry=REGISTRY)
    right = RpcConnection(right_stream, registry=REGISTRY)
    await left.send_frame(FETCH, 3)
    await left.aclose()
    assert (await right.receive_frame()).correlation_id == 3
    assert await right.receive_frame() is None


async def test_end_of_stream_inside_a_frame_is_an_error():
    left_stream, right_stream = trio.testing.memory_stream_pair()
    right = RpcConnection(right_stream, registry=REGISTRY)
    await left_stream.send_all(encode_frame(FETCH, 3, registry=REGISTRY)[:-2])
    await left_stream.aclose()
    with pytest.raises(DecodeError, match="inside an rpc frame"):
        await right.receive_frame()


async def test_oversized_frame_on_a_connection():
    left_stream, right_stream = trio.testing.memory_stream_pair()
    right = RpcConnection(right_stream, registry=REGISTRY, max_frame_size=64)
    await left_stream.send_all(frame_of(payload_of("Fetch", 1, 1, [1, bytes(100), 0, 0.0])))
    with pytest.raises(DecodeError, match="exceeds"):
        await right.receive_frame()


@pytest.mark.parametrize(
    "message, problem",
    [
        (Fetch(None, None, Role.LEADER, 0.0), "Fetch.replica_id: expected int, got NoneType"),
        (Fetch(True, None, Role.LEADER, 0.0), "Fetch.replica_id: expected int, got bool"),
        (Fetch(1, "text", Role.LEADER, 0.0), "Fetch.records: expected bytes, got str"),
        (Fetch(1, None, "LEADER", 0.0), "Fetch.role: expected int, got str"),
        (Fetch(1, None, Role.LEADER, "0.5"), "Fetch.ratio: expected float, got str"),
        (Fetch(1, None, Role.LEADER, 0.0, tags=["a", 2]), r"Fetch.tags\[1\]: expected str, got int"),
        (Vote(1, (1, uuid.UUID(int=1)), (0, 0), ()), "Vote.candidate: expected Voter, got tuple"),
        (Vote(1, Voter(1, "not-a-uuid"), (0, 0), ()), "Vote.candidate.directory_id: expected UUID"),
    ],
)
def test_encoding_checks_types_at_the_sender(message, problem):
    with pytest.raises(TypeError, match=problem):
        encode_frame(message, 1, registry=REGISTRY)


def test_encoding_accepts_bytes_likes_and_int_subclasses():
    message = Fetch(Role.LEADER, memoryview(b"abc"), 1, 2)
    frame = decode_payload(encode_frame(message, 1, registry=REGISTRY)[4:], registry=REGISTRY)
    assert frame.message == Fetch(1, b"abc", Role.LEADER, 2.0)
    assert type(frame.message.replica_id) is int and type(frame.message.ratio) is float


int64s = st.integers(-(1 << 63), (1 << 63) - 1)
fetches = st.builds(
    Fetch,
    int64s,
    st.none() | st.binary(max_size=200),
    st.sampled_from(list(Role)),
    st.floats(allow_nan=False),
    st.dictionaries(st.text(max_size=10), int64s, max_size=5),
    st.lists(st.text(max_size=10), max_size=5),
    st.none() | st.text(max_size=30),
)
votes = st.builds(
    Vote,
    int64s,
    st.builds(Voter, int64s, st.uuids()),
    st.tuples(int64s, int64s),
    st.lists(st.builds(Voter, int64s, st.uuids()), max_size=5).map(tuple),
    st.booleans(),
)


@FUZZ
@given(st.lists(fetches | votes, min_size=1, max_size=5), st.integers(1, 64))
def test_random_messages_round_trip_through_any_chunking(messages, chunk):
    stream = b"".join(encode_frame(m, i, registry=REGISTRY) for i, m in enumerate(messages))
    decoder = FrameDecoder(registry=REGISTRY)
    frames = []
    for start in range(0, len(stream), chunk):
        decoder.feed(stream[start : start + chunk])
        frames.extend(decoder)
    assert [(f.correlation_id, f.message) for f in frames] == list(enumerate(messages))


def test_a_frame_of_millions_of_empty_arrays_is_refused_early():
    payload = payload_of("Fetch", 1, 7, []) [:-1] + b"\xdd" + struct.pack(">I", 2_000_000) + b"\x90" * 2_000_000
    with pytest.raises(DecodeError, match="too many arrays and maps"):
        decode_payload(payload, registry=REGISTRY)
