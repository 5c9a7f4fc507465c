"""`__consumer_offsets` record bytes (golden, from Kafka's layouts) and the group -> partition hash."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings, strategies as st

from broker.groups import java_string_hash, partition_for_group
from broker.groups.records import (
    GroupMetadataValue, GroupRecordKey, OffsetCommitValue, OffsetRecordKey, decode_group_value, decode_key,
    decode_offset_value, group_metadata_record, offset_commit_record,
)
from wire.errors import DecodeError

# (string, Java's String.hashCode(), abs(hash) % 50) — printed by a JVM (java.lang.String).
JAVA_VECTORS = [
    ("", 0, 0),
    ("a", 97, 47),
    ("hello", 99162322, 22),
    ("polygenelubricants", -2147483648, 0),  # Integer.MIN_VALUE: Kafka's Utils.abs maps it to 0
    ("console-consumer-12345", 158455506, 6),
    ("my-group", -1906497762, 12),
    ("\u00e9t\u00e9", 227742, 42),
    ("\U0001F600 grp", 927973544, 44),  # outside the BMP: hashed as two UTF-16 surrogates
    ("Aa", 2112, 12),
    ("BB", 2112, 12),
    ("connect-cluster", 1440343063, 13),
    ("spark-kafka-source-9f8e", -1257728363, 13),
]


@pytest.mark.parametrize("text,hash_code,partition", JAVA_VECTORS)
def test_java_string_hash_and_partition(text, hash_code, partition):
    assert java_string_hash(text) == hash_code
    assert partition_for_group(text, 50) == partition


def test_partition_count_must_be_positive():
    with pytest.raises(ValueError):
        partition_for_group("g", 0)


def s(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


def test_offset_commit_golden_bytes():
    key, value = offset_commit_record("grp", "tp", 7, OffsetCommitValue(
        offset=42, leader_epoch=5, metadata="m", commit_timestamp=1_700_000_000_000))
    assert key == b"\x00\x01" + s("grp") + s("tp") + struct.pack(">i", 7)  # OffsetCommitKey v1
    assert value == (b"\x00\x03" + struct.pack(">qi", 42, 5) + s("m")  # OffsetCommitValue v3
                     + struct.pack(">q", 1_700_000_000_000))
    # An explicit retention (OffsetCommit v2-4) needs the v1 value, which has expireTimestamp.
    _, v1 = offset_commit_record("grp", "tp", 7, OffsetCommitValue(
        offset=42, metadata="", commit_timestamp=10, expire_timestamp=99))
    assert v1 == b"\x00\x01" + struct.pack(">q", 42) + s("") + struct.pack(">qq", 10, 99)
    assert offset_commit_record("grp", "tp", 7, None) == (key, None)


def test_group_metadata_golden_bytes():
    member = GroupMetadataValue.MemberMetadata(
        member_id="m-1", group_instance_id=None, client_id="c", client_host="/h",
        rebalance_timeout=300, session_timeout=45, subscription=b"S", assignment=b"AB")
    key, value = group_metadata_record("grp", GroupMetadataValue(
        protocol_type="consumer", generation=3, protocol="range", leader="m-1",
        current_state_timestamp=77, members=[member]))
    assert key == b"\x00\x02" + s("grp")
    assert value == (b"\x00\x03" + s("consumer") + struct.pack(">i", 3) + s("range") + s("m-1")
                     + struct.pack(">q", 77) + struct.pack(">i", 1)
                     + s("m-1") + b"\xff\xff" + s("c") + s("/h") + struct.pack(">ii", 300, 45)
                     + struct.pack(">i", 1) + b"S" + struct.pack(">i", 2) + b"AB")
    assert decode_group_value(value).members[0].assignment == b"AB"
    # An empty group has null protocol and leader.
    _, empty = group_metadata_record("grp", GroupMetadataValue(protocol_type="consumer", generation=4,
                                                               current_state_timestamp=1))
    assert empty == b"\x00\x03" + s("consumer") + struct.pack(">i", 4) + b"\xff\xff\xff\xff" \
        + struct.pack(">q", 1) + struct.pack(">i", 0)


def test_decodes_every_value_version():
    v0 = b"\x00\x00" + struct.pack(">q", 9) + s("meta") + struct.pack(">q", 5)
    assert (decode_offset_value(v0).offset, decode_offset_value(v0).leader_epoch) == (9, -1)
    # v4 is flexible: compact string (length + 1) and an empty tagged-field section.
    v4 = b"\x00\x04" + struct.pack(">qi", 9, 2) + b"\x05meta" + struct.pack(">q", 5) + b"\x00"
    got = decode_offset_value(v4)
    assert (got.offset, got.leader_epoch, got.metadata, got.commit_timestamp) == (9, 2, "meta", 5)
    g0 = b"\x00\x00" + s("consumer") + struct.pack(">i", 1) + s("rr") + s("m") + struct.pack(">i", 1) \
        + s("m") + s("c") + s("/h") + struct.pack(">i", 10) + struct.pack(">i", 0) + struct.pack(">i", 0)
    group = decode_group_value(g0)
    assert group.members[0].rebalance_timeout == -1 and group.members[0].session_timeout == 10
    assert decode_key(b"\x00\x00" + s("g") + s("t") + struct.pack(">i", 1)) == OffsetRecordKey("g", "t", 1)
    assert decode_key(b"\x00\x02" + s("g")) == GroupRecordKey("g")
    assert decode_key(b"\x00\x05whatever") is None  # KIP-848 records: someone else's


@pytest.mark.parametrize("bad", [b"", b"\x00", b"\xff\xff" + s("g"), b"\x00\x02" + s("g") + b"x",
                                 b"\x00\x01" + s("g")])
def test_bad_keys_raise_decode_error(bad):
    with pytest.raises(DecodeError):
        decode_key(bad)


def test_unknown_value_version_is_rejected():
    with pytest.raises(DecodeError):
        decode_offset_value(b"\x00\x09" + b"\x00" * 30)


@given(st.binary(max_size=80))
@settings(max_examples=300, deadline=None)
def test_decoders_raise_only_decode_error(blob):
    for decode in (decode_key, decode_offset_value, decode_group_value):
        try:
            decode(blob)
        except DecodeError:
            pass


@given(group=st.text(max_size=20), topic=st.text(max_size=20), partition=st.integers(0, 2**31 - 1),
       offset=st.integers(-1, 2**63 - 1), epoch=st.integers(-1, 2**31 - 1), metadata=st.text(max_size=30),
       ts=st.integers(0, 2**62), expire=st.sampled_from([-1, 123]))
@settings(max_examples=100, deadline=None)
def test_offset_records_round_trip(group, topic, partition, offset, epoch, metadata, ts, expire):
    value = OffsetCommitValue(offset=offset, leader_epoch=epoch if expire == -1 else -1, metadata=metadata,
                              commit_timestamp=ts, expire_timestamp=expire)
    key, raw = offset_commit_record(group, topic, partition, value)
    assert decode_key(key) == OffsetRecordKey(group, topic, partition)
    assert decode_offset_value(raw) == value
