"""Spark's Kafka schema, as Spark types and as the Arrow schema of the batches the reader yields.

Spark checks a yielded batch's Arrow schema for equality with
`to_arrow_schema(schema, timezone="UTC")` (G14), so the Arrow types here are
spelled out to match: binary, string, int32, int64, timestamp[us, UTC], and
headers as list<struct<key: string, value: binary>> (null when a record has none).
pyarrow is imported only by `arrow_schema`: the driver's planning steps need the
Spark schema alone, and each runs in a fresh Python process.
"""
from __future__ import annotations

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

__all__ = ["spark_schema", "arrow_schema", "TIMESTAMP_TYPE_CREATE", "TIMESTAMP_TYPE_LOG_APPEND"]

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


def arrow_schema(include_headers: bool = False):
    """The pyarrow.Schema of `spark_schema(include_headers)`."""
    import pyarrow as pa

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
        header = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
        fields.append(pa.field("headers", pa.list_(header)))
    return pa.schema(fields)
