"""DescribeCluster (KIP-700): the live brokers and the controller id clients should use."""
from __future__ import annotations

from broker.authorization import authorized_operations, cluster_allowed
from metadata.acls import CLUSTER_NAME, AclOperation, ResourceType
from metadata.authorizer import AUTHORIZED_OPERATIONS_OMITTED
from wire.error_codes import ErrorCode
from wire.protocol import DescribeClusterResponse

__all__ = ["handle", "error_response"]

BROKERS_ENDPOINT_TYPE = 1


async def handle(broker, header, request) -> DescribeClusterResponse:
    if request.endpoint_type != BROKERS_ENDPOINT_TYPE:
        return error_response(broker, header, request, ErrorCode.INVALID_REQUEST)
    if not cluster_allowed(broker, AclOperation.DESCRIBE):
        return error_response(broker, header, request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    cache = broker.metadata
    ops = (authorized_operations(broker, ResourceType.CLUSTER, CLUSTER_NAME)
           if request.include_cluster_authorized_operations else AUTHORIZED_OPERATIONS_OMITTED)
    return DescribeClusterResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, endpoint_type=BROKERS_ENDPOINT_TYPE,
        cluster_id=broker.cluster_id, controller_id=cache.controller_id(),
        brokers=[DescribeClusterResponse.DescribeClusterBroker(broker_id=b.node_id, host=b.host, port=b.port,
                                                                rack=b.rack)
                 for b in cache.alive_brokers()],
        cluster_authorized_operations=ops,
    )


def error_response(broker, header, request, code: int) -> DescribeClusterResponse:
    return DescribeClusterResponse(throttle_time_ms=0, error_code=code, cluster_id=broker.cluster_id,
                                   brokers=[])
