"""InitProducerId with a transactional id, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
TxnOffsetCommit and WriteTxnMarkers: thin translations between the wire classes and the
transaction coordinator (broker.txn_driver), the group coordinator (TxnOffsetCommit) and
the partition side (broker.txn_markers).

Authorization as Kafka's KafkaApis: WRITE on the TRANSACTIONAL_ID for every client call,
WRITE on each topic added, READ on the group (AddOffsetsToTxn, TxnOffsetCommit) and on
each topic committed, CLUSTER_ACTION for WriteTxnMarkers. PRODUCER_FENCED is answered as
INVALID_PRODUCER_EPOCH to versions that predate it (InitProducerId < 4, the others < 2).
"""
from __future__ import annotations

from broker.authorization import allowed, cluster_allowed, group_allowed, topic_allowed
from broker.group_settings import OFFSETS_TOPIC
from broker.groups import CommitResult
from broker.producer_state import ProducerIdsUnavailable
from broker.transactions import TxnResult
from broker.txn_markers import write_markers
from metadata.acls import AclOperation, ResourceType
from wire.error_codes import ErrorCode
from wire.protocol import (
    AddOffsetsToTxnResponse, AddPartitionsToTxnResponse, EndTxnResponse, InitProducerIdResponse,
    TxnOffsetCommitResponse, WriteTxnMarkersResponse,
)

__all__ = [
    "init_transactional_producer", "handle_add_partitions", "add_partitions_error", "handle_add_offsets",
    "add_offsets_error", "handle_end_txn", "end_txn_error", "handle_txn_offset_commit", "txn_offset_commit_error",
    "handle_write_markers", "write_markers_error",
]

E = ErrorCode
_MARKER_TIMEOUT_S = 30.0


def _fenced_for(version: int, first_version: int, code: int) -> int:
    return E.INVALID_PRODUCER_EPOCH if code == E.PRODUCER_FENCED and version < first_version else code


def _may_write(broker, transactional_id: str) -> bool:
    return allowed(broker, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)


# -- InitProducerId ----------------------------------------------------------------------
async def init_transactional_producer(broker, header, request) -> InitProducerIdResponse:
    """InitProducerId for a transactional id (the caller checked WRITE on it)."""
    tx_id = request.transactional_id
    driver = broker.transactions
    coordinator = driver.coordinator
    new_id = None
    if coordinator.route_error(tx_id) == E.NONE and coordinator.needs_producer_id(tx_id):
        try:
            new_id = await broker.producer_states.allocator.next_producer_id()
        except (ProducerIdsUnavailable, OSError):
            return _init_answer(E.COORDINATOR_LOAD_IN_PROGRESS)
    result: TxnResult = await driver.call(lambda token, now: coordinator.init_producer_id(
        token, tx_id, request.transaction_timeout_ms, new_id, now))
    return _init_answer(_fenced_for(header.api_version, 4, result.error), result.producer_id, result.producer_epoch)


def _init_answer(code: int, producer_id: int = -1, epoch: int = -1) -> InitProducerIdResponse:
    return InitProducerIdResponse(throttle_time_ms=0, error_code=code, producer_id=producer_id, producer_epoch=epoch)


def _by_topic(errors: dict[tuple[str, int], int], topic_cls, partition_cls, partitions_field: str) -> list:
    """{(topic, partition): error} -> [topic_cls(name=..., <partitions_field>=[partition_cls...])]."""
    topics: dict[str, list] = {}
    for (topic, index), code in errors.items():
        topics.setdefault(topic, []).append(partition_cls(partition_index=index, error_code=code))
    return [topic_cls(name=t, **{partitions_field: ps}) for t, ps in topics.items()]


# -- AddPartitionsToTxn ------------------------------------------------------------------
def _topic_results(errors: dict[tuple[str, int], int], topic_cls, partition_cls) -> list:
    return _by_topic(errors, topic_cls, partition_cls, "results")


def _add_partitions_response(errors: dict[tuple[str, int], int]) -> AddPartitionsToTxnResponse:
    R = AddPartitionsToTxnResponse
    return R(throttle_time_ms=0, results=_topic_results(errors, R.V3AndBelowTopicResult, R.V3AndBelowPartitionResult))


async def handle_add_partitions(broker, header, request) -> AddPartitionsToTxnResponse:
    if header.api_version >= 4:
        return await _add_partitions_batched(broker, request)
    tx_id = request.transactional_id
    if not _may_write(broker, tx_id):
        return add_partitions_error(broker, header, request, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    errors: dict[tuple[str, int], int] = {}
    wanted = []
    for topic in request.topics:
        writable = topic_allowed(broker, AclOperation.WRITE, topic.name)
        for index in topic.partitions:
            key = (topic.name, index)
            if not writable:
                errors[key] = E.TOPIC_AUTHORIZATION_FAILED
            elif broker.metadata.partition(topic.name, index) is None:
                errors[key] = E.UNKNOWN_TOPIC_OR_PARTITION
            else:
                wanted.append(key)
    if errors:
        # As Kafka: one refused partition and none is added; the others were not attempted.
        for key in wanted:
            errors[key] = E.OPERATION_NOT_ATTEMPTED
        return _add_partitions_response(errors)
    coordinator = broker.transactions.coordinator
    result: TxnResult = await broker.transactions.call(lambda token, now: coordinator.add_partitions(
        token, tx_id, request.producer_id, request.producer_epoch, wanted, now))
    code = _fenced_for(header.api_version, 2, result.error)
    return _add_partitions_response({key: code for key in wanted})


async def _add_partitions_batched(broker, request) -> AddPartitionsToTxnResponse:
    """v4+: from brokers (CLUSTER_ACTION), several transactions, each verified or added."""
    R = AddPartitionsToTxnResponse
    if not cluster_allowed(broker, AclOperation.CLUSTER_ACTION):
        return R(throttle_time_ms=0, error_code=E.CLUSTER_AUTHORIZATION_FAILED)
    coordinator = broker.transactions.coordinator
    results = []
    for txn in request.transactions:
        partitions = [(t.name, p) for t in txn.topics for p in t.partitions]
        if txn.verify_only:
            errors = coordinator.verify_partitions(txn.transactional_id, txn.producer_id, txn.producer_epoch,
                                                   partitions)
        else:
            result: TxnResult = await broker.transactions.call(lambda token, now, txn=txn: coordinator.add_partitions(
                token, txn.transactional_id, txn.producer_id, txn.producer_epoch, partitions, now))
            errors = {tp: result.error for tp in partitions}
        results.append(R.AddPartitionsToTxnResult(transactional_id=txn.transactional_id, topic_results=_topic_results(
            errors, R.AddPartitionsToTxnTopicResult, R.AddPartitionsToTxnPartitionResult)))
    return R(throttle_time_ms=0, error_code=E.NONE, results_by_transaction=results)


def add_partitions_error(broker, header, request, code: int) -> AddPartitionsToTxnResponse:
    if header.api_version >= 4:
        return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=code)
    return _add_partitions_response({(t.name, p): code for t in request.topics for p in t.partitions})


# -- AddOffsetsToTxn ---------------------------------------------------------------------
async def handle_add_offsets(broker, header, request) -> AddOffsetsToTxnResponse:
    tx_id = request.transactional_id
    if not _may_write(broker, tx_id):
        return add_offsets_error(broker, header, request, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not group_allowed(broker, AclOperation.READ, request.group_id):
        return add_offsets_error(broker, header, request, E.GROUP_AUTHORIZATION_FAILED)
    offsets_partition = (OFFSETS_TOPIC, broker.groups.coordinator.partition_for(request.group_id))
    coordinator = broker.transactions.coordinator
    result: TxnResult = await broker.transactions.call(lambda token, now: coordinator.add_partitions(
        token, tx_id, request.producer_id, request.producer_epoch, [offsets_partition], now))
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=_fenced_for(header.api_version, 2, result.error))


def add_offsets_error(broker, header, request, code: int) -> AddOffsetsToTxnResponse:
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=code)


# -- EndTxn ------------------------------------------------------------------------------
async def handle_end_txn(broker, header, request) -> EndTxnResponse:
    tx_id = request.transactional_id
    if not _may_write(broker, tx_id):
        return end_txn_error(broker, header, request, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    coordinator = broker.transactions.coordinator
    result: TxnResult = await broker.transactions.call(lambda token, now: coordinator.end_txn(
        token, tx_id, request.producer_id, request.producer_epoch, request.committed, now))
    return EndTxnResponse(throttle_time_ms=0, error_code=_fenced_for(header.api_version, 2, result.error))


def end_txn_error(broker, header, request, code: int) -> EndTxnResponse:
    return EndTxnResponse(throttle_time_ms=0, error_code=code)


# -- TxnOffsetCommit ---------------------------------------------------------------------
def _txn_commit_response(errors: dict[tuple[str, int], int]) -> TxnOffsetCommitResponse:
    R = TxnOffsetCommitResponse
    return R(throttle_time_ms=0, topics=_by_topic(errors, R.TxnOffsetCommitResponseTopic,
                                                  R.TxnOffsetCommitResponsePartition, "partitions"))


async def handle_txn_offset_commit(broker, header, request) -> TxnOffsetCommitResponse:
    if not _may_write(broker, request.transactional_id):
        return txn_offset_commit_error(broker, header, request, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not group_allowed(broker, AclOperation.READ, request.group_id):
        return txn_offset_commit_error(broker, header, request, E.GROUP_AUTHORIZATION_FAILED)
    errors: dict[tuple[str, int], int] = {}
    commits = []
    for topic in request.topics:
        readable = topic_allowed(broker, AclOperation.READ, topic.name)
        for p in topic.partitions:
            key = (topic.name, p.partition_index)
            if not readable:
                errors[key] = E.TOPIC_AUTHORIZATION_FAILED
            elif broker.metadata.partition(*key) is None:
                errors[key] = E.UNKNOWN_TOPIC_OR_PARTITION
            else:
                errors[key] = E.NONE
                commits.append((topic.name, p.partition_index, p.committed_offset, p.committed_leader_epoch,
                                p.committed_metadata))
    if commits:
        coordinator = broker.groups.coordinator
        result: CommitResult = await broker.groups.call(lambda token, now: coordinator.txn_commit_offsets(
            token, request.group_id, request.producer_id, request.producer_epoch, commits,
            generation_id=request.generation_id, member_id=request.member_id,
            group_instance_id=request.group_instance_id, now=now))
        for item in result.partitions:
            errors[(item.topic, item.partition)] = item.error
    return _txn_commit_response(errors)


def txn_offset_commit_error(broker, header, request, code: int) -> TxnOffsetCommitResponse:
    return _txn_commit_response({(t.name, p.partition_index): code for t in request.topics for p in t.partitions})


# -- WriteTxnMarkers ---------------------------------------------------------------------
def _markers_response(results: list[tuple[int, dict[tuple[str, int], int]]]) -> WriteTxnMarkersResponse:
    R = WriteTxnMarkersResponse
    markers = []
    for producer_id, errors in results:
        markers.append(R.WritableTxnMarkerResult(producer_id=producer_id, topics=_by_topic(
            errors, R.WritableTxnMarkerTopicResult, R.WritableTxnMarkerPartitionResult, "partitions")))
    return R(markers=markers)


async def handle_write_markers(broker, header, request) -> WriteTxnMarkersResponse:
    if not cluster_allowed(broker, AclOperation.CLUSTER_ACTION):
        return write_markers_error(broker, header, request, E.CLUSTER_AUTHORIZATION_FAILED)
    deadline = broker.env.now() + _MARKER_TIMEOUT_S
    results = []
    for marker in request.markers:
        partitions = [(t.name, p) for t in marker.topics for p in t.partition_indexes]
        errors = await write_markers(broker, marker.producer_id, marker.producer_epoch, marker.transaction_result,
                                     marker.coordinator_epoch, partitions, deadline)
        results.append((marker.producer_id, errors))
    return _markers_response(results)


def write_markers_error(broker, header, request, code: int) -> WriteTxnMarkersResponse:
    return _markers_response([(m.producer_id, {(t.name, p): code for t in m.topics for p in t.partition_indexes})
                              for m in request.markers])
