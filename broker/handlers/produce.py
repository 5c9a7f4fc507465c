"""Produce v3-10 (v0-2 are parsed and refused per partition with UNSUPPORTED_VERSION;
v10 names the new leader in NOT_LEADER_OR_FOLLOWER answers: broker.leader_hints).

Per partition: refuse internal topics (only the group coordinator writes
them), find the local leader, validate the one batch's header (broker.produce_validation)
and its records (broker.record_validation), append (the log assigns offsets by
patching baseOffset, stamps the leader epoch and LogAppendTime). acks=0 gets
no response at all; if anything failed the connection is closed instead so
the client refreshes metadata (Kafka's behaviour). acks=all refuses up front
with NOT_ENOUGH_REPLICAS when the committed ISR is smaller than
min.insync.replicas, then waits in broker.delayed_produce until the high
watermark passes the batch.
A partition named more than once in one request is appended nowhere: every entry
for it is answered INVALID_REQUEST (the other partitions are served).
Transactional produce: WRITE on the transactional id (else the whole request is refused),
and a producer's first batch of a transaction on a partition is verified with the
transaction coordinator (KIP-890 part 1) before it may open a transaction there.
"""
from __future__ import annotations

import collections
import logging
import weakref

from broker.authorization import allowed, topic_allowed
from broker.delayed_produce import PendingAck, await_acks
from broker.handlers.metadata import INTERNAL_TOPICS
from broker.leader_hints import add_leader_hints
from broker.produce_validation import MIN_PRODUCE_VERSION, ProduceError, validate_produce_records
from broker.record_validation import validate_records
from broker.request_caps import Pacer
from broker.request_errors import CloseConnection
from metadata.acls import AclOperation, ResourceType
from metadata.controller.dynamic_configs import effective_topic_value
from storage.log import LogError, RecordTooLargeError
from wire.error_codes import ErrorCode
from wire.errors import CorruptRecordError
from wire.protocol import ProduceResponse

__all__ = ["handle", "error_response"]

log = logging.getLogger(__name__)
R = ProduceResponse


def _partition_response(index: int, code: int, message: str | None = None, *, base_offset: int = -1,
                        append_time: int = -1, log_start: int = -1,
                        record_errors=()) -> R.PartitionProduceResponse:
    errors = [R.BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=m) for i, m in record_errors]
    return R.PartitionProduceResponse(index=index, error_code=code, base_offset=base_offset,
                                      log_append_time_ms=append_time, log_start_offset=log_start,
                                      record_errors=errors, error_message=message)


async def handle(broker, header, request):
    version = header.api_version
    acks = request.acks
    env = broker.env
    deadline = env.now() + max(0, request.timeout_ms) / 1000
    results: dict[str, list] = {}
    waits: list[PendingAck] = []  # acks=all: answered once the HW passes each batch
    duplicates = _duplicate_partitions(request)
    tx_id = request.transactional_id
    if tx_id is not None and not allowed(broker, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, tx_id):
        return error_response(broker, header, request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    pacer = Pacer()
    for topic in request.topic_data:
        out = results.setdefault(topic.name, [])
        refused = _refused(broker, topic.name)
        if refused is not None:
            out.extend(_partition_response(part.index, *refused) for part in topic.partition_data)
            continue
        limits = _topic_limits(broker, topic.name)
        for part in topic.partition_data:
            await pacer.step()
            if version < MIN_PRODUCE_VERSION:
                out.append(_partition_response(part.index, ErrorCode.UNSUPPORTED_VERSION,
                                               f"Produce v{version} is not supported; use v3 or later"))
                continue
            if acks not in (-1, 0, 1):
                out.append(_partition_response(part.index, ErrorCode.INVALID_REQUIRED_ACKS))
                continue
            if (topic.name, part.index) in duplicates:
                out.append(_partition_response(part.index, ErrorCode.INVALID_REQUEST,
                                               "Duplicate partition in the produce request"))
                continue
            response, partition, last_offset, min_isr = await _append_one(
                broker, topic.name, part, version, acks, deadline, limits, tx_id)
            out.append(response)
            if response.error_code != ErrorCode.NONE and partition is not None:
                broker.metrics.produce_failed(topic.name)  # hosted partitions only: no series at a client's whim
            if acks == -1 and response.error_code == ErrorCode.NONE:
                waits.append(PendingAck(partition, partition.leader_epoch, last_offset, min_isr,
                                        _error_setter(response)))
    if waits:
        await await_acks(env, broker.purgatory, waits, deadline, lambda key: broker.replicas.get(*key))
    if acks == 0:
        failed = [r for rs in results.values() for r in rs if r.error_code != ErrorCode.NONE]
        if failed:
            raise CloseConnection(f"acks=0 produce failed with {ErrorCode(failed[0].error_code).name}")
        return None
    response = R(responses=[R.TopicProduceResponse(name=name, partition_responses=parts)
                            for name, parts in results.items()], throttle_time_ms=0)
    if version >= 10:
        add_leader_hints(broker, response)
    return response


def _duplicate_partitions(request) -> set[tuple[str, int]]:
    """(topic, partition) pairs the request names more than once."""
    topics = request.topic_data
    if len(topics) == 1 and len(topics[0].partition_data) == 1:
        return set()  # what a producer of one partition sends: nothing to count
    counts = collections.Counter((t.name, p.index) for t in topics for p in t.partition_data)
    return {key for key, n in counts.items() if n > 1}


def _refused(broker, topic: str) -> tuple[ErrorCode, str | None] | None:
    """WRITE on the topic (checked first, as Kafka does); internal topics only the group
    coordinator writes."""
    if not topic_allowed(broker, AclOperation.WRITE, topic):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED, None
    if topic in INTERNAL_TOPICS:
        return ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot append to internal topic {topic}"
    return None


class _TopicLimits:
    """A topic's produce settings, resolved on first use and then kept for as long as the
    metadata image stays the same (an image never changes; a new one starts afresh).
    Resolving them per request cost more than the rest of a small produce."""

    __slots__ = ("_resolved", "_topic")

    def __init__(self, resolved: tuple, topic: str):
        self._resolved, self._topic = resolved, topic

    def __getitem__(self, name: str):
        image, static, values = self._resolved
        key = (self._topic, name)
        value = values.get(key)
        if value is None:
            value = values[key] = effective_topic_value(image, self._topic, name, static)
        return value


# broker -> (metadata image, static configs, resolved (topic, name) -> value)
_RESOLVED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _topic_limits(broker, topic: str) -> _TopicLimits:
    image, static = broker.metadata.image, broker.static
    resolved = _RESOLVED.get(broker)
    if resolved is None or resolved[0] is not image or resolved[1] is not static:
        resolved = _RESOLVED[broker] = (image, static, {})
    return _TopicLimits(resolved, topic)


async def _append_one(broker, topic: str, part, version: int, acks: int, deadline: float, limits: _TopicLimits,
                      transactional_id: str | None):
    found = await broker.leader_partition(topic, part.index, deadline)
    if isinstance(found, int):
        return _partition_response(part.index, found), None, -1, 0
    partition = found
    min_isr = 0
    try:
        if acks == -1:
            min_isr = limits["min.insync.replicas"]
            if len(partition.isr) < min_isr:  # the committed ISR, as Kafka counts it
                raise ProduceError(ErrorCode.NOT_ENOUGH_REPLICAS,
                                   f"The size of the current ISR {list(partition.isr)} is "
                                   f"insufficient to satisfy the min.isr requirement of {min_isr}")
        config = partition.log.config
        now_ms = broker.env.wall_ms()
        batch = validate_produce_records(part.records, version, max_message_bytes=config.max_message_bytes)
        records, batch = validate_records(
            part.records, batch, f"{topic}-{part.index}", compacted=config.compact,
            log_append_time=config.log_append_time, now_ms=now_ms,
            before_max_ms=limits["message.timestamp.before.max.ms"],
            after_max_ms=limits["message.timestamp.after.max.ms"])
        if batch.is_transactional and transactional_id is not None:
            await _verify_in_transaction(broker, partition, batch, transactional_id)
        # Idempotent producer (broker.producer_state_hooks): a retried batch is answered with
        # its first offsets, a gap or a fenced epoch refused. No await from check to record.
        verdict = broker.producer_states.check(partition, batch, now_ms)
        if verdict.duplicate is not None:
            return (_partition_response(part.index, ErrorCode.NONE, base_offset=verdict.duplicate.first_offset,
                                        log_start=partition.log_start_offset),
                    partition, verdict.duplicate.last_offset, min_isr)
        if verdict.error != ErrorCode.NONE:
            raise ProduceError(verdict.error, verdict.message)
        info = partition.append_as_leader(records, now_ms)
        broker.metrics.produced(topic, info.size, info.last_offset - info.first_offset + 1)
        broker.producer_states.record(partition, batch, info, now_ms)
        # Every tracked partition (idempotent writes, or a last stable offset asked for) snapshots
        # on roll, as Kafka does: that bounds what a new leader replays.
        await broker.producer_states.maybe_snapshot(partition)
    except ProduceError as exc:
        return (_partition_response(part.index, exc.code, exc.message, record_errors=exc.record_errors),
                partition, -1, min_isr)
    except RecordTooLargeError as exc:
        return _partition_response(part.index, ErrorCode.MESSAGE_TOO_LARGE, str(exc)), partition, -1, min_isr
    except CorruptRecordError as exc:
        return _partition_response(part.index, ErrorCode.CORRUPT_MESSAGE, str(exc)), partition, -1, min_isr
    except LogError as exc:
        log.warning("append to %s-%d failed: %s", topic, part.index, exc)
        return _partition_response(part.index, ErrorCode.KAFKA_STORAGE_ERROR, str(exc)), partition, -1, min_isr
    return (_partition_response(part.index, ErrorCode.NONE, base_offset=info.first_offset,
                                append_time=info.log_append_time, log_start=partition.log_start_offset),
            partition, info.last_offset, min_isr)


# What a producer is told when the coordinator could not answer the verification: retry.
_VERIFY_RETRIABLE = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                               ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.CONCURRENT_TRANSACTIONS})


async def _verify_in_transaction(broker, partition, batch, transactional_id: str) -> None:
    """KIP-890 part 1: the first transactional batch of a producer's transaction here must
    belong to a partition its coordinator added to the open transaction; else it would open a
    transaction no marker ever closes (a hanging transaction). ProduceError when it does not."""
    if batch.producer_id in broker.producer_states.state_for(partition).ongoing:
        return
    error = await broker.transactions.verify(transactional_id, batch.producer_id, batch.producer_epoch,
                                             partition.key)
    if error == ErrorCode.NONE:
        return
    if error in _VERIFY_RETRIABLE:
        raise ProduceError(ErrorCode.NOT_ENOUGH_REPLICAS,
                           f"cannot verify the transaction of {transactional_id} now ({error.name})")
    if error == ErrorCode.PRODUCER_FENCED:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    raise ProduceError(error, f"{partition.topic}-{partition.index} is not in the open transaction of "
                              f"{transactional_id}")


def _error_setter(response):
    def set_error(code: int) -> None:
        response.error_code = code
        if code != ErrorCode.NONE:
            response.base_offset = -1  # a failed acks=all answer must not look like an offset
    return set_error


def error_response(broker, header, request, code: int):
    if request.acks == 0:
        raise CloseConnection(f"acks=0 produce failed with {ErrorCode(code).name}")
    return R(responses=[R.TopicProduceResponse(
        name=t.name, partition_responses=[_partition_response(p.index, code) for p in t.partition_data])
        for t in request.topic_data], throttle_time_ms=0)
