"""The admin's view of transactions (Kafka's Admin.listTransactions / describeTransactions /
describeProducers / abortTransaction), over an `Admin`'s cluster connections.

    await list_transactions(admin, states=["Ongoing"])          -> [ListedTransaction]
    await describe_transaction(admin, "tx-1")                    -> TransactionDescription
    await describe_producers(admin, "orders", 0)                 -> [ProducerDescription]
    await abort_transaction(admin, "orders", 0, producer_id, producer_epoch, coordinator_epoch)

`abort_transaction` writes an ABORT marker on one partition (WriteTxnMarkers to its leader,
which needs CLUSTER_ACTION): what an operator does to a hanging transaction, one whose
coordinator no longer knows it.
"""
from __future__ import annotations

from dataclasses import dataclass

from raftkafka.client.errors import error_for
from wire.error_codes import ErrorCode
from wire.protocol import (
    DescribeProducersRequest, DescribeTransactionsRequest, FindCoordinatorRequest, ListTransactionsRequest,
    WriteTxnMarkersRequest,
)

__all__ = ["ListedTransaction", "TransactionDescription", "ProducerDescription", "list_transactions",
           "describe_transaction", "describe_producers", "abort_transaction"]

_TRANSACTION_KEY = 1
_FIND_ATTEMPTS = 50


@dataclass(frozen=True)
class ListedTransaction:
    transactional_id: str
    producer_id: int
    state: str
    coordinator: int


@dataclass(frozen=True)
class TransactionDescription:
    transactional_id: str
    coordinator: int
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int
    partitions: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class ProducerDescription:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


async def list_transactions(admin, *, states=(), producer_ids=(), duration_ms: int = -1) -> list[ListedTransaction]:
    """Every broker's transactions (each lists those it coordinates)."""
    await admin.cluster.refresh()
    found = []
    for node in sorted(admin.cluster.brokers):
        r = await admin.cluster.send(node, ListTransactionsRequest(
            state_filters=list(states), producer_id_filters=list(producer_ids), duration_filter=duration_ms))
        if r.error_code:
            raise error_for(r.error_code, context=f"ListTransactions on broker {node}")
        if r.unknown_state_filters:
            raise error_for(ErrorCode.INVALID_REQUEST, context=f"unknown states {', '.join(r.unknown_state_filters)}")
        found += [ListedTransaction(t.transactional_id, t.producer_id, t.transaction_state, node)
                  for t in r.transaction_states]
    return sorted(found, key=lambda t: t.transactional_id)


async def _coordinator(admin, transactional_id: str) -> int:
    for _ in range(_FIND_ATTEMPTS):
        r = await admin.cluster.request_any(FindCoordinatorRequest(key=transactional_id, key_type=_TRANSACTION_KEY))
        if r.error_code == ErrorCode.NONE:
            return r.node_id
        if r.error_code not in (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
            raise error_for(r.error_code, r.error_message, context=f"FindCoordinator {transactional_id}")
        await admin.env.sleep(0.1)
    raise error_for(ErrorCode.COORDINATOR_NOT_AVAILABLE, context=f"FindCoordinator {transactional_id}")


async def describe_transaction(admin, transactional_id: str) -> TransactionDescription:
    node = await _coordinator(admin, transactional_id)
    await admin.cluster.refresh()
    r = await admin.cluster.send(node, DescribeTransactionsRequest(transactional_ids=[transactional_id]))
    [t] = r.transaction_states
    if t.error_code:
        raise error_for(t.error_code, context=transactional_id)
    return TransactionDescription(t.transactional_id, node, t.transaction_state, t.producer_id, t.producer_epoch,
                                  t.transaction_timeout_ms, t.transaction_start_time_ms,
                                  tuple((d.topic, p) for d in t.topics for p in d.partitions))


async def _leader(admin, topic: str, partition: int) -> int:
    info = (await admin.describe_topics([topic])).get(topic)
    if info is None or info.error or partition not in info.partitions:
        raise error_for(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, context=f"{topic}-{partition}")
    leader = info.partitions[partition].leader
    if leader < 0:
        raise error_for(ErrorCode.LEADER_NOT_AVAILABLE, context=f"{topic}-{partition}")
    return leader


async def describe_producers(admin, topic: str, partition: int) -> list[ProducerDescription]:
    R = DescribeProducersRequest
    r = await admin.cluster.send(await _leader(admin, topic, partition), R(topics=[
        R.TopicRequest(name=topic, partition_indexes=[partition])]))
    [p] = r.topics[0].partitions
    if p.error_code:
        raise error_for(p.error_code, p.error_message, context=f"{topic}-{partition}")
    return [ProducerDescription(s.producer_id, s.producer_epoch, s.last_sequence, s.last_timestamp,
                                s.coordinator_epoch, s.current_txn_start_offset) for s in p.active_producers]


async def abort_transaction(admin, topic: str, partition: int, producer_id: int, producer_epoch: int,
                            coordinator_epoch: int) -> None:
    W = WriteTxnMarkersRequest
    r = await admin.cluster.send(await _leader(admin, topic, partition), W(markers=[W.WritableTxnMarker(
        producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=False,
        coordinator_epoch=coordinator_epoch,
        topics=[W.WritableTxnMarkerTopic(name=topic, partition_indexes=[partition])])]))
    code = r.markers[0].topics[0].partitions[0].error_code
    if code:
        raise error_for(code, context=f"abort on {topic}-{partition}")
