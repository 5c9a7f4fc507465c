"""Spark's floor for the Spark benchmark: a Python data source yielding ready-made Arrow
batches in the Kafka schema, so a query over it costs what Spark itself costs per row.
Options `rows` (per batch) and `batches` (per partition) size it; 4 partitions."""
from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

FLOOR_PARTITIONS, FLOOR_BATCHES, FLOOR_ROWS = 4, 7, 36_000
FLOOR_ROWS_TOTAL = FLOOR_PARTITIONS * FLOOR_BATCHES * FLOOR_ROWS


class _FloorReader(DataSourceReader):
    def __init__(self, rows: int, batches: int):
        self.rows, self.batches = rows, batches

    def partitions(self):
        return [InputPartition(i) for i in range(FLOOR_PARTITIONS)]

    def read(self, partition):
        import pyarrow as pa
        from spark_source.arrow_rows import arrow_schema
        n = self.rows
        columns = [pa.array([b"12345"] * n, pa.binary()), pa.array([b"x" * 100] * n, pa.binary()),
                   pa.repeat(pa.scalar("t", pa.string()), n), pa.repeat(pa.scalar(0, pa.int32()), n),
                   pa.array(range(n), pa.int64()), pa.array([1000] * n, pa.timestamp("us", tz="UTC")),
                   pa.repeat(pa.scalar(0, pa.int32()), n)]
        batch = pa.RecordBatch.from_arrays(columns, schema=arrow_schema(False))
        for _ in range(self.batches):
            yield batch


class SparkFloor(DataSource):
    """Ready-made Arrow batches in the Kafka schema: the per-row cost of Spark alone."""

    @classmethod
    def name(cls) -> str:
        return "raftkafka_bench_floor"

    def schema(self):
        from spark_source.arrow_rows import spark_schema
        return spark_schema(False)

    def reader(self, schema):
        return _FloorReader(int(self.options.get("rows", FLOOR_ROWS)), int(self.options.get("batches", FLOOR_BATCHES)))
