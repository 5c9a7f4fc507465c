"""Fetch v4-11: long-poll reads of whole batches, sent zero-copy from the segment files.

For each partition (in request order) the read starts at the batch holding
fetch_offset and returns whole batches up to min(partition_max_bytes, what is
left of max_bytes); the first partition with data always gets at least one
whole batch even if it is larger (KIP-74), so a big batch never stalls a
consumer. Consumers read up to the high watermark (read_uncommitted) or the
last stable offset (read_committed); follower replicas (replica_id >= 0) up to
the log end — and a follower's fetch offset is its log end, which the leader
records (Partition.on_follower_fetch: ISR expansion, HW advance) before its
first read, so the answer carries the HW this very fetch may have moved; the
re-reads of a parked follower fetch record nothing (the follower may be gone). If fewer than min_bytes are available and no partition has an
error, the request waits in the fetch purgatory until a change touches one
of its partitions or max_wait_ms passes; it reads everything again only when a
changed partition may add to its answer (records past its fetch offset, or an
error), so a parked follower fetch over many partitions shrugs off the rest. Fetch sessions are
not kept: every answer has session_id 0, which all clients accept.
"""
from __future__ import annotations

from broker.records_slice import RecordsSlice
from storage.log import OffsetOutOfRangeError
from wire.error_codes import ErrorCode
from wire.protocol import FetchResponse

__all__ = ["handle", "error_response"]

R = FetchResponse
READ_COMMITTED = 1
NO_EPOCH = -1


def _error_partition(index: int, code: int) -> R.PartitionData:
    return R.PartitionData(partition_index=index, error_code=code, high_watermark=-1, last_stable_offset=-1,
                           log_start_offset=-1, aborted_transactions=None, preferred_read_replica=-1,
                           records=b"")


async def handle(broker, header, request) -> FetchResponse:
    env = broker.env
    deadline = env.now() + max(0, request.max_wait_ms) / 1000
    max_bytes = request.max_bytes if request.max_bytes > 0 else 0
    responses, total, had_error, watched = await _read_all(broker, request, max_bytes, deadline, True)
    if not (total >= request.min_bytes or had_error or env.now() >= deadline or not watched):
        responses = await _park(broker, request, max_bytes, deadline, watched)
    for t in responses:
        broker.metrics.fetched(t.topic, sum(len(p.records) for p in t.partitions), follower=request.replica_id >= 0)
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, session_id=0, responses=responses)


async def _park(broker, request, max_bytes: int, deadline: float, watched: dict):
    """Wait in the purgatory; re-read everything only when a partition that fired may have
    something for this fetch (new data past its offset, or an error to report)."""
    follower = request.replica_id >= 0
    committed = request.isolation_level == READ_COMMITTED
    watch = broker.purgatory.watch(watched)
    try:
        while True:
            fired = await watch.wait(deadline)
            if not fired:
                break  # the deadline: answer with what there is
            if not any(_may_answer(broker, key, watched[key], follower, committed) for key in fired):
                continue
            responses, total, had_error, _ = await _read_all(broker, request, max_bytes, deadline)
            if total >= request.min_bytes or had_error or broker.env.now() >= deadline:
                return responses
    finally:
        watch.close()
    responses, *_ = await _read_all(broker, request, max_bytes, deadline)
    return responses


def _may_answer(broker, key, seen, follower: bool, committed: bool) -> bool:
    """Whether partition `key` may now add to this fetch's answer: records past the fetch
    offset, or a change (leadership, log start) that turns it into an error."""
    partition, epoch, offset = seen
    current = broker.replicas.get(*key)
    if current is not partition or not current.is_leader or current.leader_epoch != epoch:
        return True
    if current.log_start_offset > offset:
        return True
    if follower:
        end = current.log_end_offset
    elif committed:
        end = current.last_stable_offset
    else:
        end = current.high_watermark
    return end > offset


async def _read_all(broker, request, max_bytes: int, deadline: float, first: bool = False):
    follower = request.replica_id >= 0
    committed = request.isolation_level == READ_COMMITTED
    remaining = max_bytes
    total = 0
    had_error = False
    watched = {}  # key -> (partition, leader epoch, fetch offset) of the partitions read without error
    responses = []
    for topic in request.topics:
        parts = []
        for p in topic.partitions:
            found = await broker.leader_partition(topic.topic, p.partition, deadline)
            if isinstance(found, int):
                parts.append(_error_partition(p.partition, found))
                had_error = True
                continue
            partition = found
            epoch_error = check_leader_epoch(p.current_leader_epoch, partition.leader_epoch)
            if epoch_error:
                parts.append(_error_partition(p.partition, epoch_error))
                had_error = True
                continue
            if follower:
                max_offset = None
            elif committed:
                max_offset = partition.last_stable_offset
            else:
                max_offset = partition.high_watermark
            if not partition.log_start_offset <= p.fetch_offset <= partition.log_end_offset:
                parts.append(_error_partition(p.partition, ErrorCode.OFFSET_OUT_OF_RANGE))
                had_error = True
                continue
            if follower and not partition.on_follower_fetch(request.replica_id, p.fetch_offset, record=first):
                # Not one of this partition's replicas: it must not count toward the ISR or HW.
                parts.append(_error_partition(p.partition, ErrorCode.NOT_LEADER_OR_FOLLOWER))
                had_error = True
                continue
            limit = max(0, min(p.partition_max_bytes, remaining))
            data = None
            if limit > 0 or total == 0:  # once the response is full, later partitions get nothing
                try:
                    data = partition.read(p.fetch_offset, limit, max_offset=max_offset, min_one_batch=total == 0)
                except OffsetOutOfRangeError:  # retention moved the log start meanwhile
                    parts.append(_error_partition(p.partition, ErrorCode.OFFSET_OUT_OF_RANGE))
                    had_error = True
                    continue
            size = 0 if data is None else data.size
            total += size
            remaining = max(0, remaining - size)
            watched[partition.key] = (partition, partition.leader_epoch, p.fetch_offset)
            parts.append(R.PartitionData(
                partition_index=p.partition, error_code=ErrorCode.NONE,
                high_watermark=partition.high_watermark, last_stable_offset=partition.last_stable_offset,
                log_start_offset=partition.log_start_offset,
                aborted_transactions=[] if committed else None, preferred_read_replica=-1,
                records=RecordsSlice(data) if size else b""))
        responses.append(R.FetchableTopicResponse(topic=topic.topic, partitions=parts))
    return responses, total, had_error, watched


def check_leader_epoch(requested: int, current: int) -> int:
    """KIP-320 fencing: an older epoch is fenced, a newer one is not known here yet."""
    if requested == NO_EPOCH or requested == current:
        return ErrorCode.NONE
    return ErrorCode.FENCED_LEADER_EPOCH if requested < current else ErrorCode.UNKNOWN_LEADER_EPOCH


def error_response(broker, header, request, code: int) -> FetchResponse:
    return R(throttle_time_ms=0, error_code=code, session_id=0, responses=[
        R.FetchableTopicResponse(topic=t.topic, partitions=[_error_partition(p.partition, code)
                                                             for p in t.partitions])
        for t in request.topics])
