"""One sink task's rows, column-wise: where each goes, and its records in chunks of whole batches.

`SinkRows.from_arrow` takes the Arrow batches Spark hands a writer (columns as in
writers.py: value, key, topic, partition, headers) and picks each row's target
partition as Spark's Kafka sink does: the `partition` column, else murmur2 of the key
(Kafka's Java partitioner, computed for all rows of one key length at once), else
spread by row for a null key. `sections` encodes the rows of each target partition,
in row order, into record sections of at most about `max_bytes`.
"""
from __future__ import annotations

from typing import Callable, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_source.arrow_encode import encode_records
from spark_source.batch_appender import Section
from wire.records import SimpleRecord

__all__ = ["SinkRows", "murmur2_partitions", "SECTION_BYTES"]

# Below the broker's default max message size and the producer's max request size (1 MiB); the
# estimate per row is generous, so sections come out smaller.
SECTION_BYTES = 960 * 1024
_M = np.uint32(0x5BD1E995)


def murmur2_partitions(keys: pa.Array, num_partitions: int) -> np.ndarray:
    """Kafka's murmur2 partition of each (non-null) key; the same as partitioner.murmur2_partition."""
    keys = keys.cast(pa.binary())
    n = len(keys)
    out = np.zeros(n, dtype=np.int64)
    lengths = pc.binary_length(keys).fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    offsets = np.frombuffer(keys.buffers()[1], dtype=np.int32)[keys.offset:keys.offset + n + 1].astype(np.int64)
    data = np.frombuffer(keys.buffers()[2], dtype=np.uint8) if keys.buffers()[2] is not None else np.zeros(0, np.uint8)
    with np.errstate(over="ignore"):
        for length in np.unique(lengths[lengths >= 0]):
            rows = np.flatnonzero(lengths == length)
            length = int(length)
            matrix = data[offsets[rows, None] + np.arange(length)] if length else np.zeros((len(rows), 0), np.uint8)
            h = np.full(len(rows), (0x9747B28C ^ length) & 0xFFFFFFFF, dtype=np.uint32)
            blocks = length // 4
            if blocks:
                words = np.ascontiguousarray(matrix[:, :blocks * 4]).view("<u4")
                for b in range(blocks):
                    k = words[:, b] * _M
                    k ^= k >> np.uint32(24)
                    k *= _M
                    h = (h * _M) ^ k
            base, tail = blocks * 4, length & 3
            if tail == 3:
                h ^= matrix[:, base + 2].astype(np.uint32) << np.uint32(16)
            if tail >= 2:
                h ^= matrix[:, base + 1].astype(np.uint32) << np.uint32(8)
            if tail >= 1:
                h ^= matrix[:, base].astype(np.uint32)
                h *= _M
            h ^= h >> np.uint32(13)
            h *= _M
            h ^= h >> np.uint32(15)
            out[rows] = (h & np.uint32(0x7FFFFFFF)).astype(np.int64) % num_partitions
    return out


class SinkRows:
    """Rows (key, value, own headers) and the index of each one's target in `targets`. A task's
    rows may come in several of these, in order: `first_row` is the task's index of row 0 here."""

    def __init__(self, targets: list[tuple[str, int]], target_of: np.ndarray, keys: pa.Array, values: pa.Array,
                 headers: list | None = None, first_row: int = 0):
        self.targets, self.target_of = targets, target_of
        self.keys, self.values, self.headers = keys, values, headers
        self.first_row = first_row

    def __len__(self) -> int:
        return len(self.target_of)

    def used_targets(self) -> list[tuple[str, int]]:
        return sorted(self.targets[i] for i in np.unique(self.target_of))

    @classmethod
    def from_records(cls, rows: list[tuple[tuple[str, int], SimpleRecord]]) -> "SinkRows":
        targets = sorted({tp for tp, _ in rows})
        index = {tp: i for i, tp in enumerate(targets)}
        headers = [list(r.headers) for _, r in rows]
        return cls(targets, np.array([index[tp] for tp, _ in rows], dtype=np.int64),
                   pa.array([r.key for _, r in rows], pa.binary()), pa.array([r.value for _, r in rows], pa.binary()),
                   headers if any(headers) else None)

    @classmethod
    def from_arrow(cls, batches: Iterable[pa.RecordBatch], *, topic_option: str | None, task: int,
                   partition_counts: Callable[[str], int], first_row: int = 0) -> "SinkRows":
        """`partition_counts(topic)`: the topic's partition count (raises if it does not exist).
        `first_row`: the task's index of the first row here (rows of a null key are spread by it)."""
        batches = [b for b in batches if b.num_rows]
        if not batches:
            return cls([], np.zeros(0, dtype=np.int64), pa.array([], pa.binary()), pa.array([], pa.binary()),
                       first_row=first_row)
        table = pa.Table.from_batches(batches)
        names = {name.lower(): name for name in table.column_names}
        n = table.num_rows

        def column(name):
            # One copy of a column spread over several batches, none of one in a single batch
            # (ChunkedArray.combine_chunks copies even a single chunk).
            if name not in names:
                return None
            chunks = table.column(names[name])
            return chunks.chunk(0) if chunks.num_chunks == 1 else chunks.combine_chunks()

        values = column("value").cast(pa.binary())
        keys = column("key")
        keys = keys.cast(pa.binary()) if keys is not None else pa.nulls(n, pa.binary())
        if topic_option:
            topics = np.zeros(n, dtype=np.int64)
            topic_names = [topic_option]
        else:
            topic_column = column("topic")
            if topic_column.null_count:
                raise ValueError("a row has a null topic and no 'topic' option is set")
            encoded = topic_column.dictionary_encode()
            topics = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
            topic_names = encoded.dictionary.to_pylist()
        partitions = np.full(n, -1, dtype=np.int64)
        given = column("partition")
        if given is not None:
            partitions = given.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
        key_null = keys.is_null().to_numpy(zero_copy_only=False)
        for t, name in enumerate(topic_names):
            count = partition_counts(name)
            of_topic = topics == t
            wrong = of_topic & (partitions >= count)
            if wrong.any():
                raise ValueError(f"partition {int(partitions[wrong][0])} of topic {name!r} does not exist "
                                 f"(it has {count})")
            hashed = of_topic & (partitions < 0) & ~key_null
            if hashed.any():
                partitions[hashed] = murmur2_partitions(keys.filter(pa.array(hashed)), count)
            spread = of_topic & (partitions < 0)
            partitions[spread] = (task + first_row + np.flatnonzero(spread)) % count
        width = int(partitions.max()) + 1
        unique, target_of = np.unique(topics * width + partitions, return_inverse=True)
        targets = [(topic_names[int(u) // width], int(u) % width) for u in unique]
        headers = None
        header_column = column("headers")
        if header_column is not None and header_column.null_count < n:
            headers = [[(h["key"], h["value"]) for h in row] if row else None for row in header_column.to_pylist()]
        return cls(targets, target_of.reshape(-1).astype(np.int64), keys, values, headers, first_row)

    def sections(self, skip: set[int], tag_prefix: bytes | None, max_bytes: int = SECTION_BYTES) -> list[Section]:
        """Records of the rows not in `skip` (task row indexes), per target partition in row order,
        in sections of at most about `max_bytes`. With `tag_prefix`, the task's row i carries
        raftkafka.sink = prefix + i."""
        keep = np.ones(len(self), dtype=bool)
        first = self.first_row
        if skip:
            keep[np.fromiter((i - first for i in skip if first <= i < first + len(self)), dtype=np.int64)] = False
        sizes = (pc.binary_length(self.keys).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
                 + pc.binary_length(self.values).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64) + 64)
        out: list[Section] = []
        for t, tp in enumerate(self.targets):
            rows = np.flatnonzero((self.target_of == t) & keep)
            if not rows.size:
                continue
            chunk_of = (np.cumsum(sizes[rows]) - 1) // max_bytes
            for piece in np.split(rows, np.flatnonzero(np.diff(chunk_of)) + 1):
                taken = pa.array(piece)
                section = encode_records(self.keys.take(taken), self.values.take(taken), tag_prefix=tag_prefix,
                                         tag_numbers=piece + first if tag_prefix is not None else None,
                                         headers=[self.headers[i] for i in piece] if self.headers else None)
                out.append((tp, section, len(piece)))
        return out
