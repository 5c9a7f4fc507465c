"""DescribeCluster (KIP-700): the live brokers and the controller id clients should use."""
from __future__ import annotations

from wire.error_codes import ErrorCode
from wire.protocol import DescribeClusterResponse

__all__ = ["handle", "error_response"]

BROKERS_ENDPOINT_TYPE = 1


async def handle(broker, header, request) -> DescribeClusterResponse:
    if request.endpoint_type != BROKERS_ENDPOINT_TYPE:
        return error_response(broker, header, request, ErrorCode.INVALID_REQUEST)
    cache = broker.metadata
    return DescribeClusterResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, endpoint_type=BROKERS_ENDPOINT_TYPE,
        cluster_id=broker.cluster_id, controller_id=cache.controller_id(),
        brokers=[DescribeClusterResponse.DescribeClusterBroker(broker_id=b.node_id, host=b.host, port=b.port,
                                                                rack=b.rack)
                 for b in cache.alive_brokers()],
    )


def error_response(broker, header, request, code: int) -> DescribeClusterResponse:
    return DescribeClusterResponse(throttle_time_ms=0, error_code=code, cluster_id=broker.cluster_id,
                                   brokers=[])
