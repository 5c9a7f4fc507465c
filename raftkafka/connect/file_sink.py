"""FileStreamSink: records of some topics, appended to a file one value per line.

Each record's value, read back by the value converter, is written as Java's `String.valueOf`
prints it (a string as is, a struct or map as `{a=1, b=x}`), after the transforms, followed by a
newline. The consumer group is Kafka Connect's `connect-<connector name>`.

Exactly-once into the file, without transactions: every `offset.flush.interval.ms` the task
flushes and fsyncs the file, then records in the worker's offsets file (atomically) the file's
size together with the next offset of every partition it has written, and only then commits
those offsets to its group. On start it cuts the file back to the recorded size (dropping lines
written after the last flush, which it is about to consume again) and continues from the
recorded offsets (for partitions it has none for, the group's committed offsets, else the
earliest). The group's offsets therefore never run ahead of the file, and the file never
holds a record twice. This holds while this connector is the file's only writer.

`tasks.max` tasks run, as Kafka's FileStreamSinkConnector runs them: each is a member of the
group with its own consumer (static member `connect-<name>-<task>`), all append to the one
file. They share the written positions: a partition that moves to another task in a
rebalance is read on from where the file ends for it, and a record below that position is
never written again.
"""
from __future__ import annotations

import os

import trio

from raftkafka.client import CommitFailedError, Consumer, KafkaError
from raftkafka.connect.converters import java_text
from raftkafka.connect.offset_file import OffsetFile
from raftkafka.connect.records import ConnectRecord
from raftkafka.connect.transforms import apply_chain
from raftkafka.connect.worker_config import ConnectorConfig, WorkerConfig

__all__ = ["FileSink"]


class FileSink:
    def __init__(self, env, connector: ConnectorConfig, worker: WorkerConfig, offsets: OffsetFile,
                 consumer_kwargs: dict, log):
        self.env = env
        self.connector = connector
        self.file = connector.properties["file"].strip()
        self.worker = worker
        self.offsets = offsets
        self.consumer_kwargs = consumer_kwargs
        self.log = log
        self.partition_key = {"file": self.file}
        self.positions: dict[tuple[str, int], int] = {}  # next offset to write, per partition
        self.flushed: dict[tuple[str, int], int] = {}  # the positions of the last flush
        self.flushes = 0
        self._dirty = False  # written since the last flush
        self._flush_lock = trio.Lock()
        self._next_flush = 0.0
        self._out = None

    async def _restore(self, out) -> None:
        """Cut the file back to its last flushed size; take the offsets recorded with it. The first
        time, record the size the file has before anything is written to it."""
        stored = self.offsets.get(self.connector.name, self.partition_key)
        size = os.fstat(out.fileno()).st_size
        if stored is None:
            await self.offsets.put(self.connector.name, self.partition_key, {"size": size, "offsets": {}})
            return
        try:
            flushed = int(stored["size"])
            positions = {(t, int(p)): int(o) for t, parts in stored["offsets"].items() for p, o in parts.items()}
        except (KeyError, TypeError, ValueError, AttributeError):
            raise ValueError(f"the offsets file's entry for {self.connector.name} is damaged: {stored!r}") from None
        if size > flushed:
            self.log(f"{self.connector.name}: dropping {size - flushed} bytes of {self.file} written after the "
                     "last flush (their records are consumed again)")
            out.truncate(flushed)
        elif size < flushed:
            self.log(f"{self.connector.name}: {self.file} is shorter than when it was last flushed "
                     f"({size} < {flushed} bytes); appending to it as it is")
        self.positions = positions
        self.flushed = dict(positions)

    async def run(self) -> None:
        with open(self.file, "ab") as out:
            await self._restore(out)
            out.seek(0, os.SEEK_END)
            self._out = out
            self._next_flush = self.env.now() + self.worker.flush_interval
            async with trio.open_nursery() as nursery:
                for task in range(self.connector.tasks_max):
                    nursery.start_soon(self._task, task)

    async def _task(self, task: int) -> None:
        # A static member (KIP-345): a task restarted after a crash takes its place in the
        # group at once instead of waiting out the dead one's session.
        settings = {"group_instance_id": f"connect-{self.connector.name}-{task}", "enable_auto_commit": False,
                    "auto_offset_reset": "earliest", **self.consumer_kwargs}
        async with Consumer(self.env, self.worker.bootstrap_servers, group_id=f"connect-{self.connector.name}",
                            **settings) as consumer:
            def on_assign(partitions):
                for tp in partitions:
                    if tp in self.positions:
                        consumer.seek(tp, self.positions[tp])

            consumer.subscribe(self.connector.topics(), on_assign=on_assign)
            committed = self.flushes
            while True:
                try:
                    records = await consumer.poll(0.5)
                except KafkaError as e:
                    if not e.retriable:
                        raise
                    self.log(f"{self.connector.name}-{task}: {e}; polling again")
                    continue
                self._write(records)
                if self.env.now() >= self._next_flush and not self._flush_lock.locked():
                    await self._flush()
                if committed != self.flushes:
                    committed = self.flushes
                    await self._commit(consumer, task)

    def _write(self, records) -> None:
        lines, moved = [], {}
        for r in records:
            tp = (r.topic, r.partition)
            if r.offset < moved.get(tp, self.positions.get(tp, -1)):
                continue  # written already, by this task or by the one that held the partition before
            lines.append(self._line(r))  # may refuse the record: then nothing of the batch is written
            moved[tp] = r.offset + 1
        if lines:
            self._out.write(b"".join(lines))
            self._out.flush()  # visible to readers now; durable at the next flush
            self.positions.update(moved)
            self._dirty = True

    def _line(self, r) -> bytes:
        key_schema, key = self.connector.key_converter.to_connect(r.topic, r.key)
        value_schema, value = self.connector.value_converter.to_connect(r.topic, r.value)
        record = apply_chain(self.connector.transforms, ConnectRecord(
            r.topic, r.partition, key_schema, key, value_schema, value, r.timestamp, r.offset, r.headers))
        return (java_text(record.value) + "\n").encode()

    async def _flush(self) -> None:
        """fsync the file, then record its size with the positions it holds; the tasks then commit
        those positions to the group."""
        async with self._flush_lock:
            self._next_flush = self.env.now() + self.worker.flush_interval
            if not self._dirty:
                return
            out = self._out
            out.flush()
            size, positions = out.tell(), dict(self.positions)  # what the fsync below makes durable
            self._dirty = False
            await trio.to_thread.run_sync(os.fsync, out.fileno())
            offsets: dict[str, dict[str, int]] = {}
            for (topic, partition), offset in sorted(positions.items()):
                offsets.setdefault(topic, {})[str(partition)] = offset
            await self.offsets.put(self.connector.name, self.partition_key, {"size": size, "offsets": offsets})
            self.flushed = positions
            self.flushes += 1

    async def _commit(self, consumer: Consumer, task: int) -> None:
        assigned = consumer.assignment()
        try:
            await consumer.commit({tp: o for tp, o in self.flushed.items() if tp in assigned})
        except (CommitFailedError, KafkaError) as e:  # the offsets file is ahead; the next flush commits
            self.log(f"{self.connector.name}-{task}: offset commit failed ({e}); retried at the next flush")
