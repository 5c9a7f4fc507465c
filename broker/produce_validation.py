"""Produce-path validation of one partition's records, without touching a single record.

Kafka's ProduceRequest.validateRecords + LogValidator, at the header level:
exactly one RecordBatch v2 per partition (Produce v3+), baseOffset 0, a record
count that matches lastOffsetDelta, no control batches from clients, no zstd
before Produce v7, the size under max.message.bytes. The CRC, the records and
their timestamps are checked next, by broker.record_validation.
"""
from __future__ import annotations

from wire.batch_header import HEADER_SIZE, LOG_OVERHEAD, MAGIC, BatchHeader, parse_header
from wire.error_codes import ErrorCode
from wire.errors import CorruptRecordError

__all__ = ["ProduceError", "validate_produce_records", "ZSTD", "MIN_PRODUCE_VERSION"]

ZSTD = 4
MIN_PRODUCE_VERSION = 3  # v0-2 (magic 0/1 message sets) are refused, as Kafka 4 does
MIN_ZSTD_PRODUCE_VERSION = 7


class ProduceError(Exception):
    def __init__(self, code: ErrorCode, message: str, record_errors: list[tuple[int, str]] = ()):
        super().__init__(message)
        self.code = code
        self.message = message
        self.record_errors = record_errors  # (batch index, message) of the records at fault (Produce v8+)


def validate_produce_records(records, version: int, *, max_message_bytes: int) -> BatchHeader:
    """The single batch's header, or ProduceError with Kafka's error code."""
    if records is None or len(records) == 0:
        raise ProduceError(ErrorCode.INVALID_RECORD,
                           f"Produce requests with version {version} must have at least one record batch")
    size = len(records)
    if size < LOG_OVERHEAD + 5:  # not even baseOffset, length, epoch and magic
        raise ProduceError(ErrorCode.CORRUPT_MESSAGE, f"record set of {size} bytes is truncated")
    if records[LOG_OVERHEAD + 4] != MAGIC:
        raise ProduceError(ErrorCode.INVALID_RECORD,
                           f"Produce requests with version {version} are only allowed to contain "
                           f"record batches with magic version 2")
    try:
        header = parse_header(records, 0)
    except CorruptRecordError as exc:
        raise ProduceError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None
    if header.size > size:
        raise ProduceError(ErrorCode.CORRUPT_MESSAGE,
                           f"record batch truncated: needs {header.size} bytes, {size} available")
    if header.size < size:
        raise ProduceError(ErrorCode.INVALID_RECORD,
                           f"Produce requests with version {version} are only allowed to contain "
                           f"exactly one record batch per partition")
    if header.size > max_message_bytes:
        raise ProduceError(ErrorCode.MESSAGE_TOO_LARGE,
                           f"The request included a message larger than the max message size the server "
                           f"will accept: {header.size} > {max_message_bytes}")
    if header.compression == ZSTD and version < MIN_ZSTD_PRODUCE_VERSION:
        raise ProduceError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                           f"Produce requests with version {version} cannot use zstd compression")
    if header.compression > ZSTD:
        raise ProduceError(ErrorCode.CORRUPT_MESSAGE, f"unknown compression codec {header.compression}")
    if header.base_offset != 0:
        raise ProduceError(ErrorCode.INVALID_RECORD,
                           f"The baseOffset of the record batch in the append to a partition should be 0, "
                           f"but it is {header.base_offset}")
    if header.records_count <= 0 or header.last_offset_delta + 1 != header.records_count:
        raise ProduceError(ErrorCode.INVALID_RECORD,
                           f"Inconsistent batch offset range [0, {header.last_offset_delta}] and "
                           f"record count {header.records_count}")
    if header.records_count > 0 and header.batch_length == HEADER_SIZE - LOG_OVERHEAD:
        raise ProduceError(ErrorCode.CORRUPT_MESSAGE, "record batch claims records but holds no bytes")
    if header.is_control:
        raise ProduceError(ErrorCode.INVALID_RECORD, "Clients are not allowed to write control records")
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise ProduceError(ErrorCode.INVALID_RECORD,
                           f"Invalid sequence number {header.base_sequence} for producer {header.producer_id}")
    return header
