"""Decoded records → pyarrow RecordBatches with exactly Spark's Kafka schema.

Spark checks a yielded batch's Arrow schema for equality with
`to_arrow_schema(schema, timezone="UTC")` (G14), so the Arrow types here are
spelled out to match: binary, string, int32, int64, timestamp[us, UTC], and
headers as list<struct<key: string, value: binary>> (null when a record has none).
"""
from __future__ import annotations

from typing import Iterable

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from raftkafka.client.fetcher import ConsumerRecord

__all__ = ["spark_schema", "arrow_schema", "RowColumns", "TIMESTAMP_TYPE_CREATE", "TIMESTAMP_TYPE_LOG_APPEND"]

TIMESTAMP_TYPE_CREATE = 0
TIMESTAMP_TYPE_LOG_APPEND = 1

_HEADER = StructType([StructField("key", StringType()), StructField("value", BinaryType())])


def spark_schema(include_headers: bool = False) -> StructType:
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", ArrayType(_HEADER)))
    return StructType(fields)


_ARROW_HEADER = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])


def arrow_schema(include_headers: bool = False) -> pa.Schema:
    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(pa.field("headers", pa.list_(_ARROW_HEADER)))
    return pa.schema(fields)


class RowColumns:
    """Column buffers for the records of one topic partition; `flush()` yields a RecordBatch."""

    def __init__(self, topic: str, partition: int, include_headers: bool = False):
        self.topic = topic
        self.partition = partition
        self.include_headers = include_headers
        self.schema = arrow_schema(include_headers)
        self._clear()

    def _clear(self) -> None:
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.offsets: list[int] = []
        self.timestamps: list[int] = []
        self.timestamp_types: list[int] = []
        self.headers: list[list[dict] | None] = []

    def __len__(self) -> int:
        return len(self.offsets)

    def add(self, records: Iterable[ConsumerRecord]) -> None:
        for r in records:
            self.keys.append(r.key)
            self.values.append(r.value)
            self.offsets.append(r.offset)
            self.timestamps.append(r.timestamp)
            self.timestamp_types.append(r.timestamp_type)
            if self.include_headers:
                self.headers.append([{"key": k, "value": v} for k, v in r.headers] if r.headers else None)

    def flush(self) -> pa.RecordBatch:
        n = len(self.offsets)
        columns = [
            pa.array(self.keys, type=pa.binary()),
            pa.array(self.values, type=pa.binary()),
            pa.array([self.topic] * n, type=pa.string()) if n else pa.array([], type=pa.string()),
            pa.array([self.partition] * n, type=pa.int32()),
            pa.array(self.offsets, type=pa.int64()),
            # Kafka timestamps are ms; Spark's TIMESTAMP is µs. -1 (no timestamp) stays a null.
            pa.array([ts * 1000 if ts >= 0 else None for ts in self.timestamps], type=pa.timestamp("us", tz="UTC")),
            pa.array(self.timestamp_types, type=pa.int32()),
        ]
        if self.include_headers:
            columns.append(pa.array(self.headers, type=pa.list_(_ARROW_HEADER)))
        batch = pa.RecordBatch.from_arrays(columns, schema=self.schema)
        self._clear()
        return batch
