"""A tiny single-node fake Kafka broker that answers with our codecs and records requests.

It implements just enough for a real client to run a scripted session:
bootstrap (ApiVersions with the fallback for unknown versions), topic admin,
produce (any codec: batches are stored as sent), fetch (serves them back),
one-member consumer groups, offsets, configs. Every request frame is kept in
`recorded` so tests can capture golden bytes and check our response encodings
against the real clients. Test tooling only: it runs its own trio loop in a
thread and is not node code.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

import trio

from wire import batch_header
from wire.error_codes import ErrorCode as E
from wire.protocol import (
    API_VERSIONS, ApiKey, FrameReader, UnsupportedRequestError, decode_request, encode_response,
)
from wire.protocol import (
    AlterConfigsResponse as AlterCfg, ApiVersionsResponse as ApiVer, CreatePartitionsResponse as CreateParts,
    CreateTopicsResponse as CreateTopics, DeleteGroupsResponse as DeleteGroups,
    DeleteTopicsResponse as DeleteTopics, DescribeClusterResponse as DescCluster,
    DescribeConfigsResponse as DescCfg, DescribeGroupsResponse as DescGroups, FetchResponse as Fetch,
    FindCoordinatorResponse as FindCoord, HeartbeatResponse, IncrementalAlterConfigsResponse as IncAlterCfg,
    InitProducerIdResponse, JoinGroupResponse as Join, LeaveGroupResponse, ListGroupsResponse as ListGroups,
    ListOffsetsResponse as ListOffsets, MetadataResponse as Meta, OffsetCommitResponse as Commit,
    OffsetDeleteResponse as OffsetDelete, OffsetFetchResponse as OffFetch,
    OffsetForLeaderEpochResponse as OffEpoch, ProduceResponse as Produce, SaslAuthenticateResponse,
    SaslHandshakeResponse,
    SyncGroupResponse,
)

NODE_ID = 0
TOPIC_DEFAULTS = {"cleanup.policy": "delete", "max.message.bytes": "1048588", "retention.ms": "604800000"}


@dataclass
class Group:
    protocol_type: str = ""
    protocol: str = ""
    generation: int = 0
    members: dict = field(default_factory=dict)  # member_id -> (client_id, metadata, assignment)
    offsets: dict = field(default_factory=dict)  # (topic, partition) -> (offset, metadata)


class RecordingBroker:
    def __init__(self) -> None:
        self.host = "127.0.0.1"
        self.port = 0
        self.recorded: list[bytes] = []  # request frames, without the size prefix
        self.errors: list[str] = []  # decode failures seen (a test asserts there are none)
        self.topics: dict[str, int] = {}
        self.logs: dict[tuple[str, int], list[bytes]] = {}
        self.configs: dict[str, dict[str, str]] = {}
        self.groups: dict[str, Group] = {}
        self._next_member = 0
        self._next_producer_id = 1000
        self._thread: threading.Thread | None = None
        self._cancel: trio.CancelScope | None = None
        self._trio_token = None
        self._ready = threading.Event()
        self._lock = threading.Lock()

    # ---- lifecycle ---------------------------------------------------------- #

    def start(self) -> str:
        self._thread = threading.Thread(target=trio.run, args=(self._main,), daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("recording broker did not start")
        return f"{self.host}:{self.port}"

    def stop(self) -> None:
        if self._cancel is not None and self._trio_token is not None:
            self._trio_token.run_sync_soon(self._cancel.cancel)
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> "RecordingBroker":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    async def _main(self) -> None:
        self._trio_token = trio.lowlevel.current_trio_token()
        with trio.CancelScope() as scope:
            self._cancel = scope
            listeners = await trio.open_tcp_listeners(0, host=self.host)
            self.port = listeners[0].socket.getsockname()[1]
            self._ready.set()
            await trio.serve_listeners(self._serve, listeners)

    async def _serve(self, stream: trio.SocketStream) -> None:
        reader = FrameReader()
        try:
            async with stream:
                while True:
                    data = await stream.receive_some(65536)
                    if not data:
                        return
                    reader.feed(data)
                    for frame in reader:
                        reply = await self._handle_frame(frame)
                        if reply is not None:
                            await stream.send_all(reply)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return
        except Exception as exc:  # noqa: BLE001 - keep serving others; the test asserts on `errors`
            self.errors.append(f"{type(exc).__name__}: {exc}")

    async def _handle_frame(self, frame: bytes) -> bytes | None:
        with self._lock:
            self.recorded.append(frame)
        try:
            header, body = decode_request(frame)
        except UnsupportedRequestError as exc:
            if exc.header.api_key == ApiKey.API_VERSIONS:
                # Unknown ApiVersions version: a v0 body with UNSUPPORTED_VERSION (KIP-511).
                return encode_response(exc.header, self._api_versions_body(E.UNSUPPORTED_VERSION), version=0)
            raise  # Kafka closes the connection on an unknown api key or version
        handler = getattr(self, "_" + ApiKey(header.api_key).name.lower())
        result = handler(header, body)
        if hasattr(result, "__await__"):
            result = await result
        if result is None:
            return None
        return encode_response(header, result)

    # ---- bootstrap ---------------------------------------------------------- #

    def _api_versions_body(self, error=E.NONE):
        keys = [ApiVer.ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in API_VERSIONS.items()]
        return ApiVer(error_code=error, api_keys=keys)

    def _api_versions(self, header, body):
        return self._api_versions_body()

    def _metadata(self, header, body):
        if body.topics is None:
            names = sorted(self.topics)
        else:
            names = [t.name for t in body.topics]
        topics = []
        for name in names:
            if name not in self.topics and body.allow_auto_topic_creation and body.topics is not None:
                self._create_topic(name, 1)
            if name not in self.topics:
                topics.append(Meta.MetadataResponseTopic(error_code=E.UNKNOWN_TOPIC_OR_PARTITION, name=name))
                continue
            parts = [Meta.MetadataResponsePartition(partition_index=p, leader_id=NODE_ID, replica_nodes=[NODE_ID],
                                                    isr_nodes=[NODE_ID]) for p in range(self.topics[name])]
            topics.append(Meta.MetadataResponseTopic(name=name, partitions=parts))
        brokers = [Meta.MetadataResponseBroker(node_id=NODE_ID, host=self.host, port=self.port)]
        return Meta(brokers=brokers, cluster_id="recording-cluster", controller_id=NODE_ID, topics=topics)

    def _describe_cluster(self, header, body):
        brokers = [DescCluster.DescribeClusterBroker(broker_id=NODE_ID, host=self.host, port=self.port)]
        return DescCluster(cluster_id="recording-cluster", controller_id=NODE_ID, brokers=brokers)

    def _sasl_handshake(self, header, body):
        return SaslHandshakeResponse(error_code=E.UNSUPPORTED_SASL_MECHANISM, mechanisms=[])

    def _sasl_authenticate(self, header, body):
        return SaslAuthenticateResponse(error_code=E.ILLEGAL_SASL_STATE, error_message="no SASL here")

    # ---- topics and configs ------------------------------------------------- #

    def _create_topic(self, name: str, partitions: int) -> None:
        self.topics[name] = partitions
        for p in range(partitions):
            self.logs[(name, p)] = []

    def _create_topics(self, header, body):
        results = []
        for t in body.topics:
            if t.name in self.topics:
                results.append(CreateTopics.CreatableTopicResult(name=t.name, error_code=E.TOPIC_ALREADY_EXISTS,
                                                                 error_message="exists"))
                continue
            if not body.validate_only:
                self._create_topic(t.name, t.num_partitions if t.num_partitions > 0 else 1)
                self.configs[t.name] = {c.name: c.value for c in t.configs}
            results.append(CreateTopics.CreatableTopicResult(name=t.name, error_message=None))
        return CreateTopics(topics=results)

    def _delete_topics(self, header, body):
        results = []
        for name in body.topic_names:
            code = E.NONE if self.topics.pop(name, None) is not None else E.UNKNOWN_TOPIC_OR_PARTITION
            results.append(DeleteTopics.DeletableTopicResult(name=name, error_code=code))
        return DeleteTopics(responses=results)

    def _create_partitions(self, header, body):
        results = []
        for t in body.topics:
            have = self.topics.get(t.name)
            if have is None or t.count <= have:
                results.append(CreateParts.CreatePartitionsTopicResult(name=t.name, error_code=E.INVALID_PARTITIONS,
                                                                       error_message="bad count"))
                continue
            if not body.validate_only:
                for p in range(have, t.count):
                    self.logs[(t.name, p)] = []
                self.topics[t.name] = t.count
            results.append(CreateParts.CreatePartitionsTopicResult(name=t.name))
        return CreateParts(results=results)

    def _describe_configs(self, header, body):
        results = []
        for r in body.resources:
            configs = {**TOPIC_DEFAULTS, **self.configs.get(r.resource_name, {})}
            names = sorted(configs) if r.configuration_keys is None else r.configuration_keys
            entries = [DescCfg.DescribeConfigsResourceResult(name=n, value=configs.get(n), config_source=5)
                       for n in names]
            results.append(DescCfg.DescribeConfigsResult(error_message=None, resource_type=r.resource_type,
                                                         resource_name=r.resource_name, configs=entries))
        return DescCfg(results=results)

    def _alter_configs(self, header, body):
        out = []
        for r in body.resources:
            self.configs[r.resource_name] = {c.name: c.value for c in r.configs}
            out.append(AlterCfg.AlterConfigsResourceResponse(error_message=None, resource_type=r.resource_type,
                                                            resource_name=r.resource_name))
        return AlterCfg(responses=out)

    def _incremental_alter_configs(self, header, body):
        out = []
        for r in body.resources:
            configs = self.configs.setdefault(r.resource_name, {})
            for c in r.configs:
                if c.config_operation == 1:
                    configs.pop(c.name, None)
                else:
                    configs[c.name] = c.value
            out.append(IncAlterCfg.AlterConfigsResourceResponse(error_message=None, resource_type=r.resource_type,
                                                               resource_name=r.resource_name))
        return IncAlterCfg(responses=out)

    def _init_producer_id(self, header, body):
        self._next_producer_id += 1
        return InitProducerIdResponse(producer_id=self._next_producer_id, producer_epoch=0)

    # ---- data --------------------------------------------------------------- #

    def _end_offset(self, key) -> int:
        batches = self.logs.get(key, [])
        return batch_header.parse_header(batches[-1]).next_offset if batches else 0

    def _produce(self, header, body):
        topics = []
        for t in body.topic_data:
            parts = []
            for p in t.partition_data:
                key = (t.name, p.index)
                if header.api_version < 3:
                    parts.append(Produce.PartitionProduceResponse(index=p.index, error_code=E.UNSUPPORTED_VERSION))
                    continue
                if key not in self.logs:
                    parts.append(Produce.PartitionProduceResponse(index=p.index, error_code=E.UNKNOWN_TOPIC_OR_PARTITION))
                    continue
                base = self._end_offset(key)
                batch = bytearray(p.records)
                batch_header.validate_batch(batch)
                batch_header.set_base_offset(batch, 0, base)
                self.logs[key].append(bytes(batch))
                parts.append(Produce.PartitionProduceResponse(index=p.index, base_offset=base, log_start_offset=0))
            topics.append(Produce.TopicProduceResponse(name=t.name, partition_responses=parts))
        if body.acks == 0:
            return None
        return Produce(responses=topics)

    async def _fetch(self, header, body):
        def collect():
            topics, total = [], 0
            for t in body.topics:
                parts = []
                for p in t.partitions:
                    key = (t.topic, p.partition)
                    if key not in self.logs:
                        parts.append(Fetch.PartitionData(partition_index=p.partition, records=b"",
                                                         error_code=E.UNKNOWN_TOPIC_OR_PARTITION))
                        continue
                    chunks, size = [], 0
                    for batch in self.logs[key]:
                        if batch_header.parse_header(batch).last_offset >= p.fetch_offset and \
                                (not chunks or size + len(batch) <= p.partition_max_bytes):
                            chunks.append(batch)
                            size += len(batch)
                    total += size
                    hw = self._end_offset(key)
                    parts.append(Fetch.PartitionData(partition_index=p.partition, high_watermark=hw,
                                                     last_stable_offset=hw, log_start_offset=0,
                                                     records=b"".join(chunks)))
                topics.append(Fetch.FetchableTopicResponse(topic=t.topic, partitions=parts))
            return topics, total

        topics, total = collect()
        if total == 0 and body.max_wait_ms > 0:
            await trio.sleep(min(body.max_wait_ms, 100) / 1000)
            topics, total = collect()
        return Fetch(responses=topics)

    def _list_offsets(self, header, body):
        topics = []
        for t in body.topics:
            parts = []
            for p in t.partitions:
                key = (t.name, p.partition_index)
                if key not in self.logs:
                    parts.append(ListOffsets.ListOffsetsPartitionResponse(
                        partition_index=p.partition_index, error_code=E.UNKNOWN_TOPIC_OR_PARTITION))
                    continue
                offset = 0 if p.timestamp == -2 else self._end_offset(key)
                parts.append(ListOffsets.ListOffsetsPartitionResponse(partition_index=p.partition_index,
                                                                      timestamp=-1, offset=offset))
            topics.append(ListOffsets.ListOffsetsTopicResponse(name=t.name, partitions=parts))
        return ListOffsets(topics=topics)

    def _offset_for_leader_epoch(self, header, body):
        topics = [OffEpoch.OffsetForLeaderTopicResult(topic=t.topic, partitions=[
            OffEpoch.EpochEndOffset(partition=p.partition, leader_epoch=0, end_offset=self._end_offset((t.topic, p.partition)))
            for p in t.partitions]) for t in body.topics]
        return OffEpoch(topics=topics)

    # ---- groups (one generation per join; enough for single-member sessions) -- #

    def _find_coordinator(self, header, body):
        return FindCoord(error_message=None, node_id=NODE_ID, host=self.host, port=self.port)

    def _join_group(self, header, body):
        group = self.groups.setdefault(body.group_id, Group())
        if not body.member_id:
            self._next_member += 1
            member_id = f"{header.client_id}-{self._next_member}"
            if header.api_version >= 4:
                return Join(error_code=E.MEMBER_ID_REQUIRED, member_id=member_id)
        else:
            member_id = body.member_id
        protocol = body.protocols[0]
        group.protocol_type, group.protocol = body.protocol_type, protocol.name
        group.members = {member_id: (header.client_id or "", protocol.metadata, b"")}
        group.generation += 1
        members = [Join.JoinGroupResponseMember(member_id=member_id, metadata=protocol.metadata)]
        return Join(generation_id=group.generation, protocol_name=protocol.name, leader=member_id,
                    member_id=member_id, members=members)

    def _sync_group(self, header, body):
        group = self.groups.get(body.group_id)
        if group is None or body.member_id not in group.members:
            return SyncGroupResponse(error_code=E.UNKNOWN_MEMBER_ID)
        for a in body.assignments:
            if a.member_id in group.members:
                client_id, metadata, _ = group.members[a.member_id]
                group.members[a.member_id] = (client_id, metadata, a.assignment)
        return SyncGroupResponse(assignment=group.members[body.member_id][2])

    def _heartbeat(self, header, body):
        group = self.groups.get(body.group_id)
        ok = group is not None and body.member_id in group.members
        return HeartbeatResponse(error_code=E.NONE if ok else E.UNKNOWN_MEMBER_ID)

    def _leave_group(self, header, body):
        group = self.groups.get(body.group_id)
        if group is not None:
            group.members.pop(body.member_id, None)
        return LeaveGroupResponse()

    def _offset_commit(self, header, body):
        group = self.groups.setdefault(body.group_id, Group())
        topics = []
        for t in body.topics:
            for p in t.partitions:
                group.offsets[(t.name, p.partition_index)] = (p.committed_offset, p.committed_metadata)
            topics.append(Commit.OffsetCommitResponseTopic(name=t.name, partitions=[
                Commit.OffsetCommitResponsePartition(partition_index=p.partition_index) for p in t.partitions]))
        return Commit(topics=topics)

    def _offset_fetch(self, header, body):
        group = self.groups.get(body.group_id, Group())
        if body.topics is None:
            wanted: dict[str, list[int]] = {}
            for topic, partition in sorted(group.offsets):
                wanted.setdefault(topic, []).append(partition)
        else:
            wanted = {t.name: t.partition_indexes for t in body.topics}
        topics = []
        for name, partitions in wanted.items():
            parts = []
            for p in partitions:
                offset, metadata = group.offsets.get((name, p), (-1, ""))
                parts.append(OffFetch.OffsetFetchResponsePartition(partition_index=p, committed_offset=offset,
                                                                   metadata=metadata))
            topics.append(OffFetch.OffsetFetchResponseTopic(name=name, partitions=parts))
        return OffFetch(topics=topics)

    def _offset_delete(self, header, body):
        group = self.groups.get(body.group_id, Group())
        topics = []
        for t in body.topics:
            for p in t.partitions:
                group.offsets.pop((t.name, p.partition_index), None)
            topics.append(OffsetDelete.OffsetDeleteResponseTopic(name=t.name, partitions=[
                OffsetDelete.OffsetDeleteResponsePartition(partition_index=p.partition_index) for p in t.partitions]))
        return OffsetDelete(topics=topics)

    def _describe_groups(self, header, body):
        out = []
        for gid in body.groups:
            group = self.groups.get(gid)
            if group is None:
                out.append(DescGroups.DescribedGroup(group_id=gid, group_state="Dead"))
                continue
            members = [DescGroups.DescribedGroupMember(member_id=m, client_id=c, client_host="/127.0.0.1",
                                                       member_metadata=md, member_assignment=a)
                       for m, (c, md, a) in sorted(group.members.items())]
            state = "Stable" if members else "Empty"
            out.append(DescGroups.DescribedGroup(group_id=gid, group_state=state, protocol_type=group.protocol_type,
                                                 protocol_data=group.protocol, members=members))
        return DescGroups(groups=out)

    def _list_groups(self, header, body):
        return ListGroups(groups=[ListGroups.ListedGroup(group_id=g, protocol_type=self.groups[g].protocol_type)
                                  for g in sorted(self.groups)])

    def _delete_groups(self, header, body):
        results = []
        for gid in body.group_names:
            group = self.groups.get(gid)
            code = E.GROUP_ID_NOT_FOUND if group is None else E.NON_EMPTY_GROUP if group.members else E.NONE
            if code == E.NONE:
                del self.groups[gid]
            results.append(DeleteGroups.DeletableGroupResult(group_id=gid, error_code=code))
        return DeleteGroups(results=results)

