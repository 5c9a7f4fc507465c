"""DescribeTransactions, ListTransactions and DescribeProducers (KIP-664): what an operator
sees of transactions — the coordinator's state of each transactional id, and each
partition's producers with the offset their open transaction started at (a hanging
transaction shows there).

Authorization as Kafka's KafkaApis: DESCRIBE on the transactional id (and on each topic of
its transaction) for DescribeTransactions; ListTransactions leaves out ids the caller may
not describe; READ on the topic for DescribeProducers.
"""
from __future__ import annotations

from broker.authorization import allowed, topic_allowed
from broker.transactions import TxnState
from metadata.acls import AclOperation, ResourceType
from wire.error_codes import ErrorCode
from wire.protocol import DescribeProducersResponse, DescribeTransactionsResponse, ListTransactionsResponse

__all__ = ["handle_describe_transactions", "describe_transactions_error", "handle_list_transactions",
           "list_transactions_error", "handle_describe_producers", "describe_producers_error"]

E = ErrorCode
_STATES = {state.kafka_name: state for state in TxnState}


def _may_describe(broker, transactional_id: str) -> bool:
    return allowed(broker, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id)


# -- DescribeTransactions ----------------------------------------------------------------
def _described(transactional_id: str, code: int, txn=None) -> DescribeTransactionsResponse.TransactionState:
    R = DescribeTransactionsResponse
    if txn is None:
        return R.TransactionState(error_code=code, transactional_id=transactional_id, transaction_state="",
                                  transaction_timeout_ms=0, transaction_start_time_ms=-1, producer_id=-1,
                                  producer_epoch=-1, topics=[])
    topics: dict[str, list[int]] = {}
    for topic, partition in sorted(txn.partitions):
        topics.setdefault(topic, []).append(partition)
    return R.TransactionState(error_code=code, transactional_id=transactional_id,
                              transaction_state=txn.state.kafka_name, transaction_timeout_ms=txn.timeout_ms,
                              transaction_start_time_ms=txn.txn_start_ms, producer_id=txn.producer_id,
                              producer_epoch=txn.producer_epoch,
                              topics=[R.TopicData(topic=t, partitions=ps) for t, ps in topics.items()])


async def handle_describe_transactions(broker, header, request) -> DescribeTransactionsResponse:
    coordinator = broker.transactions.coordinator
    states = []
    for transactional_id in request.transactional_ids:
        if not _may_describe(broker, transactional_id):
            states.append(_described(transactional_id, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
            continue
        error, txn = coordinator.describe(transactional_id)
        if txn is not None and not all(topic_allowed(broker, AclOperation.DESCRIBE, t) for t, _ in txn.partitions):
            error, txn = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None
        states.append(_described(transactional_id, error, txn))
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=states)


def describe_transactions_error(broker, header, request, code: int) -> DescribeTransactionsResponse:
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=[
        _described(t, code) for t in request.transactional_ids])


# -- ListTransactions --------------------------------------------------------------------
async def handle_list_transactions(broker, header, request) -> ListTransactionsResponse:
    R = ListTransactionsResponse
    unknown = [name for name in request.state_filters if name not in _STATES]
    states = {_STATES[name] for name in request.state_filters if name in _STATES}
    error, found = broker.transactions.coordinator.list_transactions(
        states, set(request.producer_id_filters), request.duration_filter, broker.transactions.now())
    return R(throttle_time_ms=0, error_code=error, unknown_state_filters=unknown, transaction_states=[
        R.TransactionState(transactional_id=t.transactional_id, producer_id=t.producer_id,
                           transaction_state=t.state.kafka_name)
        for t in found if _may_describe(broker, t.transactional_id)])


def list_transactions_error(broker, header, request, code: int) -> ListTransactionsResponse:
    return ListTransactionsResponse(throttle_time_ms=0, error_code=code, unknown_state_filters=[],
                                    transaction_states=[])


# -- DescribeProducers -------------------------------------------------------------------
def _producers_partition(index: int, code: int, message: str | None = None, producers=()):
    R = DescribeProducersResponse
    return R.PartitionResponse(partition_index=index, error_code=code, error_message=message, active_producers=[
        R.ProducerState(producer_id=e.producer_id, producer_epoch=e.epoch, last_sequence=e.last_seq,
                        last_timestamp=e.last_timestamp, coordinator_epoch=e.coordinator_epoch,
                        current_txn_start_offset=e.current_txn_first_offset) for e in producers])


async def handle_describe_producers(broker, header, request) -> DescribeProducersResponse:
    R = DescribeProducersResponse
    deadline = broker.env.now() + broker.config.replica_apply_timeout_s
    topics = []
    for topic in request.topics:
        readable = topic_allowed(broker, AclOperation.READ, topic.name)
        parts = []
        for index in topic.partition_indexes:
            if not readable:
                parts.append(_producers_partition(index, E.TOPIC_AUTHORIZATION_FAILED))
                continue
            found = await broker.leader_partition(topic.name, index, deadline)
            if isinstance(found, int):
                parts.append(_producers_partition(index, found))
                continue
            state = broker.producer_states.state_for(found)
            parts.append(_producers_partition(index, E.NONE, None,
                                              [state.producers[pid] for pid in sorted(state.producers)]))
        topics.append(R.TopicResponse(name=topic.name, partitions=parts))
    return R(throttle_time_ms=0, topics=topics)


def describe_producers_error(broker, header, request, code: int) -> DescribeProducersResponse:
    R = DescribeProducersResponse
    return R(throttle_time_ms=0, topics=[R.TopicResponse(name=t.name, partitions=[
        _producers_partition(i, code) for i in t.partition_indexes]) for t in request.topics])
