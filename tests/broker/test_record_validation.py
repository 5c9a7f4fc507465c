"""broker.record_validation: Kafka's LogValidator rules for the records of a produced batch."""
import pytest

from broker.produce_validation import ProduceError
from broker.record_validation import MAX_RECORD_ERRORS, validate_records
from tests.wire.raw_batches import batch_around, raw_record
from wire.batch_header import parse_header, validate_batch
from wire.error_codes import ErrorCode
from wire.records import NO_TIMESTAMP, SimpleRecord, build_batch

NOW = 1_700_000_000_000
TOPIC = dict(compacted=False, log_append_time=False, now_ms=NOW, before_max_ms=(1 << 63) - 1,
             after_max_ms=3_600_000)


def check(raw, **kw):
    records, header = validate_records(raw, parse_header(raw), "t-0", **{**TOPIC, **kw})
    assert header == validate_batch(records)  # the header that goes with the bytes
    return records


def refusal(raw, **kw) -> ProduceError:
    with pytest.raises(ProduceError) as info:
        check(raw, **kw)
    return info.value


def keyed(*keys, timestamps=None):
    return build_batch([SimpleRecord(k, b"v", timestamp=NOW if timestamps is None else timestamps[i])
                        for i, k in enumerate(keys)])


def test_a_valid_batch_is_returned_as_it_came():
    raw = keyed(b"a", b"b")
    assert check(raw) is raw


def test_a_crc_mismatch_is_corrupt_before_anything_reads_the_records():
    raw = bytearray(keyed(b"a", b"b"))
    raw[-1] ^= 0xFF
    assert refusal(bytes(raw)).code == ErrorCode.CORRUPT_MESSAGE


def test_garbage_records_behind_a_valid_crc_are_invalid_records():
    error = refusal(batch_around(b"\x07" * 30, count=2, base_timestamp=NOW))
    assert error.code == ErrorCode.INVALID_RECORD and "t-0" in error.message
    assert check(batch_around(raw_record() + raw_record(offset_delta=1), count=2, base_timestamp=NOW))


def test_a_compacted_topic_needs_keys_and_says_which_records_lack_one():
    raw = keyed(b"a", None, b"c", None)
    error = refusal(raw, compacted=True)
    assert error.code == ErrorCode.INVALID_RECORD
    assert [i for i, _ in error.record_errors] == [1, 3]
    assert "without key" in error.record_errors[0][1] and "2 record errors" in error.message
    check(raw)  # the same batch on a topic that is not compacted
    check(keyed(b"a", b"b"), compacted=True)


def test_each_record_timestamp_is_bounded_not_only_the_header_ones():
    # The out-of-range record is neither the first nor the largest: only a per-record check sees it.
    raw = keyed(b"a", b"b", b"c", timestamps=[NOW, NOW - 5000, NOW + 10])
    error = refusal(raw, before_max_ms=1000)
    assert error.code == ErrorCode.INVALID_TIMESTAMP
    assert [i for i, _ in error.record_errors] == [1]
    check(raw, before_max_ms=5000)
    assert refusal(keyed(b"a", timestamps=[NOW + 3_600_001])).code == ErrorCode.INVALID_TIMESTAMP
    check(keyed(b"a", timestamps=[NO_TIMESTAMP]), before_max_ms=1000)  # no timestamp: nothing to bound


def test_a_log_append_time_topic_does_not_bound_timestamps_but_refuses_producer_log_append_time():
    check(keyed(b"a", timestamps=[NOW + 10**9]), log_append_time=True)
    stamped = build_batch([SimpleRecord(b"a", b"v", timestamp=NOW)], log_append_time=True)
    assert refusal(stamped, log_append_time=True).code == ErrorCode.INVALID_TIMESTAMP
    check(stamped)  # a CreateTime topic takes it: its records carry the header's timestamp, in range


def test_a_transactional_batch_needs_a_producer_id():
    raw = build_batch([SimpleRecord(b"a", b"v", timestamp=NOW)], transactional=True)
    assert refusal(raw).code == ErrorCode.INVALID_RECORD
    check(build_batch([SimpleRecord(b"a", b"v", timestamp=NOW)], producer_id=3, producer_epoch=0, base_sequence=0,
                      transactional=True))


def test_a_wrong_header_max_timestamp_is_corrected_with_a_fresh_crc():
    raw = keyed(b"a", b"b", timestamps=[NOW, NOW + 5])
    wrong = build_batch([SimpleRecord(b"a", b"v", timestamp=NOW), SimpleRecord(b"b", b"v", timestamp=NOW + 5)],
                        max_timestamp=NOW + 999)
    fixed = check(wrong)
    assert validate_batch(fixed).max_timestamp == NOW + 5
    assert bytes(fixed) == raw


def test_record_errors_listed_are_bounded():
    raw = build_batch([SimpleRecord(None, b"", timestamp=NOW)] * (MAX_RECORD_ERRORS + 50))
    error = refusal(raw, compacted=True)
    assert len(error.record_errors) == MAX_RECORD_ERRORS and f"{MAX_RECORD_ERRORS + 50} record errors" in error.message
