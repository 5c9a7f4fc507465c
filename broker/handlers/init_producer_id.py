"""InitProducerId v0-1 for idempotent producers (transactions are not supported yet).

Ids come from blocks the active controller allocates (ProducerIds records), through
broker.producer_state_hooks.ProducerStates.allocator; a non-transactional producer
always gets a fresh id at epoch 0. While no block can be had the answer is
COORDINATOR_LOAD_IN_PROGRESS, which clients retry.
"""
from __future__ import annotations

from wire.protocol import InitProducerIdResponse

__all__ = ["handle", "error_response"]


async def handle(broker, header, request) -> InitProducerIdResponse:
    result = await broker.producer_states.allocator.init_producer_id(request.transactional_id,
                                                                      request.transaction_timeout_ms)
    return InitProducerIdResponse(throttle_time_ms=0, error_code=result.error, producer_id=result.producer_id,
                                  producer_epoch=result.producer_epoch)


def error_response(broker, header, request, code: int) -> InitProducerIdResponse:
    return InitProducerIdResponse(throttle_time_ms=0, error_code=code, producer_id=-1, producer_epoch=-1)
