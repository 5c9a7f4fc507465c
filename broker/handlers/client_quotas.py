"""DescribeClientQuotas v0-1 (answered from this broker's image) and AlterClientQuotas v0-1
(forwarded to the active controller), KIP-546.

As Kafka's KafkaApis: describing needs DESCRIBE_CONFIGS on the cluster (else a top-level
CLUSTER_AUTHORIZATION_FAILED), altering ALTER_CONFIGS on the cluster (else every entry
answers CLUSTER_AUTHORIZATION_FAILED). A filter Kafka refuses answers its error at the top
level; an entry the controller refuses answers its own error and the others still apply.
"""
from __future__ import annotations

from broker.authorization import cluster_allowed
from broker.controller_channel import ControllerUnavailableError, QuotaAlteration, QuotaOp
from metadata.acls import AclOperation
from metadata.client_quotas import QuotaFilterError, describe
from wire.error_codes import ErrorCode
from wire.protocol import AlterClientQuotasResponse, DescribeClientQuotasResponse

__all__ = ["handle_describe", "describe_error", "handle_alter", "alter_error"]

DEFAULT_TIMEOUT_S = 30.0


async def handle_describe(broker, header, request) -> DescribeClientQuotasResponse:
    if not cluster_allowed(broker, AclOperation.DESCRIBE_CONFIGS):
        return describe_error(broker, header, request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    R = DescribeClientQuotasResponse
    components = [(c.entity_type, c.match_type, c.match) for c in request.components]
    try:
        matched = describe(broker.metadata.image.client_quotas, components, request.strict)
    except QuotaFilterError as e:
        return R(throttle_time_ms=0, error_code=e.code, error_message=e.message, entries=None)
    entries = [R.EntryData(entity=[R.EntityData(entity_type=p.entity_type, entity_name=p.entity_name)
                                   for p in entity],
                           values=[R.ValueData(key=k, value=v) for k, v in sorted(values.items())])
               for entity, values in matched]
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, entries=entries)


def describe_error(broker, header, request, code: int) -> DescribeClientQuotasResponse:
    return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=code, error_message=None, entries=None)


async def handle_alter(broker, header, request) -> AlterClientQuotasResponse:
    if not cluster_allowed(broker, AclOperation.ALTER_CONFIGS):
        return alter_error(broker, header, request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    changes = [QuotaAlteration(tuple((e.entity_type, e.entity_name) for e in entry.entity),
                               tuple(QuotaOp(o.key, o.value, o.remove) for o in entry.ops))
               for entry in request.entries]
    try:
        reply = await broker.controller.alter_client_quotas(changes, validate_only=request.validate_only,
                                                            timeout_s=DEFAULT_TIMEOUT_S)
    except ControllerUnavailableError:
        return alter_error(broker, header, request, ErrorCode.REQUEST_TIMED_OUT)
    if reply.offset >= 0:  # answer once this broker enforces the new quotas
        await broker.metadata.wait_for_offset(reply.offset, broker.env.now() + DEFAULT_TIMEOUT_S)
    R = AlterClientQuotasResponse
    return R(throttle_time_ms=0, entries=[
        R.EntryData(error_code=int(code), error_message=message, entity=_entity(R, entry))
        for entry, (code, message) in zip(request.entries, reply.results)])


def _entity(R, entry) -> list:
    return [R.EntityData(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity]


def alter_error(broker, header, request, code: int) -> AlterClientQuotasResponse:
    R = AlterClientQuotasResponse
    return R(throttle_time_ms=0, entries=[R.EntryData(error_code=code, error_message=None, entity=_entity(R, e))
                                          for e in request.entries])
