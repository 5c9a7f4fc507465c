"""broker.produce_validation: header-level validation of one partition's produce records."""
import pytest

from broker.produce_validation import ProduceError, validate_produce_records
from tests.broker.builders import batch
from wire.error_codes import ErrorCode
from wire.records import Compression, SimpleRecord, build_batch

NOW = 1_700_000_000_000
LIMITS = dict(max_message_bytes=1 << 20)


def check(records, version=8, **kw):
    return validate_produce_records(records, version, **{**LIMITS, **kw})


def code_of(records, version=8, **kw):
    with pytest.raises(ProduceError) as info:
        check(records, version, **kw)
    return info.value.code


def test_a_good_batch_passes_and_returns_its_header():
    header = check(batch(5, timestamp=NOW))
    assert header.records_count == 5 and header.base_offset == 0


def test_empty_or_missing_records_are_invalid():
    assert code_of(b"") == ErrorCode.INVALID_RECORD
    assert code_of(None) == ErrorCode.INVALID_RECORD


def test_two_batches_in_one_partition_are_refused():
    assert code_of(batch(1) + batch(1)) == ErrorCode.INVALID_RECORD


def test_old_magic_is_refused():
    raw = bytearray(batch(1))
    raw[16] = 1
    assert code_of(bytes(raw)) == ErrorCode.INVALID_RECORD


def test_truncated_batch_is_corrupt():
    raw = batch(3)
    assert code_of(raw[:-5]) == ErrorCode.CORRUPT_MESSAGE
    assert code_of(raw[:20]) == ErrorCode.CORRUPT_MESSAGE
    assert code_of(raw[:10]) == ErrorCode.CORRUPT_MESSAGE


def test_nonzero_base_offset_is_refused():
    assert code_of(build_batch([SimpleRecord(b"k", b"v")], base_offset=7)) == ErrorCode.INVALID_RECORD


def test_count_must_match_last_offset_delta():
    raw = build_batch([SimpleRecord(b"k", b"v"), SimpleRecord(b"k", b"w")], offset_deltas=[0, 3])
    assert code_of(raw) == ErrorCode.INVALID_RECORD


def test_control_batches_from_clients_are_refused():
    assert code_of(build_batch([SimpleRecord(b"\x00\x00\x00\x01", b"")], control=True)) == ErrorCode.INVALID_RECORD


def test_zstd_needs_produce_v7():
    raw = build_batch([SimpleRecord(b"k", b"v" * 100)], compression=Compression.ZSTD)
    assert code_of(raw, version=6) == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    assert check(raw, version=7).compression == 4


def test_batch_over_max_message_bytes_is_too_large():
    raw = batch(10, value_size=200)
    assert code_of(raw, max_message_bytes=len(raw) - 1) == ErrorCode.MESSAGE_TOO_LARGE
    check(raw, max_message_bytes=len(raw))


def test_idempotent_batch_needs_a_sequence():
    raw = build_batch([SimpleRecord(b"k", b"v")], producer_id=5, producer_epoch=0, base_sequence=-1)
    assert code_of(raw) == ErrorCode.INVALID_RECORD
    check(build_batch([SimpleRecord(b"k", b"v")], producer_id=5, producer_epoch=0, base_sequence=0))
