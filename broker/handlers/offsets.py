"""OffsetCommit, OffsetFetch, OffsetDelete: committed consumer offsets through the group
coordinator (broker.groups via broker.group_driver).

As Kafka's KafkaApis: a commit for a partition the metadata does not know is
answered UNKNOWN_TOPIC_OR_PARTITION without reaching the coordinator; the rest
is answered once its record is committed in `__consumer_offsets`.
"""
from __future__ import annotations

from broker.authorization import group_allowed, topic_allowed
from broker.groups import CommitResult, DeleteOffsetsResult, FetchOffsetsResult
from metadata.acls import AclOperation
from wire.error_codes import ErrorCode
from wire.protocol import OffsetCommitResponse, OffsetDeleteResponse, OffsetFetchResponse

__all__ = ["handle_commit", "commit_error", "handle_fetch", "fetch_error", "handle_delete", "delete_error"]


def _known(broker, topic: str, partition: int) -> bool:
    return broker.metadata.partition(topic, partition) is not None


def _grouped(pairs):
    """[(topic, partition, value)] -> {topic: [(partition, value)]}, request order kept."""
    out: dict[str, list] = {}
    for topic, partition, value in pairs:
        out.setdefault(topic, []).append((partition, value))
    return out


# -- OffsetCommit --------------------------------------------------------------------------
def _commit_response(errors) -> OffsetCommitResponse:
    R = OffsetCommitResponse
    return R(throttle_time_ms=0, topics=[R.OffsetCommitResponseTopic(name=topic, partitions=[
        R.OffsetCommitResponsePartition(partition_index=p, error_code=e) for p, e in parts])
        for topic, parts in _grouped(errors).items()])


async def handle_commit(broker, header, request) -> OffsetCommitResponse:
    if not group_allowed(broker, AclOperation.READ, request.group_id):
        return commit_error(broker, header, request, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    errors: dict[tuple[str, int], int] = {}
    order: list[tuple[str, int]] = []
    commits = []
    for topic in request.topics:
        readable = topic_allowed(broker, AclOperation.READ, topic.name)
        for p in topic.partitions:
            key = (topic.name, p.partition_index)
            order.append(key)
            if not readable:
                errors[key] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif not _known(broker, *key):
                errors[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                commits.append((topic.name, p.partition_index, p.committed_offset, p.committed_leader_epoch,
                                p.committed_metadata))
    if commits:
        coordinator = broker.groups.coordinator
        # Absent fields read as their defaults: leader epoch -1 before v6, retention -1 from v5
        # (the broker's offsets.retention.minutes), no group.instance.id before v7.
        result: CommitResult = await broker.groups.call(lambda token, now: coordinator.commit_offsets(
            token, request.group_id, commits, generation_id=request.generation_id,
            member_id=request.member_id, group_instance_id=request.group_instance_id,
            retention_ms=request.retention_time_ms, now=now))
        for item in result.partitions:
            errors[(item.topic, item.partition)] = item.error
    return _commit_response([(t, p, errors[(t, p)]) for t, p in order])


def commit_error(broker, header, request, code: int) -> OffsetCommitResponse:
    return _commit_response([(t.name, p.partition_index, code) for t in request.topics for p in t.partitions])


# -- OffsetFetch ---------------------------------------------------------------------------
def _fetch_response(version: int, error: int, offsets) -> OffsetFetchResponse:
    """`offsets`: [(topic, partition, offset, leader epoch, metadata, partition error)]."""
    R = OffsetFetchResponse
    topics = [R.OffsetFetchResponseTopic(name=topic, partitions=[
        R.OffsetFetchResponsePartition(partition_index=p, committed_offset=o, committed_leader_epoch=le,
                                       metadata=m, error_code=e)
        for p, (o, le, m, e) in parts]) for topic, parts in _grouped(
            (t, p, rest) for t, p, *rest in offsets).items()]
    return R(throttle_time_ms=0, topics=topics, error_code=error)


def _requested(request):
    if request.topics is None:
        return None
    return [(t.name, list(t.partition_indexes)) for t in request.topics]


def _group_error_answer(version: int, request, error: int) -> OffsetFetchResponse:
    # v2+ carry a group-level error; v1 only has per-partition errors.
    if version >= 2:
        return _fetch_response(version, error, [])
    requested = _requested(request) or []
    return _fetch_response(version, ErrorCode.NONE, [(t, p, -1, -1, "", error) for t, ps in requested for p in ps])


async def handle_fetch(broker, header, request) -> OffsetFetchResponse:
    version = header.api_version
    driver = broker.groups
    if not broker.holds_session_lease():
        # Cut off from the controller for most of a session: our __consumer_offsets
        # leaderships may have moved and newer commits be answered elsewhere; an answer from
        # memory could take a committed offset back (Kafka would answer it). The client looks
        # for the coordinator again.
        return _group_error_answer(version, request, ErrorCode.NOT_COORDINATOR)
    if not group_allowed(broker, AclOperation.DESCRIBE, request.group_id):
        return _group_error_answer(version, request, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    result: FetchOffsetsResult = driver.coordinator.fetch_offsets(
        request.group_id, _requested(request), now=driver.now(), require_stable=request.require_stable)
    if result.error != ErrorCode.NONE:
        return _group_error_answer(version, request, result.error)
    # Topics the caller may not describe: named ones answer TOPIC_AUTHORIZATION_FAILED,
    # an all-topics fetch leaves them out (their names are not the caller's to learn).
    describable = {t: topic_allowed(broker, AclOperation.DESCRIBE, t) for t in {o.topic for o in result.offsets}}
    offsets = []
    for o in result.offsets:
        if describable[o.topic]:
            offsets.append((o.topic, o.partition, o.offset, o.leader_epoch, o.metadata, o.error))
        elif request.topics is not None:
            offsets.append((o.topic, o.partition, -1, -1, "", ErrorCode.TOPIC_AUTHORIZATION_FAILED))
    return _fetch_response(version, ErrorCode.NONE, offsets)


def fetch_error(broker, header, request, code: int) -> OffsetFetchResponse:
    return _group_error_answer(header.api_version, request, code)


# -- OffsetDelete --------------------------------------------------------------------------
def _delete_response(error: int, partitions) -> OffsetDeleteResponse:
    R = OffsetDeleteResponse
    return R(error_code=error, throttle_time_ms=0, topics=[R.OffsetDeleteResponseTopic(name=topic, partitions=[
        R.OffsetDeleteResponsePartition(partition_index=p, error_code=e) for p, e in parts])
        for topic, parts in _grouped(partitions).items()])


async def handle_delete(broker, header, request) -> OffsetDeleteResponse:
    if not group_allowed(broker, AclOperation.DELETE, request.group_id):
        return delete_error(broker, header, request, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    coordinator = broker.groups.coordinator
    errors: dict[tuple[str, int], int] = {}
    order = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    known: dict[str, list[int]] = {}
    for topic, partition in order:
        if not topic_allowed(broker, AclOperation.READ, topic):
            errors[(topic, partition)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif _known(broker, topic, partition):
            known.setdefault(topic, []).append(partition)
        else:
            errors[(topic, partition)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    wanted = sorted(known.items())
    result: DeleteOffsetsResult = await broker.groups.call(
        lambda token, now: coordinator.delete_offsets(token, request.group_id, wanted, now=now))
    if result.error != ErrorCode.NONE:
        return _delete_response(result.error, [])
    for item in result.partitions:
        errors[(item.topic, item.partition)] = item.error
    return _delete_response(ErrorCode.NONE, [(t, p, errors[(t, p)]) for t, p in order])


def delete_error(broker, header, request, code: int) -> OffsetDeleteResponse:
    return _delete_response(code, [])
