"""The source's view of a cluster: partitions, offsets, ranged reads and raw produce.

`LogClient` is the small interface the readers and writers use; tests of the
pure parts fake it. `RemoteLogClient` implements it over the Kafka protocol with
raftkafka's own client pieces (`raftkafka.client.Cluster` for bootstrap,
metadata and pooled connections; `wire` for messages and record batches).

Spark calls us from plain threads (driver runner, executor workers), so a
`RemoteLogClient` runs one trio loop in a daemon thread and every call hops into
it with `trio.from_thread.run`. Spark reuses worker processes, so clients are
cached per (bootstrap, client id) in a module global (`shared_client`): the
second task of a worker pays no connection set-up. Every call is bounded by the
request timeout (reference spark.md §3.7-8: a query must stay stoppable).
"""
from __future__ import annotations

import threading
from typing import Iterator, Protocol

import trio

from raftkafka.client.cluster import Cluster
from raftkafka.client.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError, error_for
from spark_source.offsets import PartitionOffsets, TopicPartition
from storage.env import RealEnv
from wire.batch_header import HEADER_SIZE, iter_batches
from wire.error_codes import ErrorCode
from wire.protocol import CreateTopicsRequest, FetchRequest, ListOffsetsRequest, ProduceRequest

__all__ = ["LogClient", "FetchChunk", "RemoteLogClient", "AmbiguousWriteError", "shared_client", "iter_batch_records",
           "EARLIEST_TS", "LATEST_TS"]

EARLIEST_TS = -2
LATEST_TS = -1
_RETRY_CODES = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.NOT_ENOUGH_REPLICAS,
                ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.REQUEST_TIMED_OUT}


class AmbiguousWriteError(KafkaError):
    """A produce request may or may not have been appended (connection lost, timeout)."""


class FetchChunk:
    """Raw record-batch bytes from one Fetch of one partition, plus the log's bounds."""

    __slots__ = ("records", "high_watermark", "log_start_offset", "error")

    def __init__(self, records: bytes, high_watermark: int, log_start_offset: int, error: int = 0):
        self.records = records
        self.high_watermark = high_watermark
        self.log_start_offset = log_start_offset
        self.error = error


class LogClient(Protocol):
    def partitions(self, topics: list[str] | None) -> dict[str, list[int]]:
        """Partition ids per topic; None = every non-internal topic. Unknown topics are left out."""
        ...

    def list_offsets(self, tps: list[TopicPartition], timestamp: int) -> PartitionOffsets:
        """-2 → log start, -1 → high watermark, t ≥ 0 → first offset with timestamp ≥ t (-1 if none)."""
        ...

    def fetch(self, tp: TopicPartition, offset: int, max_bytes: int) -> FetchChunk: ...

    def produce(self, tp: TopicPartition, batch: bytes) -> int:
        """Append one record batch with acks=all; its base offset. Raises AmbiguousWriteError if unsure."""
        ...


class RemoteLogClient:
    def __init__(self, bootstrap_servers: str, *, client_id: str = "raftkafka-spark",
                 request_timeout_ms: int = 30_000, retry_backoff_ms: int = 100):
        self.bootstrap_servers = bootstrap_servers
        self.timeout = request_timeout_ms / 1000
        self.backoff = retry_backoff_ms / 1000
        self.client_id = client_id
        self._token = None
        self._cluster: Cluster | None = None
        self._stop: trio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="raftkafka-spark-io", daemon=True)
        self._thread.start()
        if not self._ready.wait(self.timeout + 5) or self._error is not None:
            raise KafkaConnectionError(f"could not start the client for {bootstrap_servers}: {self._error!r}")

    # ------------------------------------------------------------------ loop thread

    def _main(self) -> None:
        try:
            trio.run(self._serve)
        except BaseException as exc:  # surfaced to the constructor
            self._error = exc
            self._ready.set()

    async def _serve(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        async with trio.open_nursery() as nursery:
            self._cluster = Cluster(RealEnv(), nursery, self.bootstrap_servers, client_id=self.client_id,
                                    request_timeout=self.timeout, retry_backoff=self.backoff)
            self._ready.set()
            await self._stop.wait()
            await self._cluster.aclose()
            nursery.cancel_scope.cancel()

    def _call(self, afn, *args):
        if self._stop is None or self._stop.is_set():
            raise KafkaConnectionError("client closed")
        return trio.from_thread.run(afn, *args, trio_token=self._token)

    def close(self) -> None:
        if self._stop is not None and not self._stop.is_set():
            trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
            self._thread.join(5)

    # ------------------------------------------------------------------ LogClient

    def partitions(self, topics: list[str] | None) -> dict[str, list[int]]:
        return self._call(self._partitions, topics)

    def list_offsets(self, tps: list[TopicPartition], timestamp: int) -> PartitionOffsets:
        return self._call(self._list_offsets, sorted(tps), timestamp)

    def fetch(self, tp: TopicPartition, offset: int, max_bytes: int = 4 << 20) -> FetchChunk:
        return self._call(self._fetch, tp, offset, max_bytes)

    def produce(self, tp: TopicPartition, batch: bytes) -> int:
        return self._call(self._produce, tp, batch)

    def ensure_topic(self, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> None:
        """Create `name` unless it exists (replication factor: the cluster default)."""
        self._call(self._ensure_topic, name, partitions, dict(configs or {}))

    # ------------------------------------------------------------------ in the trio thread

    async def _retrying(self, what: str, attempt):
        """Run `attempt()` until it returns, retrying retriable broker errors until the deadline."""
        deadline = trio.current_time() + self.timeout
        while True:
            try:
                return await attempt()
            except KafkaError as exc:
                retriable = exc.retriable or exc.code in _RETRY_CODES or isinstance(exc, KafkaConnectionError)
                if isinstance(exc, AmbiguousWriteError) or not retriable or trio.current_time() >= deadline:
                    raise
                await trio.sleep(self.backoff)
                try:
                    await self._cluster.refresh()
                except KafkaError:
                    pass

    async def _partitions(self, topics):
        cluster = self._cluster
        if topics is None:
            cluster.want_all_topics = True
            await cluster.refresh()
            found = {name: info for name, info in cluster.topics.items() if not info.is_internal}
        else:
            await cluster.refresh(topics)
            found = {name: cluster.topics[name] for name in topics if name in cluster.topics}
        return {name: sorted(info.partitions) for name, info in sorted(found.items())
                if info.error == 0 and info.partitions}

    async def _ensure_topic(self, name, partitions, configs):
        request = CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=-1, assignments=[],
            configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v) for k, v in sorted(configs.items())])],
            timeout_ms=int(self.timeout * 1000))
        async def attempt():
            response = await self._cluster.request_any(request)
            code = response.topics[0].error_code
            if code and code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise error_for(code, response.topics[0].error_message, context=f"create topic {name!r}")
        await self._retrying("create topic", attempt)
        await self._cluster.topic(name)  # wait until the metadata shows its partitions

    async def _leader(self, tp: TopicPartition) -> int:
        leader = self._cluster.leader(*tp)
        if leader < 0:
            await self._cluster.refresh([tp[0]])
            leader = self._cluster.leader(*tp)
            if leader < 0:
                raise error_for(ErrorCode.LEADER_NOT_AVAILABLE, context=f"{tp[0]}-{tp[1]}")
        return leader

    async def _list_offsets(self, tps, timestamp):
        await self._cluster.refresh(sorted({t for t, _ in tps}))
        out: PartitionOffsets = {}
        for tp in tps:  # one partition per request keeps leader routing and retries simple
            async def attempt(tp=tp):
                leader = await self._leader(tp)
                request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
                    ListOffsetsRequest.ListOffsetsTopic(name=tp[0], partitions=[
                        ListOffsetsRequest.ListOffsetsPartition(partition_index=tp[1], timestamp=timestamp)])])
                response = await self._cluster.send(leader, request)
                p = response.topics[0].partitions[0]
                if p.error_code:
                    raise error_for(p.error_code, context=f"ListOffsets {tp[0]}-{tp[1]}")
                return p.offset
            out[tp] = await self._retrying("list offsets", attempt)
        return out

    async def _fetch(self, tp, offset, max_bytes):
        async def attempt():
            leader = await self._leader(tp)
            request = FetchRequest(replica_id=-1, max_wait_ms=200, min_bytes=1, max_bytes=max_bytes,
                                   isolation_level=0, topics=[FetchRequest.FetchTopic(topic=tp[0], partitions=[
                                       FetchRequest.FetchPartition(partition=tp[1], fetch_offset=offset,
                                                                   log_start_offset=-1,
                                                                   partition_max_bytes=max_bytes)])])
            response = await self._cluster.send(leader, request, timeout=1.0)
            if response.error_code:
                raise error_for(response.error_code, context="Fetch")
            p = response.responses[0].partitions[0]
            if p.error_code and p.error_code != ErrorCode.OFFSET_OUT_OF_RANGE:
                raise error_for(p.error_code, context=f"Fetch {tp[0]}-{tp[1]}")
            return FetchChunk(bytes(p.records or b""), p.high_watermark, p.log_start_offset, p.error_code)
        return await self._retrying("fetch", attempt)

    async def _produce(self, tp, batch):
        async def attempt():
            leader = await self._leader(tp)
            request = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=int(self.timeout * 1000), topic_data=[
                ProduceRequest.TopicProduceData(name=tp[0], partition_data=[
                    ProduceRequest.PartitionProduceData(index=tp[1], records=batch)])])
            try:
                response = await self._cluster.send(leader, request)
            except KafkaConnectionError as exc:
                if "send to" in str(exc):  # never left this process: safe to retry
                    raise
                raise AmbiguousWriteError(f"produce to {tp[0]}-{tp[1]}: {exc}") from exc
            except KafkaTimeoutError as exc:
                raise AmbiguousWriteError(f"produce to {tp[0]}-{tp[1]}: {exc}") from exc
            p = response.responses[0].partition_responses[0]
            if p.error_code in (ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
                raise AmbiguousWriteError(f"produce to {tp[0]}-{tp[1]}: {ErrorCode.of(p.error_code).name}",
                                          p.error_code)
            if p.error_code:
                raise error_for(p.error_code, p.error_message, context=f"Produce {tp[0]}-{tp[1]}")
            return p.base_offset
        return await self._retrying("produce", attempt)


def iter_batch_records(data: bytes) -> Iterator[tuple[object, bytes]]:
    """(header, payload) for each whole batch in `data` (a trailing partial batch is ignored)."""
    view = memoryview(data)
    for pos, header in iter_batches(data, 0):
        yield header, bytes(view[pos + HEADER_SIZE: pos + header.size])


_clients: dict[tuple[str, str, int], RemoteLogClient] = {}
_clients_lock = threading.Lock()


def shared_client(bootstrap_servers: str, client_id: str, request_timeout_ms: int) -> RemoteLogClient:
    """One client per process and settings (Spark reuses its Python workers across tasks)."""
    key = (bootstrap_servers, client_id, request_timeout_ms)
    with _clients_lock:
        client = _clients.get(key)
        if client is None or client._stop is None or client._stop.is_set():
            client = _clients[key] = RemoteLogClient(bootstrap_servers, client_id=client_id,
                                                     request_timeout_ms=request_timeout_ms)
        return client
