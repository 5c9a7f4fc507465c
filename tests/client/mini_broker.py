"""A small in-process Kafka "cluster" for client tests (until broker/ serves groups).

Several broker ids share one state: partition logs in memory (batch bytes with
offsets rewritten, as a real broker stores them), a leader per partition, an
idempotence table, committed offsets and a simple eager group coordinator.
It speaks the real protocol through the wire codecs, so our client and
librdkafka (served over TCP) can both talk to it. Faults are injected with
`fail_next(api_key, error_code, count)` and `move_leader(...)`.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import trio

from wire.batch_header import iter_batches, set_base_offset
from wire.error_codes import ErrorCode as E
from wire.errors import DecodeError
from wire.protocol import *  # noqa: F403 - message classes
from wire.protocol import API_VERSIONS, ApiKey, FrameReader, decode_request, encode_response

from tests.client.mini_groups import MiniGroups


@dataclass
class PartitionLog:
    leader: int
    batches: list = field(default_factory=list)  # [(base_offset, next_offset, max_timestamp, bytes)]
    end: int = 0
    start: int = 0
    producers: dict = field(default_factory=dict)  # pid -> (epoch, last sequence, last base offset)


class MiniCluster:
    def __init__(self, env, node_ids=(1,), *, hosts=None, auto_create=False):
        self.env = env
        self.node_ids = list(node_ids)
        self.addresses = {n: (hosts or {}).get(n, (f"b{n}", 9092)) for n in self.node_ids}
        self.topics: dict[str, dict[int, PartitionLog]] = {}
        self.configs: dict[str, dict[str, str]] = {}
        self.auto_create = auto_create
        self.appended = trio.Event()
        self.faults: dict[int, list[int]] = {}
        self.requests: list[tuple[int, int, int]] = []  # (node, api_key, version)
        self.next_pid = 1000
        self.groups = MiniGroups(env)
        self.cluster_id = "mini-cluster"

    # ------------------------------------------------------------------ setup

    def create_topic(self, name, partitions=1, leaders=None, configs=None):
        leaders = leaders or [self.node_ids[p % len(self.node_ids)] for p in range(partitions)]
        self.topics[name] = {p: PartitionLog(leaders[p]) for p in range(partitions)}
        self.configs[name] = dict(configs or {})

    def move_leader(self, topic, partition, node):
        self.topics[topic][partition].leader = node

    def fail_next(self, api_key, error_code, count=1):
        self.faults.setdefault(api_key, []).extend([error_code] * count)

    def _fault(self, api_key) -> int:
        queue = self.faults.get(api_key)
        return queue.pop(0) if queue else 0

    def records(self, topic, partition):
        from wire.records import iter_records
        return [r for _, _, _, data in self.topics[topic][partition].batches for r in iter_records(data)]

    async def serve(self, node_id, *, task_status=trio.TASK_STATUS_IGNORED):
        host, port = self.addresses[node_id]

        async def handler(stream):
            await self.handle_connection(node_id, stream)

        bound = await self.env.net.serve(host, port, handler, task_status=task_status)
        return bound

    async def serve_all(self, nursery):
        for node in self.node_ids:
            host, port = self.addresses[node]
            bound = await nursery.start(self.serve, node)
            self.addresses[node] = (host, bound)

    # ------------------------------------------------------------------ connection

    async def handle_connection(self, node, stream):
        reader = FrameReader()
        send_lock = trio.Lock()
        results: list = []  # answered in request order even when a fetch long-polls
        async with trio.open_nursery() as nursery:
            try:
                while True:
                    data = await stream.receive_some(1 << 16)
                    if not data:
                        break
                    reader.feed(data)
                    for frame in reader:
                        header, body = decode_request(frame)
                        self.requests.append((node, header.api_key, header.api_version))
                        slot = {"done": trio.Event(), "frame": None, "started": trio.Event()}
                        previous = results[-1]["started"] if results else None
                        results.append(slot)
                        nursery.start_soon(self._answer, node, header, body, slot, stream, results, send_lock,
                                           previous)
            except (trio.BrokenResourceError, trio.ClosedResourceError, DecodeError):
                pass
            nursery.cancel_scope.cancel()
        await stream.aclose()

    async def _answer(self, node, header, body, slot, stream, results, lock, previous):
        # As a Kafka broker, take a connection's requests in the order they came (two frames
        # read at once start as two tasks, which trio may run in either order); a long-poll
        # Fetch still lets those behind it start.
        if previous is not None:
            await previous.wait()
        slot["started"].set()
        method = getattr(self, "on_" + ApiKey(header.api_key).name.lower())
        response = await method(node, body, header.api_version)
        slot["frame"] = None if response is None else encode_response(header, response)
        slot["done"].set()
        await self._flush(stream, results, lock)

    async def _flush(self, stream, results, lock):
        async with lock:
            while results and results[0]["done"].is_set():
                slot = results.pop(0)
                if slot["frame"] is not None:
                    try:
                        await stream.send_all(slot["frame"])
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        return

    # ------------------------------------------------------------------ handlers

    async def on_api_versions(self, node, req, v):
        keys = [ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                for k, (lo, hi) in API_VERSIONS.items()]
        return ApiVersionsResponse(error_code=0, api_keys=keys, throttle_time_ms=0)

    async def on_metadata(self, node, req, v):
        names = sorted(self.topics) if req.topics is None else [t.name for t in req.topics]
        topics = []
        for name in names:
            if name not in self.topics and self.auto_create and req.allow_auto_topic_creation:
                self.create_topic(name, 1)
            parts = self.topics.get(name)
            if parts is None:
                topics.append(MetadataResponse.MetadataResponseTopic(
                    error_code=E.UNKNOWN_TOPIC_OR_PARTITION, name=name))
                continue
            topics.append(MetadataResponse.MetadataResponseTopic(error_code=0, name=name, partitions=[
                MetadataResponse.MetadataResponsePartition(
                    error_code=0, partition_index=p, leader_id=log.leader, replica_nodes=[log.leader],
                    isr_nodes=[log.leader]) for p, log in sorted(parts.items())]))
        brokers = [MetadataResponse.MetadataResponseBroker(node_id=n, host=h, port=p)
                   for n, (h, p) in sorted(self.addresses.items())]
        return MetadataResponse(throttle_time_ms=0, brokers=brokers, cluster_id=self.cluster_id,
                                controller_id=self.node_ids[0], topics=topics)

    def _log(self, node, topic, partition):
        log = self.topics.get(topic, {}).get(partition)
        if log is None:
            return None, E.UNKNOWN_TOPIC_OR_PARTITION
        if log.leader != node:
            return None, E.NOT_LEADER_OR_FOLLOWER
        return log, 0

    async def on_produce(self, node, req, v):
        out = []
        for t in req.topic_data:
            parts = []
            for p in t.partition_data:
                log, err = self._log(node, t.name, p.index)
                err = err or self._fault(ApiKey.PRODUCE)
                base = -1
                if not err:
                    err, base = self._append(log, bytes(p.records))
                parts.append(ProduceResponse.PartitionProduceResponse(index=p.index, error_code=err, base_offset=base))
            out.append(ProduceResponse.TopicProduceResponse(name=t.name, partition_responses=parts))
        if req.acks == 0:
            return None
        return ProduceResponse(responses=out, throttle_time_ms=0)

    def _append(self, log, data):
        buf = bytearray(data)
        batches = list(iter_batches(buf))
        base = log.end
        for pos, h in batches:
            if h.producer_id >= 0:
                epoch, last_seq, last_base = log.producers.get(h.producer_id, (h.producer_epoch, -1, -1))
                if h.base_sequence <= last_seq:
                    return E.DUPLICATE_SEQUENCE_NUMBER, last_base
                if h.base_sequence != last_seq + 1:
                    return E.OUT_OF_ORDER_SEQUENCE_NUMBER, -1
                log.producers[h.producer_id] = (h.producer_epoch, h.last_sequence, log.end)
            set_base_offset(buf, pos, log.end)
            log.batches.append((log.end, log.end + h.last_offset_delta + 1, h.max_timestamp,
                                bytes(buf[pos:pos + h.size])))
            log.end += h.last_offset_delta + 1
        self.appended.set()
        self.appended = trio.Event()
        return 0, base

    async def on_fetch(self, node, req, v):
        deadline = trio.current_time() + req.max_wait_ms / 1000
        while True:
            waiter = self.appended
            topics, size, errors = self._fetch_once(node, req)
            if size >= req.min_bytes or errors or trio.current_time() >= deadline:
                return FetchResponse(throttle_time_ms=0, error_code=0, responses=topics)
            with trio.move_on_at(deadline):
                await waiter.wait()

    def _fetch_once(self, node, req):
        topics, total, errors = [], 0, 0
        for t in req.topics:
            parts = []
            for p in t.partitions:
                log, err = self._log(node, t.topic, p.partition)
                err = err or self._fault(ApiKey.FETCH)
                chunks = []
                if not err and not log.start <= p.fetch_offset <= log.end:
                    err = E.OFFSET_OUT_OF_RANGE
                errors += bool(err)
                if not err:
                    size = 0
                    for base, nxt, _, data in log.batches:
                        if nxt > p.fetch_offset and (not chunks or size + len(data) <= p.partition_max_bytes):
                            chunks.append(data)
                            size += len(data)
                    total += size
                parts.append(FetchResponse.PartitionData(
                    partition_index=p.partition, error_code=err, high_watermark=log.end if log else -1,
                    last_stable_offset=log.end if log else -1, log_start_offset=log.start if log else -1,
                    aborted_transactions=None, records=b"".join(chunks)))
            topics.append(FetchResponse.FetchableTopicResponse(topic=t.topic, partitions=parts))
        return topics, total, errors

    async def on_list_offsets(self, node, req, v):
        topics = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                log, err = self._log(node, t.name, p.partition_index)
                offset = -1
                if not err:
                    if p.timestamp == -2:
                        offset = log.start
                    elif p.timestamp == -1:
                        offset = log.end
                    else:
                        offset = next((b for b, _, ts, _ in log.batches if ts >= p.timestamp), log.end)
                parts.append(ListOffsetsResponse.ListOffsetsPartitionResponse(
                    partition_index=p.partition_index, error_code=err, timestamp=-1, offset=offset))
            topics.append(ListOffsetsResponse.ListOffsetsTopicResponse(name=t.name, partitions=parts))
        return ListOffsetsResponse(throttle_time_ms=0, topics=topics)

    async def on_init_producer_id(self, node, req, v):
        self.next_pid += 1
        return InitProducerIdResponse(throttle_time_ms=0, error_code=0, producer_id=self.next_pid, producer_epoch=0)

    async def on_offset_for_leader_epoch(self, node, req, v):
        return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=[])

    # ------------------------------------------------------------------ groups

    def coordinator(self, group):
        return self.node_ids[zlib.crc32(group.encode()) % len(self.node_ids)]

    async def on_find_coordinator(self, node, req, v):
        n = self.coordinator(req.key)
        host, port = self.addresses[n]
        return FindCoordinatorResponse(throttle_time_ms=0, error_code=0, error_message=None,
                                       node_id=n, host=host, port=port)

    def __getattr__(self, name):
        # on_join_group, on_sync_group, ... live in MiniGroups.
        if name.startswith("on_") and hasattr(self.groups, name):
            return getattr(self.groups, name)
        raise AttributeError(name)

    # ------------------------------------------------------------------ admin

    async def on_create_topics(self, node, req, v):
        results = []
        for t in req.topics:
            err = E.TOPIC_ALREADY_EXISTS if t.name in self.topics else 0
            if not err and t.num_partitions <= 0:
                err = E.INVALID_PARTITIONS
            if not err and not req.validate_only:
                self.create_topic(t.name, t.num_partitions, configs={c.name: c.value for c in t.configs})
            results.append(CreateTopicsResponse.CreatableTopicResult(name=t.name, error_code=err, error_message=None))
        return CreateTopicsResponse(throttle_time_ms=0, topics=results)

    async def on_delete_topics(self, node, req, v):
        results = []
        for name in req.topic_names:
            err = 0 if self.topics.pop(name, None) is not None else E.UNKNOWN_TOPIC_OR_PARTITION
            results.append(DeleteTopicsResponse.DeletableTopicResult(name=name, error_code=err))
        return DeleteTopicsResponse(throttle_time_ms=0, responses=results)

    async def on_create_partitions(self, node, req, v):
        results = []
        for t in req.topics:
            parts = self.topics.get(t.name)
            err = E.UNKNOWN_TOPIC_OR_PARTITION if parts is None else (
                E.INVALID_PARTITIONS if t.count <= len(parts) else 0)
            if not err and not req.validate_only:
                for p in range(len(parts), t.count):
                    parts[p] = PartitionLog(self.node_ids[p % len(self.node_ids)])
            results.append(CreatePartitionsResponse.CreatePartitionsTopicResult(name=t.name, error_code=err))
        return CreatePartitionsResponse(throttle_time_ms=0, results=results)

    async def on_describe_configs(self, node, req, v):
        results = []
        for r in req.resources:
            configs = self.configs.get(r.resource_name)
            err = E.UNKNOWN_TOPIC_OR_PARTITION if configs is None else 0
            entries = [DescribeConfigsResponse.DescribeConfigsResourceResult(
                name=k, value=val, read_only=False, is_default=False, config_source=1, is_sensitive=False)
                for k, val in sorted((configs or {}).items())
                if r.configuration_keys is None or k in r.configuration_keys]
            results.append(DescribeConfigsResponse.DescribeConfigsResult(
                error_code=err, error_message=None, resource_type=r.resource_type,
                resource_name=r.resource_name, configs=entries))
        return DescribeConfigsResponse(throttle_time_ms=0, results=results)

    async def on_incremental_alter_configs(self, node, req, v):
        out = []
        for r in req.resources:
            configs = self.configs.get(r.resource_name)
            err = E.UNKNOWN_TOPIC_OR_PARTITION if configs is None else 0
            if not err and not req.validate_only:
                for c in r.configs:
                    if c.config_operation == 1:
                        configs.pop(c.name, None)
                    else:
                        configs[c.name] = c.value
            out.append(IncrementalAlterConfigsResponse.AlterConfigsResourceResponse(
                error_code=err, error_message=None, resource_type=r.resource_type, resource_name=r.resource_name))
        return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=out)

    async def on_describe_cluster(self, node, req, v):
        brokers = [DescribeClusterResponse.DescribeClusterBroker(broker_id=n, host=h, port=p)
                   for n, (h, p) in sorted(self.addresses.items())]
        return DescribeClusterResponse(throttle_time_ms=0, error_code=0, cluster_id=self.cluster_id,
                                       controller_id=self.node_ids[0], brokers=brokers)
