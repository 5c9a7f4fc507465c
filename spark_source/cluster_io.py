"""The source's view of a cluster: partitions, offsets, ranged reads and idempotent writes.

`LogClient` is the small interface the readers, the initial-offsets store and
the writers use; the pure tests fake it (tests/spark/fake_log.py).
`RemoteLogClient` implements it with raftkafka's own client, through its
blocking wrappers (Spark calls us from plain threads):

- a `BlockingAdmin` for topics and ListOffsets;
- ranged reads for Arrow rows (`fetch_raw`): a `RangeFetcher` in the admin's
  loop sends Fetch requests straight to each partition's leader and hands the
  record batches back undecoded (spark_source.arrow_batches decodes them);
- pooled `BlockingConsumer`s for the other reads (`fetch`: the sink's ledger and
  rescans): assign + seek + poll, with auto_offset_reset=none so a position the
  log no longer holds is reported to us (data loss), never silently reset;
- the sink's writes (`produce_sections`, or `open_sections` while its input still
  arrives): record sections the sink encoded itself, appended as whole batches by an
  idempotent `BatchAppender` (acks=all) in the admin's loop: the broker drops a batch
  re-sent after a lost answer or a leader change, so retries inside a task never
  duplicate a record;
- one idempotent `BlockingProducer` (acks=all) for single records (the initial-offsets store).

The `kafka.*` options (`ClientTuning`) override those consumer and producer
defaults, name the consumers' group (they still assign and commit nothing), and
set how often a failed ListOffsets is tried again (fetchOffset.*).

Spark reuses its Python worker processes across tasks, so clients are cached
per (bootstrap, client id, timeout, security, tuning) in a module global (`shared_client`).
"""
from __future__ import annotations

import math
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Protocol

import trio

from raftkafka.client.admin import NewTopic
from raftkafka.client.blocking import BlockingAdmin, BlockingConsumer, BlockingProducer
from raftkafka.client.errors import BrokerResponseError, KafkaError, KafkaTimeoutError
from raftkafka.client.security import ClientSecurity
from raftkafka.client.fetcher import ConsumerRecord
from spark_source.batch_appender import AmbiguousWriteError, BatchAppender, Section
from spark_source.client_properties import ClientTuning
from spark_source.offsets import PartitionOffsets, TopicPartition
from spark_source.range_fetch import RangeFetcher, RawFetched
from wire.compression import Compression
from wire.error_codes import ErrorCode
from wire.records import SimpleRecord

__all__ = ["LogClient", "SectionWriter", "Fetched", "RawFetched", "RemoteLogClient", "AmbiguousWriteError",
           "appending", "shared_client", "scan", "EARLIEST_TS", "LATEST_TS"]

EARLIEST_TS = -2
LATEST_TS = -1


@dataclass
class Fetched:
    """Records at or after the offset asked for, and the position after them.

    `next_offset` may pass the last record (control batches, compacted-away
    records). `out_of_range`: the log does not hold the offset asked for (below
    its start, or above the end of a leader that has not caught up).
    """

    records: list[ConsumerRecord]
    next_offset: int
    out_of_range: bool = False


class LogClient(Protocol):
    def partitions(self, topics: list[str] | None) -> dict[str, list[int]]:
        """Partition ids per topic; None = every non-internal topic. Unknown topics are left out."""
        ...

    def list_offsets(self, tps: list[TopicPartition], timestamp: int) -> PartitionOffsets:
        """-2 → log start, -1 → high watermark, t ≥ 0 → first offset with timestamp ≥ t (-1 if none)."""
        ...

    def fetch(self, tp: TopicPartition, offset: int, *, max_records: int, max_wait_s: float) -> Fetched:
        """Committed records from `offset` on, waiting up to `max_wait_s` for some."""
        ...

    def fetch_raw(self, tp: TopicPartition, offset: int, *, max_wait_s: float,
                  until: int | None = None) -> RawFetched:
        """Record batches from `offset` on, undecoded, waiting up to `max_wait_s` for some.
        `until`: the caller reads on up to that offset (a client may fetch ahead)."""
        ...

    def prefetch_raw(self, tp: TopicPartition, offset: int, *, max_wait_s: float) -> None:
        """A hint: `fetch_raw` of `offset` follows soon; a client may start fetching it now."""
        ...

    def produce(self, rows: list[tuple[TopicPartition, SimpleRecord]]) -> None:
        """Append each record to its partition, in order per partition, acks=all, idempotently.
        Raises AmbiguousWriteError when any record's outcome is unknown."""
        ...

    def produce_sections(self, sections: list[Section], timestamp_ms: int) -> None:
        """Append each (partition, records section, count) as one batch, in order per partition,
        acks=all, idempotently (`arrow_encode` builds sections). Raises AmbiguousWriteError when
        any batch's outcome is unknown."""
        ...

    def open_sections(self, timestamp_ms: int) -> "SectionWriter":
        """`produce_sections` for sections given a few at a time (`add`): they are appended as
        they come, in order per partition; `close()` waits for all of them and raises as
        `produce_sections` does."""
        ...

    def ensure_topic(self, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> None:
        """Create `name` unless it exists (replication factor: the cluster default)."""
        ...


class SectionWriter(Protocol):
    def add(self, sections: list[Section]) -> None: ...

    def close(self) -> None: ...


@contextmanager
def appending(client: LogClient, timestamp_ms: int) -> Iterator[SectionWriter]:
    """`client.open_sections` for a with-block, closed at its end (raising as `close` does). When
    the block raises, what it added lands (or not) before that error goes on: a retry that
    rescans then sees all of it."""
    writer = client.open_sections(timestamp_ms)
    try:
        yield writer
    except BaseException:
        try:
            writer.close()
        except Exception:  # noqa: BLE001 - the block's own error is the one to report
            pass
        raise
    writer.close()


def scan(client: LogClient, tp: TopicPartition, start: int, end: int, *,
         timeout_s: float = 30.0) -> Iterator[ConsumerRecord]:
    """Records of `tp` in [start, end), where `end` is at most the high watermark read before.

    An empty poll is not the end (the first one may only have loaded metadata): it keeps
    fetching, for up to `timeout_s` without progress, then raises KafkaTimeoutError.
    """
    position, stalled_since = start, None
    while position < end:
        fetched = client.fetch(tp, position, max_records=10_000, max_wait_s=0.05)
        if fetched.out_of_range:
            log_start = client.list_offsets([tp], EARLIEST_TS)[tp]
            if log_start > position:  # retention removed the beginning: nothing there to return
                position = log_start
                continue
        for record in fetched.records:
            if record.offset < end:
                yield record
        if fetched.next_offset > position:
            position, stalled_since = fetched.next_offset, None
            continue
        now = time.monotonic()
        stalled_since = stalled_since or now
        if now - stalled_since >= timeout_s:
            raise KafkaTimeoutError(f"{tp[0]}-{tp[1]}: no records past offset {position} in {timeout_s:.0f}s, "
                                    f"below the high watermark {end} read before")


class RemoteLogClient:
    def __init__(self, bootstrap_servers: str, *, client_id: str = "raftkafka-spark",
                 request_timeout_ms: int = 30_000, retry_backoff_ms: int = 100,
                 security: tuple[tuple[str, str], ...] = (), tuning: ClientTuning = ClientTuning()):
        self.bootstrap_servers = bootstrap_servers
        self.client_id = client_id
        self.tuning = tuning
        self._settings = dict(client_id=client_id, request_timeout_ms=request_timeout_ms,
                              retry_backoff_ms=retry_backoff_ms)
        if security:  # built here, in the process that connects (an SSLContext does not pickle)
            self._settings["security"] = ClientSecurity.from_properties(dict(security))
        self._admin = BlockingAdmin(bootstrap_servers, **self._settings)
        self._consumer_settings = dict(self._settings, auto_offset_reset="none", fetch_max_wait_ms=200,
                                       max_partition_fetch_bytes=4 << 20, max_poll_records=20_000,
                                       group_id=tuning.group_id, enable_auto_commit=False)
        self._consumer_settings.update(tuning.consumer)
        self._producer_settings = dict(self._settings, acks="all", enable_idempotence=True, linger_ms=5,
                                       batch_size=256 * 1024)
        self._producer_settings.update(tuning.producer)
        p = self._producer_settings
        self._appender = BatchAppender(
            acks=-1 if p["acks"] in ("all", "-1") else int(p["acks"]),
            idempotent=p["enable_idempotence"] and p["acks"] in ("all", "-1"),
            compression=Compression[str(p.get("compression", "none")).upper()],
            request_timeout_s=p["request_timeout_ms"] / 1000,
            delivery_timeout_s=p.get("delivery_timeout_ms", 120_000) / 1000,
            retry_backoff_s=p["retry_backoff_ms"] / 1000)
        self._lock = threading.Lock()
        self._idle_consumers: list[BlockingConsumer] = []
        self._all_consumers: list[BlockingConsumer] = []
        self._producer: BlockingProducer | None = None
        c = self._consumer_settings
        self._range_fetcher = RangeFetcher(
            max_bytes=c.get("fetch_max_bytes", 52_428_800), partition_max_bytes=c["max_partition_fetch_bytes"],
            min_bytes=c.get("fetch_min_bytes", 1), read_committed=c.get("isolation_level") == "read_committed",
            retry_backoff_s=c["retry_backoff_ms"] / 1000)
        self.closed = False

    def close(self) -> None:
        with self._lock:
            self.closed = True
            wrappers = [*self._all_consumers, *([self._producer] if self._producer else []), self._admin]
            self._idle_consumers, self._all_consumers, self._producer = [], [], None
        for wrapper in wrappers:
            try:
                wrapper.close()
            except KafkaError:
                pass  # closing: nothing left to report to

    # ------------------------------------------------------------------ metadata and offsets

    def partitions(self, topics: list[str] | None) -> dict[str, list[int]]:
        return self._admin.run_in_loop(_partitions, None if topics is None else sorted(set(topics)))

    def list_offsets(self, tps: list[TopicPartition], timestamp: int) -> PartitionOffsets:
        if not tps:
            return {}
        attempt = 0
        while True:  # fetchOffset.numRetries / retryIntervalMs, as Spark's offset reader
            try:
                found = self._admin.list_offsets({tuple(tp): timestamp for tp in sorted(tps)})
                break
            except KafkaError:
                if attempt >= self.tuning.offset_retries:
                    raise
                attempt += 1
                time.sleep(self.tuning.offset_retry_interval_ms / 1000)
        return {tp: found[tp][0] for tp in sorted(found)}

    def ensure_topic(self, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> None:
        self._admin.run_in_loop(_ensure_topic, NewTopic(name, partitions, -1, dict(configs or {})))

    # ------------------------------------------------------------------ reads

    @contextmanager
    def _consumer(self):
        """An idle pooled consumer for the caller alone (a worker runs one task at a time; the
        driver may run several threads)."""
        with self._lock:
            consumer = self._idle_consumers.pop() if self._idle_consumers else None
        if consumer is None:
            consumer = BlockingConsumer(self.bootstrap_servers, **self._consumer_settings)
            with self._lock:
                self._all_consumers.append(consumer)
        try:
            yield consumer
        finally:
            with self._lock:
                if not self.closed:
                    self._idle_consumers.append(consumer)

    def fetch(self, tp: TopicPartition, offset: int, *, max_records: int = 20_000, max_wait_s: float = 0.2) -> Fetched:
        max_records = min(max_records, self._consumer_settings["max_poll_records"])
        with self._consumer() as consumer:
            return consumer.run_in_loop(_fetch, tuple(tp), offset, max_records, max_wait_s)

    def fetch_raw(self, tp: TopicPartition, offset: int, *, max_wait_s: float = 0.2,
                  until: int | None = None) -> RawFetched:
        return self._admin.run_in_loop(self._fetch_raw, tuple(tp), offset, max_wait_s, until)

    async def _fetch_raw(self, admin, tp, offset, max_wait_s, until) -> RawFetched:
        return await self._range_fetcher.fetch(admin.cluster, tp, offset, max_wait_s, until)

    def prefetch_raw(self, tp: TopicPartition, offset: int, *, max_wait_s: float = 0.2) -> None:
        self._admin.run_in_loop(lambda admin: self._range_fetcher.fetch_ahead(admin.cluster, tuple(tp), offset,
                                                                               max_wait_s))

    # ------------------------------------------------------------------ writes

    def produce(self, rows: list[tuple[TopicPartition, SimpleRecord]]) -> None:
        if not rows:
            return
        with self._lock:
            if self._producer is None:
                self._producer = BlockingProducer(self.bootstrap_servers, **self._producer_settings)
            producer = self._producer
        producer.run_in_loop(_send_all, rows)

    def produce_sections(self, sections: list[Section], timestamp_ms: int) -> None:
        if sections:
            self._admin.run_in_loop(self._append, sections, timestamp_ms)

    async def _append(self, admin, sections, timestamp_ms) -> None:
        await self._appender.append(admin.cluster, sections, timestamp_ms)

    def open_sections(self, timestamp_ms: int) -> "_StreamedSections":
        return _StreamedSections(self._admin, self._appender, timestamp_ms)


class _StreamedSections:
    """An `append_from` running in the admin's loop, fed from the caller's thread."""

    def __init__(self, admin: BlockingAdmin, appender: BatchAppender, timestamp_ms: int):
        self._admin = admin
        self._finished = trio.Event()
        self._error: BaseException | None = None
        self._send = admin.run_in_loop(self._start, appender, timestamp_ms)

    def _start(self, admin, appender: BatchAppender, timestamp_ms: int) -> trio.MemorySendChannel:
        send, receive = trio.open_memory_channel(math.inf)

        async def run() -> None:
            try:
                await appender.append_from(admin.cluster, receive, timestamp_ms)
            except Exception as exc:  # raised to the caller by close()
                self._error = exc
            finally:
                self._finished.set()

        trio.lowlevel.spawn_system_task(run)
        return send

    def add(self, sections: list[Section]) -> None:
        if sections:
            self._admin.run_in_loop(lambda _: [self._send.send_nowait(section) for section in sections])

    def close(self) -> None:
        async def finish(_) -> None:
            self._send.close()
            await self._finished.wait()

        self._admin.run_in_loop(finish)
        if self._error is not None:
            raise self._error


# ---------------------------------------------------------------------- routines run in a client's loop


async def _partitions(admin, topics):
    if topics is None:
        found = await admin.list_topics()
    else:
        found = {}
        for name in topics:
            try:
                found.update(await admin.describe_topics([name]))
            except BrokerResponseError:
                pass  # unknown (or not ready yet): left out, as documented
    return {name: sorted(info.partitions) for name, info in sorted(found.items()) if info.partitions}


async def _ensure_topic(admin, topic: NewTopic):
    try:  # a metadata request, not a CreateTopics through the controller, when it exists (the usual case)
        if (await admin.describe_topics([topic.name]))[topic.name].partitions:
            return
    except BrokerResponseError:
        pass  # unknown: create it
    error = (await admin.create_topics([topic]))[topic.name]
    if error is not None and error.code != ErrorCode.TOPIC_ALREADY_EXISTS:
        raise error
    await admin.cluster.topic(topic.name)  # until the metadata shows its partitions


async def _fetch(consumer, tp, offset, max_records, max_wait_s):
    if consumer.assignment() != {tp}:
        consumer.assign([tp])
    if consumer.fetch.partitions[tp].position != offset:
        consumer.seek(tp, offset)  # otherwise keep what an earlier poll buffered past max_records
    try:
        records = await consumer.poll(max_wait_s, max_records)
    except BrokerResponseError as exc:
        if exc.code != ErrorCode.OFFSET_OUT_OF_RANGE:
            raise
        consumer.seek(tp, offset)
        return Fetched([], offset, True)
    return Fetched(records, await consumer.position(tp))


async def _send_all(producer, rows):
    futures = []
    try:
        for (topic, partition), rec in rows:
            futures.append(await producer.send(topic, rec.value, rec.key, partition=partition, headers=rec.headers,
                                               timestamp_ms=rec.timestamp))
    except KafkaError as exc:
        await producer.flush()  # what was queued still goes out; the caller must treat it as unknown
        raise AmbiguousWriteError(f"write stopped after {len(futures)} of {len(rows)} records: {exc}") from exc
    await producer.flush()
    failed = [f.exception() for f in futures if f.exception() is not None]
    if failed:
        raise AmbiguousWriteError(f"{len(failed)} of {len(rows)} records not acknowledged: {failed[0]}")


_clients: dict[tuple, RemoteLogClient] = {}
_clients_lock = threading.Lock()


def shared_client(bootstrap_servers: str, client_id: str, request_timeout_ms: int,
                  security: tuple[tuple[str, str], ...] = (),
                  tuning: ClientTuning = ClientTuning()) -> RemoteLogClient:
    """One client per process and settings (Spark reuses its Python workers across tasks)."""
    key = (bootstrap_servers, client_id, request_timeout_ms, security, tuning)
    with _clients_lock:
        client = _clients.get(key)
        if client is None or client.closed:
            client = _clients[key] = RemoteLogClient(bootstrap_servers, client_id=client_id,
                                                     request_timeout_ms=request_timeout_ms, security=security,
                                                     tuning=tuning)
        return client
