"""Batch and streaming writers: DataFrame rows → records, like Spark's Kafka sink.

Columns: `value` (required, string or binary), `key` (string/binary, optional),
`topic` (string; the `topic` option overrides it), `partition` (int; null → key
hash, murmur2 like Kafka's Java producer, or spread by row for null keys) and
`headers` (array<struct<key string, value binary>>).

Both take Spark's rows as Arrow batches (`SinkRows`, no Python object per row) and
append them as whole record batches with the shared client's idempotent appender
(acks=all), so a batch re-sent inside a task never duplicates a record. Rows are
appended a chunk at a time while Spark hands over the rest (for the streaming
writer when the `topic` option names the target; see `sink_protocol.write_task`). The batch writer is
still at-least-once across task attempts (a retried task re-sends its rows under
a new producer id); the streaming writer is exactly-once across attempts and
query restarts under the conditions in `sink_protocol`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator

from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from spark_source.cluster_io import appending, shared_client
from spark_source.options import InvalidOptionError, SinkOptions
from spark_source.sink_protocol import append_ledger, ledger_topic, write_task
from spark_source.sink_rows import SinkRows

__all__ = ["RaftKafkaBatchWriter", "RaftKafkaStreamWriter", "SinkCommitMessage", "check_sink_schema"]

# Spark's Arrow batches are taken this many bytes at a time: with 4 target partitions, about one
# section (SECTION_BYTES) each.
CHUNK_BYTES = 4 << 20


@dataclass
class SinkCommitMessage(WriterCommitMessage):
    task: int
    written: int
    skipped: int = 0


def check_sink_schema(schema: StructType, options: SinkOptions) -> None:
    """Spark's Kafka sink rules, checked on the driver before any task runs."""
    fields = {f.name.lower(): f.dataType for f in schema.fields}
    if "value" not in fields:
        raise InvalidOptionError("Required attribute 'value' not found")
    if not isinstance(fields["value"], (StringType, BinaryType)):
        raise InvalidOptionError(f"value attribute type must be a string or binary, not {fields['value'].simpleString()}")
    if "key" in fields and not isinstance(fields["key"], (StringType, BinaryType)):
        raise InvalidOptionError(f"key attribute type must be a string or binary, not {fields['key'].simpleString()}")
    if options.topic is None:
        if "topic" not in fields:
            raise InvalidOptionError("topic option required when no 'topic' attribute is present. "
                                     "Use the topic option for setting a topic.")
        if not isinstance(fields["topic"], StringType):
            raise InvalidOptionError(f"topic attribute type must be a string, not {fields['topic'].simpleString()}")
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise InvalidOptionError(f"partition attribute type must be an int, not {fields['partition'].simpleString()}")
    if "headers" in fields:
        h = fields["headers"]
        ok = isinstance(h, ArrayType) and isinstance(h.elementType, StructType) and \
            [f.name for f in h.elementType.fields] == ["key", "value"]
        if not ok:
            raise InvalidOptionError("headers attribute type must be array<struct<key:string,value:binary>>, "
                                     f"not {h.simpleString()}")


class _WriterBase:
    def __init__(self, options: SinkOptions, schema: StructType):
        check_sink_schema(schema, options)
        self.options = options

    def _client(self):
        o = self.options
        return shared_client(o.bootstrap_servers, o.client_id, o.request_timeout_ms, o.security, o.tuning)

    def _partition_counts(self) -> Callable[[str], int]:
        client, counts = self._client(), {}

        def partition_count(topic: str) -> int:
            if topic not in counts:
                found = client.partitions([topic])
                if topic not in found:
                    raise ValueError(f"topic {topic!r} does not exist")
                counts[topic] = len(found[topic])
            return counts[topic]

        return partition_count

    def _targets(self, partition_count: Callable[[str], int]) -> list[tuple[str, int]] | None:
        """Every partition a row may go to, when the `topic` option names it."""
        topic = self.options.topic
        return [(topic, p) for p in range(partition_count(topic))] if topic else None

    def _chunks(self, batches, task: int, partition_count: Callable[[str], int]) -> Iterator[SinkRows]:
        """Spark's Arrow batches → rows with their target partitions (deterministic for the same
        input), a chunk of about CHUNK_BYTES at a time, so the first are appended while Spark
        still hands over the rest."""
        first_row = 0
        for group in _grouped(batches, CHUNK_BYTES):
            chunk = SinkRows.from_arrow(group, topic_option=self.options.topic, task=task,
                                        partition_counts=partition_count, first_row=first_row)
            first_row += len(chunk)
            yield chunk


def _grouped(batches, min_bytes: int) -> Iterator[list]:
    """Consecutive Arrow batches in groups of at least `min_bytes` (the last may hold fewer)."""
    group, size = [], 0
    for batch in batches:
        group.append(batch)
        size += batch.nbytes
        if size >= min_bytes:
            yield group
            group, size = [], 0
    if group:
        yield group


def _wall_ms() -> int:
    import time
    return time.time_ns() // 1_000_000


class RaftKafkaBatchWriter(_WriterBase, DataSourceArrowWriter):
    def write(self, iterator):
        ctx = TaskContext.get()
        task = ctx.partitionId() if ctx else 0
        rows = 0
        with appending(self._client(), _wall_ms()) as writer:
            for chunk in self._chunks(iterator, task, self._partition_counts()):
                rows += len(chunk)
                writer.add(chunk.sections(set(), None))
        return SinkCommitMessage(task, rows)


class RaftKafkaStreamWriter(_WriterBase, DataSourceStreamArrowWriter):
    def __init__(self, options: SinkOptions, schema: StructType):
        super().__init__(options, schema)
        if options.sink_id is None:
            raise InvalidOptionError("option 'sinkId' is required by the streaming sink: a name unique to this "
                                     "query and stable across its restarts (it keys the exactly-once ledger)")
        self._client().ensure_topic(ledger_topic(options.sink_id), 1)

    def write(self, iterator):
        ctx = TaskContext.get()
        batch_id = int(ctx.getLocalProperty("streaming.sql.batchId"))
        task = ctx.partitionId()
        counts = self._partition_counts()
        result = write_task(self._client(), self.options.sink_id, batch_id, task,
                            self._chunks(iterator, task, counts), timestamp_ms=_wall_ms(),
                            targets=self._targets(counts))
        return SinkCommitMessage(task, result.written, result.skipped_as_duplicates)

    def commit(self, messages, batchId: int) -> None:
        append_ledger(self._client(), self.options.sink_id, {"kind": "commit", "batch": batchId}, _wall_ms())

    def abort(self, messages, batchId: int) -> None:
        """Nothing to undo: a re-run of the batch skips the rows already written (sink_protocol)."""
