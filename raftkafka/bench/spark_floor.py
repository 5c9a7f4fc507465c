"""Spark's floor for the Spark benchmark: a Python data source yielding ready-made Arrow
batches in the Kafka schema, so a query over it costs what Spark itself costs per row.
Options `rows` (per batch) and `batches` (per partition) size it; 4 partitions. As a
streaming source it gives micro-batches of ready-made rows (`streamReader`); as a streaming
sink it takes Spark's Arrow batches and drops them (`streamWriter`), so a copy query into
it costs what moving rows into a Python sink costs in Spark."""
from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamArrowWriter, \
    DataSourceStreamReader, InputPartition, WriterCommitMessage
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

FLOOR_PARTITIONS, FLOOR_BATCHES, FLOOR_ROWS = 4, 7, 36_000
FLOOR_ROWS_TOTAL = FLOOR_PARTITIONS * FLOOR_BATCHES * FLOOR_ROWS


def _ready_made(n: int):
    import pyarrow as pa
    from spark_source.arrow_rows import arrow_schema
    columns = [pa.array([b"12345"] * n, pa.binary()), pa.array([b"x" * 100] * n, pa.binary()),
               pa.repeat(pa.scalar("t", pa.string()), n), pa.repeat(pa.scalar(0, pa.int32()), n),
               pa.array(range(n), pa.int64()), pa.array([1000] * n, pa.timestamp("us", tz="UTC")),
               pa.repeat(pa.scalar(0, pa.int32()), n)]
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema(False))


class _FloorReader(DataSourceReader):
    def __init__(self, rows: int, batches: int):
        self.rows, self.batches = rows, batches

    def partitions(self):
        return [InputPartition(i) for i in range(FLOOR_PARTITIONS)]

    def read(self, partition):
        batch = _ready_made(self.rows)
        for _ in range(self.batches):
            yield batch


class _StreamFloorReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches of `per_batch` ready-made rows in `tasks` tasks until `total` rows."""

    def __init__(self, per_batch: int, total: int, tasks: int):
        self.per_batch, self.total, self.tasks = per_batch, total, tasks

    def initialOffset(self):
        return {"rows": 0}

    def prepareForTriggerAvailableNow(self) -> None:
        pass

    def latestOffset(self, start, limit):
        return {"rows": min(self.total, start["rows"] + self.per_batch)}

    def partitions(self, start, end):
        rows = (end["rows"] - start["rows"]) // self.tasks
        return [InputPartition(rows) for _ in range(self.tasks)] if rows else []

    def read(self, partition):
        yield _ready_made(partition.value)

    def commit(self, end) -> None:
        pass


class _DroppingStreamWriter(DataSourceStreamArrowWriter):
    """Takes every Arrow batch Spark hands a task and keeps nothing but the row count."""

    def write(self, iterator):
        rows = 0
        for batch in iterator:
            rows += batch.num_rows
        return _Dropped(rows)

    def commit(self, messages, batchId: int) -> None:
        pass

    def abort(self, messages, batchId: int) -> None:
        pass


@dataclass
class _Dropped(WriterCommitMessage):
    rows: int


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

    def streamReader(self, schema):
        """Options `perBatch`, `total`, `tasks`: what a micro-batch of the noop sink costs in Spark."""
        return _StreamFloorReader(int(self.options["perBatch"]), int(self.options["total"]),
                                  int(self.options["tasks"]))

    def streamWriter(self, schema, overwrite: bool):
        """Drops what it is given: what a streaming copy into a Python sink costs in Spark."""
        return _DroppingStreamWriter()
