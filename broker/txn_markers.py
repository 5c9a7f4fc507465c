"""Transaction markers on a partition leader: WriteTxnMarkers' work (Kafka's
ReplicaManager.appendRecords for markers, then the group coordinator's
onTransactionCompleted).

For each partition: a COMMIT or ABORT control batch of the producer (its epoch, the
coordinator's epoch) is appended unless the producer state knows a newer epoch of the
producer (INVALID_PRODUCER_EPOCH) or a newer coordinator epoch
(TRANSACTION_COORDINATOR_FENCED); the producer state closes the transaction; the answer
waits until the high watermark passes the marker, as acks=all. On a `__consumer_offsets`
partition the group coordinator then makes the producer's TxnOffsetCommit offsets count
(commit) or drops them (abort).
"""
from __future__ import annotations

import logging

from broker.delayed_produce import PendingAck, await_acks
from broker.group_settings import OFFSETS_TOPIC
from metadata.controller.dynamic_configs import effective_topic_value
from storage.log import LogError
from wire.batch_header import parse_header
from wire.error_codes import ErrorCode
from wire.records import build_end_txn_marker

__all__ = ["write_markers"]

log = logging.getLogger(__name__)
TopicPartition = tuple[str, int]


async def write_markers(broker, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                        partitions: list[TopicPartition], deadline: float) -> dict[TopicPartition, int]:
    """Append the marker to each partition this broker leads; the error code of each."""
    results: dict[TopicPartition, int] = {}
    waits: list[PendingAck] = []
    for key in partitions:
        topic, index = key
        found = await broker.leader_partition(topic, index, deadline)
        if isinstance(found, int):
            results[key] = found
            continue
        partition = found
        now_ms = broker.env.wall_ms()
        marker = build_end_txn_marker(commit, producer_id=producer_id, producer_epoch=producer_epoch,
                                      coordinator_epoch=coordinator_epoch, timestamp=now_ms)
        header = parse_header(marker)
        verdict = broker.producer_states.check_marker(partition, header, coordinator_epoch)
        if verdict.error != ErrorCode.NONE:
            results[key] = verdict.error
            continue
        try:
            info = partition.append_as_leader(marker, now_ms)
        except LogError as exc:
            log.warning("marker append to %s-%d failed: %s", topic, index, exc)
            results[key] = ErrorCode.KAFKA_STORAGE_ERROR
            continue
        broker.producer_states.record(partition, header, info, now_ms, commit, coordinator_epoch)
        min_isr = effective_topic_value(broker.metadata.image, topic, "min.insync.replicas", broker.static) or 1
        results[key] = ErrorCode.NONE
        waits.append(PendingAck(partition, partition.leader_epoch, info.last_offset, min_isr,
                                lambda code, key=key: results.__setitem__(key, code)))
    if waits:
        await await_acks(broker.env, broker.purgatory, waits, deadline, lambda k: broker.replicas.get(*k))
    for (topic, index), error in results.items():
        if topic == OFFSETS_TOPIC and error == ErrorCode.NONE:
            broker.groups.coordinator.complete_transaction(index, producer_id, commit)
    return results
