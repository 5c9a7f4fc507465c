"""FileStreamSource: the lines of a file, as they are appended, become records of one topic.

Each line (ended by `\\n`; a `\\r` before it is dropped) is a record with a null key and the
line as a string value (schema `string`), converted by the connector's converters, timestamped
with the wall clock, passed through the transforms, and sent with our idempotent producer.

Neither lost nor repeated across a crash, without transactions:
- all lines of the task go to one partition of their topic (chosen at random the first time and
  kept in the offsets file), so the idempotent producer keeps them in file order there: if a
  line is in the log, every line before it is too;
- every record carries the header `raftkafka.connect.source` = `["<connector>",<end position>]`;
- the offsets file holds `{"position": P}` (Kafka's name: the byte after the last line known to
  be delivered), written only after the producer acknowledged everything before P, and per
  topic the partition and the offset from which later records of ours can be found;
- on start, the task reads that partition from that offset to its end and moves P to the
  largest position it finds in the header: those lines are in the topic, the rest are sent.
"""
from __future__ import annotations

import json

from raftkafka.client import Consumer, Producer
from raftkafka.client.offsets import list_offsets
from raftkafka.connect.converters import STRING_SCHEMA
from raftkafka.connect.delivery import Deliveries
from raftkafka.connect.offset_file import OffsetFile
from raftkafka.connect.records import ConnectRecord
from raftkafka.connect.transforms import apply_chain
from raftkafka.connect.worker_config import ConnectorConfig, WorkerConfig

__all__ = ["FileSourceTask", "POSITION_HEADER", "split_lines"]

POSITION_HEADER = "raftkafka.connect.source"
_READ_CHUNK = 1 << 16
_IDLE_WAIT = 0.2  # s between looks at a file with nothing new
_MAX_UNFLUSHED = 50_000  # records sent before the offsets are flushed regardless of the interval


def split_lines(buffer: bytes, start: int) -> tuple[list[tuple[str, int]], int]:
    """Complete lines of `buffer` (read from file position `start`) as (text, position after its
    newline), and how many bytes they used (a partial last line stays for the next read)."""
    lines, used = [], 0
    while True:
        end = buffer.find(b"\n", used)
        if end < 0:
            return lines, used
        raw = buffer[used:end]
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        lines.append((raw.decode("utf-8", "replace"), start + end + 1))
        used = end + 1


class FileSourceTask:
    def __init__(self, env, connector: ConnectorConfig, worker: WorkerConfig, offsets: OffsetFile,
                 producer: Producer, consumer_kwargs: dict, log):
        self.env = env
        self.connector = connector
        self.file = connector.properties["file"].strip()
        self.topic = connector.properties["topic"].strip()
        self.batch_size = int(connector.properties.get("batch.size", "2000"))
        self.worker = worker
        self.offsets = offsets
        self.producer = producer
        self.consumer_kwargs = consumer_kwargs
        self.log = log
        self.partition_key = {"filename": self.file}  # Kafka's source partition for this file
        self._header_prefix = b"[%s," % json.dumps(connector.name).encode()
        stored = offsets.get(connector.name, self.partition_key) or {}
        try:
            self.position = int(stored.get("position", 0))
            # topic -> {"partition": p, "scan_from": offset}
            self.topics: dict[str, dict] = {t: {"partition": int(w["partition"]), "scan_from": int(w["scan_from"])}
                                            for t, w in stored.get("raftkafka.topics", {}).items()}
        except (KeyError, TypeError, ValueError, AttributeError):
            raise ValueError(f"the offsets file's entry for {connector.name} is damaged: {stored!r}") from None

    # ------------------------------------------------------------------ recovery

    async def recover(self) -> None:
        """Move the position past lines an earlier run delivered but did not record."""
        for topic, where in sorted(self.topics.items()):
            found, end = await self._scan(topic, where["partition"], where["scan_from"])
            if found > self.position:
                self.log(f"{self.connector.name}: lines up to position {found} of {self.file} were already "
                         f"in {topic}; resuming there")
                self.position = found
            where["scan_from"] = end
        await self._store()

    async def _scan(self, topic: str, partition: int, start: int) -> tuple[int, int]:
        tp = (topic, partition)
        found = -1
        async with Consumer(self.env, self.worker.bootstrap_servers, **self.consumer_kwargs) as consumer:
            end = (await consumer.end_offsets([tp]))[tp]
            if start >= end:
                return found, end
            consumer.assign([tp])
            consumer.seek(tp, start)
            while await consumer.position(tp) < end:
                for record in await consumer.poll(1.0):
                    for key, value in record.headers:
                        if key == POSITION_HEADER and value:
                            found = max(found, self._position_in(value))
        return found, end

    def _position_in(self, header: bytes) -> int:
        try:
            name, position = json.loads(header)
        except (ValueError, TypeError):
            return -1
        return position if name == self.connector.name and isinstance(position, int) else -1

    # ------------------------------------------------------------------ running

    async def run(self) -> None:
        await self.recover()
        deliveries = Deliveries()
        next_flush = self.env.now() + self.worker.flush_interval
        pending_position = self.position  # the position once everything sent is acknowledged
        waiting_logged = False
        buffer, buffer_start = b"", self.position
        while True:
            try:
                with open(self.file, "rb") as f:
                    f.seek(buffer_start + len(buffer))
                    chunk = f.read(_READ_CHUNK)
                waiting_logged = False
            except FileNotFoundError:
                if not waiting_logged:
                    self.log(f"{self.connector.name}: couldn't find file {self.file}, waiting for it to be created")
                    waiting_logged = True
                chunk = b""
            buffer += chunk
            lines, used = split_lines(buffer, buffer_start)
            lines = lines[: self.batch_size]
            if lines:
                used = lines[-1][1] - buffer_start
            buffer, buffer_start = buffer[used:], buffer_start + used
            for text, end in lines:
                await self._send(text, end, deliveries)
                pending_position = end
            deliveries.raise_error()
            now = self.env.now()
            if now >= next_flush or deliveries.sent >= _MAX_UNFLUSHED:
                await self._flush(deliveries, pending_position)
                deliveries = Deliveries()
                next_flush = now + self.worker.flush_interval
            if not chunk and not lines:
                await self.env.sleep(_IDLE_WAIT)

    async def _send(self, text: str, end: int, deliveries: Deliveries) -> None:
        record = ConnectRecord(self.topic, None, None, None, STRING_SCHEMA, text, self.env.wall_ms())
        if self.connector.transforms:
            record = apply_chain(self.connector.transforms, record)
        where = self.topics.get(record.topic)
        partition = where["partition"] if where is not None else await self._partition_of(record.topic)
        key = self.connector.key_converter.from_connect(record.topic, record.key_schema, record.key)
        value = self.connector.value_converter.from_connect(record.topic, record.value_schema, record.value)
        header = b"%s%d]" % (self._header_prefix, end)
        future = await self.producer.send(record.topic, value, key, partition=partition,
                                          headers=(*record.headers, (POSITION_HEADER, header)),
                                          timestamp_ms=record.timestamp)
        deliveries.track(future)

    async def _partition_of(self, topic: str) -> int:
        where = self.topics.get(topic)
        if where is None:
            # First record for this topic: fix its partition and where a later recovery starts
            # reading, durably, before anything is sent there.
            partitions = await self.producer.partitions_for(topic)
            partition = partitions[self.env.rng.randrange(len(partitions))]
            tp = (topic, partition)
            end = (await list_offsets(self.producer.cluster, {tp: -1}))[tp][0]
            where = self.topics[topic] = {"partition": partition, "scan_from": end}
            await self._store()
        return where["partition"]

    async def _flush(self, deliveries: Deliveries, position: int) -> None:
        """Wait for every record sent, then record the position they bring us to."""
        await self.producer.flush()
        deliveries.raise_error()
        for (topic, partition), offset in deliveries.acked.items():
            where = self.topics.get(topic)
            if where is not None and where["partition"] == partition:
                where["scan_from"] = max(where["scan_from"], offset + 1)
        if position != self.position or deliveries.acked:
            self.position = position
            await self._store()

    async def _store(self) -> None:
        await self.offsets.put(self.connector.name, self.partition_key,
                               {"position": self.position, "raftkafka.topics": self.topics})
