import dataclasses
import uuid

import msgpack
import pytest
from hypothesis import given, settings, strategies as st

from metadata.records import (
    RECORD_TYPES, Endpoint, EntityPart, NO_LEADER_CHANGE, PartitionChange, RegisterBroker,
    decode_record, encode_record,
)
from wire.errors import DecodeError, UnsupportedVersionError

int64 = st.integers(-(1 << 63), (1 << 63) - 1)
uuids = st.uuids()
ints = st.lists(st.integers(-1, 10_000), max_size=6).map(tuple)

FIELD_STRATEGIES = {
    "int": int64,
    "int | None": st.none() | int64,
    "bool": st.booleans(),
    "bool | None": st.none() | st.booleans(),
    "str": st.text(max_size=20),
    "str | None": st.none() | st.text(max_size=20),
    "bytes": st.binary(max_size=40),
    "float": st.floats(allow_nan=False),
    "uuid.UUID": uuids,
    "tuple[int, ...]": ints,
    "tuple[int, ...] | None": st.none() | ints,
    "tuple[uuid.UUID, ...]": st.lists(uuids, max_size=3).map(tuple),
    "tuple[uuid.UUID, ...] | None": st.none() | st.lists(uuids, max_size=3).map(tuple),
    "tuple[Endpoint, ...]": st.lists(st.builds(
        Endpoint, st.text(max_size=8), st.text(max_size=8), st.integers(0, 65535),
        st.integers(0, 3)), max_size=3).map(tuple),
    "tuple[EntityPart, ...]": st.lists(st.builds(
        EntityPart, st.sampled_from(["user", "client-id"]), st.none() | st.text(max_size=8)),
        max_size=2).map(tuple),
}


def record_strategy(cls):
    return st.builds(cls, **{f.name: FIELD_STRATEGIES[f.type] for f in dataclasses.fields(cls)})


any_record = st.one_of([record_strategy(c) for c in RECORD_TYPES.values()])


@settings(max_examples=400)
@given(any_record)
def test_every_record_round_trips(rec):
    assert decode_record(encode_record(rec)) == rec


@settings(max_examples=300)
@given(st.binary(max_size=64))
def test_garbage_raises_decode_error_only(data):
    try:
        decode_record(data)
    except DecodeError:
        pass


@settings(max_examples=300)
@given(any_record, st.data())
def test_mutated_fields_raise_decode_error_only(rec, data):
    body = msgpack.unpackb(encode_record(rec))
    i = data.draw(st.integers(0, len(body) - 1))
    body[i] = data.draw(st.none() | st.text(max_size=3) | int64 | st.lists(
        int64, max_size=2) | st.binary(max_size=17) | st.booleans())
    try:
        decode_record(msgpack.packb(body))
    except DecodeError:
        pass


def test_newer_version_is_rejected_not_misread():
    body = msgpack.unpackb(encode_record(PartitionChange(0, uuid.UUID(int=1))))
    body[1] = PartitionChange.VERSION + 1
    with pytest.raises(UnsupportedVersionError, match="PartitionChange version 1"):
        decode_record(msgpack.packb(body))


def test_unknown_type_and_wrong_field_count():
    with pytest.raises(DecodeError, match="unknown type id 99"):
        decode_record(msgpack.packb([99, 0]))
    body = msgpack.unpackb(encode_record(RegisterBroker(1, uuid.UUID(int=2), 7)))
    with pytest.raises(DecodeError, match="expected 8 fields"):
        decode_record(msgpack.packb(body[:-1]))
    with pytest.raises(DecodeError):
        decode_record(b"\xc1")  # reserved msgpack byte


def test_partition_change_defaults_mean_unchanged():
    rec = decode_record(encode_record(PartitionChange(3, uuid.UUID(int=1), isr=(1, 2))))
    assert rec.leader == NO_LEADER_CHANGE and rec.replicas is None and rec.isr == (1, 2)
