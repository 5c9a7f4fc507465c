"""InitProducerId v0-1: idempotent producers here, transactional ones through the transaction
coordinator (broker.handlers.transactions).

Ids come from blocks the active controller allocates (ProducerIds records), through
broker.producer_state_hooks.ProducerStates.allocator; a non-transactional producer
always gets a fresh id at epoch 0. While no block can be had the answer is
COORDINATOR_LOAD_IN_PROGRESS, which clients retry.
"""
from __future__ import annotations

from broker.authorization import allowed, cluster_allowed, topic_allowed
from broker.handlers.transactions import init_transactional_producer
from metadata.acls import AclOperation, ResourceType
from wire.error_codes import ErrorCode
from wire.protocol import InitProducerIdResponse

__all__ = ["handle", "error_response"]


async def handle(broker, header, request) -> InitProducerIdResponse:
    tx_id = request.transactional_id
    if tx_id is not None and not allowed(broker, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, tx_id):
        return error_response(broker, header, request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if tx_id is None and not _may_produce_idempotently(broker):
        return error_response(broker, header, request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if tx_id is not None:
        return await init_transactional_producer(broker, header, request)
    result = await broker.producer_states.allocator.init_producer_id(None, request.transaction_timeout_ms)
    return InitProducerIdResponse(throttle_time_ms=0, error_code=result.error, producer_id=result.producer_id,
                                  producer_epoch=result.producer_epoch)


def _may_produce_idempotently(broker) -> bool:
    """IDEMPOTENT_WRITE on the cluster, or WRITE on some topic (KIP-679, as Kafka 3.0+)."""
    if cluster_allowed(broker, AclOperation.IDEMPOTENT_WRITE):
        return True
    return any(topic_allowed(broker, AclOperation.WRITE, name) for name in broker.metadata.image.topics_by_name)


def error_response(broker, header, request, code: int) -> InitProducerIdResponse:
    return InitProducerIdResponse(throttle_time_ms=0, error_code=code, producer_id=-1, producer_epoch=-1)
