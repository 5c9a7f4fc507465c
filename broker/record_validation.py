"""Produce-path validation of a batch's records (Kafka's LogValidator for v2 batches).

`broker.produce_validation` checks the batch header; this module checks what is inside,
after the header passed: the CRC (so damaged bytes answer CORRUPT_MESSAGE
before anything reads them), then every record in one pass
(`wire.record_scan`: decompressed, bounded, structure, offset deltas), then
the rules Kafka applies per record:

- a compacted topic takes only records with keys (INVALID_RECORD per record);
- CreateTime topics: a record timestamp outside message.timestamp.before/
  after.max.ms is INVALID_TIMESTAMP per record; a LogAppendTime batch from a
  producer is refused on a LogAppendTime topic, as in Kafka;
- a transactional batch must carry a producer id (INVALID_RECORD); whether it belongs to
  an open transaction is the producer state's question.

Per-record faults are answered the way Kafka's processRecordErrors does: the
partition error plus `record_errors` (ProduceError.record_errors: batch index
and message, sent from Produce v8),
listing at most MAX_RECORD_ERRORS of them so the answer stays small. A batch
whose header maxTimestamp differs from its records' largest timestamp is
corrected, as Kafka's setMaxTimestamp does, rather than refused: the time
index and retention read the header.
"""
from __future__ import annotations

from broker.produce_validation import ProduceError
from wire.batch_header import HEADER_SIZE, BatchHeader, parse_header, set_max_timestamp, validate_batch
from wire.error_codes import ErrorCode
from wire.errors import CorruptRecordError
from wire.record_scan import scan_records
from wire.records import NO_TIMESTAMP, decode_records

__all__ = ["validate_records", "MAX_RECORD_ERRORS"]

MAX_RECORD_ERRORS = 1000


def validate_records(records, header: BatchHeader, where: str, *, compacted: bool, log_append_time: bool,
                     now_ms: int, before_max_ms: int, after_max_ms: int) -> tuple[object, BatchHeader]:
    """The batch to append and its header (`records` and `header`, or a copy with its
    maxTimestamp corrected), or ProduceError."""
    try:
        validate_batch(records, 0)
    except CorruptRecordError as exc:
        raise ProduceError(ErrorCode.CORRUPT_MESSAGE, f"{exc} in {where}") from None
    if header.is_transactional and header.producer_id < 0:
        raise ProduceError(ErrorCode.INVALID_RECORD, f"Transactional batch without a producer id in {where}")
    payload = memoryview(records)[HEADER_SIZE:]
    try:
        scan = scan_records(header, payload)
    except CorruptRecordError as exc:
        raise ProduceError(ErrorCode.INVALID_RECORD, f"Invalid records in {where}: {exc}") from None
    errors: list[tuple[int, str]] = []
    timestamp_error = False
    if compacted and scan.keyless:
        errors += [(i, f"Compacted topic cannot accept message without key in topic partition {where}.")
                   for i, record in enumerate(decode_records(header, payload)) if record.key is None]
    if log_append_time:
        if header.log_append_time:
            timestamp_error = True
            errors += [(i, "Invalid timestamp type in message. Producer should not set timestamp type to "
                           "LogAppendTime.") for i in range(header.records_count)]
    else:
        low, high = now_ms - before_max_ms, now_ms + after_max_ms
        if scan.min_timestamp < low or scan.max_timestamp > high or (header.log_append_time and
                                                                     header.max_timestamp == NO_TIMESTAMP):
            bad = _timestamp_errors(header, payload, low, high)
            timestamp_error = bool(bad)
            errors += bad
    if errors:
        errors.sort()
        if timestamp_error:
            message = f"One or more records have been rejected due to invalid timestamp in {where}"
        else:
            message = (f"One or more records have been rejected due to {len(errors)} record errors in total, "
                       f"and only showing the first three errors at most: {errors[:3]}")
        raise ProduceError(ErrorCode.INVALID_TIMESTAMP if timestamp_error else ErrorCode.INVALID_RECORD,
                           message, errors[:MAX_RECORD_ERRORS])
    if not header.log_append_time and not log_append_time and scan.max_timestamp != header.max_timestamp:
        records = bytearray(records)
        set_max_timestamp(records, 0, header, scan.max_timestamp, log_append_time=False)
        header = parse_header(records)
    return records, header


def _timestamp_errors(header: BatchHeader, payload, low: int, high: int) -> list[tuple[int, str]]:
    """Kafka's validateTimestamp for each record of a CreateTime topic's batch."""
    errors = []
    for i, record in enumerate(decode_records(header, payload)):
        ts = record.timestamp
        if ts != NO_TIMESTAMP:
            if not low <= ts <= high:
                errors.append((i, f"Timestamp {ts} of message with offset {i} is out of range. "
                                  f"The timestamp should be within [{low}, {high}]"))
        elif header.log_append_time:
            errors.append((i, "Invalid timestamp type in message. Producer should not set timestamp type to "
                              "LogAppendTime."))
    return errors
