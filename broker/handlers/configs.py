"""DescribeConfigs v0-2 (answered locally from the image), AlterConfigs v0-1 and
IncrementalAlterConfigs v0-1 (forwarded to the active controller).

Describe resolves each setting through Kafka's layers (topic override →
dynamic per-broker → dynamic cluster default → this node's static file →
default) with the metadata layer's pure `describe_configs`.
"""
from __future__ import annotations

from broker.authorization import config_resource_error
from broker.controller_channel import AlterOp, ControllerUnavailableError
from metadata.acls import AclOperation
from metadata.config_definitions import ConfigSource
from metadata.controller.dynamic_configs import ConfigError
from metadata.controller.dynamic_configs import describe_configs
from wire.error_codes import ErrorCode
from wire.protocol import AlterConfigsResponse, DescribeConfigsResponse, IncrementalAlterConfigsResponse

__all__ = ["handle_describe", "handle_alter", "handle_incremental_alter",
           "describe_error", "alter_error", "incremental_alter_error"]

DEFAULT_TIMEOUT_S = 30.0


# -- DescribeConfigs --------------------------------------------------------------------
async def handle_describe(broker, header, request) -> DescribeConfigsResponse:
    R = DescribeConfigsResponse
    image = broker.metadata.image
    static = broker.config.static_with_identity()
    include_synonyms = header.api_version >= 1 and request.include_synonyms
    results = []
    for res in request.resources:
        refused = config_resource_error(broker, AclOperation.DESCRIBE_CONFIGS, res.resource_type, res.resource_name)
        if refused is not None:
            results.append(R.DescribeConfigsResult(error_code=refused, error_message=None,
                                                   resource_type=res.resource_type,
                                                   resource_name=res.resource_name, configs=[]))
            continue
        error, described = describe_configs(image, (res.resource_type, res.resource_name),
                                            res.configuration_keys, include_synonyms=include_synonyms,
                                            static=static)
        configs = [R.DescribeConfigsResourceResult(
            name=d.name, value=d.value, read_only=d.read_only,
            is_default=d.source == ConfigSource.DEFAULT_CONFIG, config_source=int(d.source),
            is_sensitive=d.sensitive,
            synonyms=[R.DescribeConfigsSynonym(name=s.name, value=s.value, source=int(s.source))
                      for s in d.synonyms])
            for d in described]
        results.append(R.DescribeConfigsResult(error_code=int(error.code), error_message=error.message,
                                               resource_type=res.resource_type,
                                               resource_name=res.resource_name, configs=configs))
    return R(throttle_time_ms=0, results=results)


def describe_error(broker, header, request, code: int) -> DescribeConfigsResponse:
    R = DescribeConfigsResponse
    return R(throttle_time_ms=0, results=[R.DescribeConfigsResult(
        error_code=code, error_message=None, resource_type=r.resource_type, resource_name=r.resource_name,
        configs=[]) for r in request.resources])


# -- AlterConfigs / IncrementalAlterConfigs ----------------------------------------------
def _alter_responses(cls, request, results, default_code=ErrorCode.UNKNOWN_SERVER_ERROR):
    out = []
    for r in request.resources:
        err = results.get((r.resource_type, r.resource_name))
        code, message = (default_code, None) if err is None else (int(err.code), err.message)
        out.append(cls.AlterConfigsResourceResponse(error_code=code, error_message=message,
                                                    resource_type=r.resource_type,
                                                    resource_name=r.resource_name))
    return cls(throttle_time_ms=0, responses=out)


async def _forward(broker, call, resources, request, cls):
    refused = {}
    for key in list(resources):
        code = config_resource_error(broker, AclOperation.ALTER_CONFIGS, *key)
        if code is not None:
            refused[key] = ConfigError(code)
            del resources[key]
    if not resources:
        return _alter_responses(cls, request, refused)
    try:
        reply = await call(resources, validate_only=request.validate_only, timeout_s=DEFAULT_TIMEOUT_S)
    except ControllerUnavailableError:
        return _alter_responses(cls, request, refused, ErrorCode.REQUEST_TIMED_OUT)
    if reply.offset >= 0:
        await broker.metadata.wait_for_offset(reply.offset, broker.env.now() + DEFAULT_TIMEOUT_S)
    return _alter_responses(cls, request, {**reply.results, **refused})


async def handle_alter(broker, header, request) -> AlterConfigsResponse:
    resources = {(r.resource_type, r.resource_name): {c.name: c.value for c in r.configs}
                 for r in request.resources}
    return await _forward(broker, broker.controller.alter_configs, resources, request, AlterConfigsResponse)


async def handle_incremental_alter(broker, header, request) -> IncrementalAlterConfigsResponse:
    resources = {}
    bad = set()
    for r in request.resources:
        ops = []
        for c in r.configs:
            try:
                ops.append((c.name, AlterOp(c.config_operation), c.value))
            except ValueError:
                bad.add((r.resource_type, r.resource_name))
        resources[(r.resource_type, r.resource_name)] = ops
    if bad:
        return _alter_responses(IncrementalAlterConfigsResponse, request, {}, ErrorCode.INVALID_REQUEST)
    return await _forward(broker, broker.controller.incremental_alter_configs, resources, request,
                          IncrementalAlterConfigsResponse)


def alter_error(broker, header, request, code: int) -> AlterConfigsResponse:
    return _alter_responses(AlterConfigsResponse, request, {}, code)


def incremental_alter_error(broker, header, request, code: int) -> IncrementalAlterConfigsResponse:
    return _alter_responses(IncrementalAlterConfigsResponse, request, {}, code)
