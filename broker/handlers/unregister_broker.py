"""UnregisterBroker v0 (KIP-500/KIP-856): decommission a broker, forwarded to the active controller.

As in Kafka, an unknown id answers BROKER_ID_NOT_REGISTERED and a running broker that is
unregistered registers again at its next heartbeat. The controller also refuses a broker
that is still a replica of any partition (INVALID_REQUEST naming them): decommissioning
starts with reassigning its partitions away.
"""
from __future__ import annotations

from broker.authorization import cluster_allowed
from broker.controller_channel import ControllerUnavailableError
from metadata.acls import AclOperation
from wire.error_codes import ErrorCode
from wire.protocol import UnregisterBrokerResponse

__all__ = ["handle", "error_response"]

TIMEOUT_S = 30.0  # the request carries no timeout


async def handle(broker, header, request) -> UnregisterBrokerResponse:
    if not cluster_allowed(broker, AclOperation.ALTER):
        return error_response(broker, header, request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    try:
        reply = await broker.controller.unregister_broker(request.broker_id, timeout_s=TIMEOUT_S)
    except ControllerUnavailableError as exc:
        return error_response(broker, header, request, ErrorCode.REQUEST_TIMED_OUT, str(exc))
    error, message = reply.results
    if reply.offset >= 0:  # answer once this broker's metadata shows the broker gone
        await broker.metadata.wait_for_offset(reply.offset, broker.env.now() + TIMEOUT_S)
    return error_response(broker, header, request, error, message)


def error_response(broker, header, request, code: int, message: str | None = None) -> UnregisterBrokerResponse:
    return UnregisterBrokerResponse(throttle_time_ms=0, error_code=code, error_message=message)
