"""DescribeAcls v0-3 (answered from this broker's image), CreateAcls and DeleteAcls v0-3
(forwarded to the active controller; answered once this broker's image has the change).

As Kafka: without an authorizer every item answers SECURITY_DISABLED; describing needs
DESCRIBE on the cluster, creating and deleting ALTER (CLUSTER_AUTHORIZATION_FAILED).
A v0 request means LITERAL patterns (the codec's default for the absent field).
"""
from __future__ import annotations

from itertools import groupby

from broker.authorization import cluster_allowed
from broker.controller_channel import ControllerUnavailableError
from metadata.acls import AclBinding, AclFilter, AclOperation, binding_of, invalid_filter
from wire.error_codes import ErrorCode
from wire.protocol import CreateAclsResponse, DeleteAclsResponse, DescribeAclsResponse

__all__ = ["handle_describe", "describe_error", "handle_create", "create_error", "handle_delete", "delete_error"]

TIMEOUT_S = 30.0
_NO_AUTHORIZER = "No Authorizer is configured."


def _refusal(broker, operation: AclOperation) -> tuple[ErrorCode, str] | None:
    if not broker.config.authorizer.enabled:
        return ErrorCode.SECURITY_DISABLED, _NO_AUTHORIZER
    if not cluster_allowed(broker, operation):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
    return None


def _filter(f) -> AclFilter:
    return AclFilter(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter, f.principal_filter,
                     f.host_filter, f.operation, f.permission_type)


async def _caught_up(broker, offset: int) -> None:
    if offset >= 0:
        await broker.metadata.wait_for_offset(offset, broker.env.now() + TIMEOUT_S)


# -- DescribeAcls ------------------------------------------------------------------------
async def handle_describe(broker, header, request) -> DescribeAclsResponse:
    refused = _refusal(broker, AclOperation.DESCRIBE)
    if refused is not None:
        return describe_error(broker, header, request, *refused)
    flt = _filter(request)
    reason = invalid_filter(flt)
    if reason is not None:
        return describe_error(broker, header, request, ErrorCode.INVALID_REQUEST, reason)
    R = DescribeAclsResponse
    matching = sorted(b for b in map(binding_of, broker.metadata.image.acls.values()) if flt.matches(b))
    resources = []
    for (rtype, name, pattern), acls in groupby(matching, key=lambda b: b[:3]):
        resources.append(R.DescribeAclsResource(resource_type=rtype, resource_name=name, pattern_type=pattern, acls=[
            R.AclDescription(principal=b.principal, host=b.host, operation=b.operation, permission_type=b.permission)
            for b in acls]))
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, resources=resources)


def describe_error(broker, header, request, code: int, message: str | None = None) -> DescribeAclsResponse:
    return DescribeAclsResponse(throttle_time_ms=0, error_code=code, error_message=message, resources=[])


# -- CreateAcls --------------------------------------------------------------------------
async def handle_create(broker, header, request) -> CreateAclsResponse:
    refused = _refusal(broker, AclOperation.ALTER)
    if refused is not None:
        return create_error(broker, header, request, *refused)
    bindings = [AclBinding(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host,
                           c.operation, c.permission_type) for c in request.creations]
    if not bindings:
        return CreateAclsResponse(throttle_time_ms=0, results=[])
    try:
        reply = await broker.controller.create_acls(bindings, timeout_s=TIMEOUT_S)
    except ControllerUnavailableError as exc:
        return create_error(broker, header, request, ErrorCode.REQUEST_TIMED_OUT, str(exc))
    await _caught_up(broker, reply.offset)
    R = CreateAclsResponse
    return R(throttle_time_ms=0, results=[R.AclCreationResult(error_code=int(r.error), error_message=r.message)
                                          for r in reply.results])


def create_error(broker, header, request, code: int, message: str | None = None) -> CreateAclsResponse:
    R = CreateAclsResponse
    return R(throttle_time_ms=0, results=[R.AclCreationResult(error_code=code, error_message=message)
                                          for _ in request.creations])


# -- DeleteAcls --------------------------------------------------------------------------
async def handle_delete(broker, header, request) -> DeleteAclsResponse:
    refused = _refusal(broker, AclOperation.ALTER)
    if refused is not None:
        return delete_error(broker, header, request, *refused)
    filters = [_filter(f) for f in request.filters]
    if not filters:
        return DeleteAclsResponse(throttle_time_ms=0, filter_results=[])
    try:
        reply = await broker.controller.delete_acls(filters, timeout_s=TIMEOUT_S)
    except ControllerUnavailableError as exc:
        return delete_error(broker, header, request, ErrorCode.REQUEST_TIMED_OUT, str(exc))
    await _caught_up(broker, reply.offset)
    R = DeleteAclsResponse
    return R(throttle_time_ms=0, filter_results=[R.DeleteAclsFilterResult(
        error_code=int(r.error), error_message=r.message, matching_acls=[R.DeleteAclsMatchingAcl(
            error_code=ErrorCode.NONE, error_message=None, resource_type=b.resource_type,
            resource_name=b.resource_name, pattern_type=b.pattern_type, principal=b.principal, host=b.host,
            operation=b.operation, permission_type=b.permission) for b in r.deleted])
        for r in reply.results])


def delete_error(broker, header, request, code: int, message: str | None = None) -> DeleteAclsResponse:
    R = DeleteAclsResponse
    return R(throttle_time_ms=0, filter_results=[R.DeleteAclsFilterResult(error_code=code, error_message=message,
                                                                          matching_acls=[])
                                                 for _ in request.filters])
