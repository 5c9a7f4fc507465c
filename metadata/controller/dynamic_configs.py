"""Alter / IncrementalAlter / Describe configs as pure functions of the image.

Resources are (resource_type, resource_name): topics by name, brokers by id string, and the
cluster-wide broker default as BROKER "". Each resource succeeds or fails on its own, as in
Kafka; a failed resource produces no records.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from metadata.config_definitions import (
    BROKER_CONFIGS, TOPIC_CONFIGS, ConfigDef, ConfigSource, ConfigType, Resolved, parse,
    resolve_broker_config, resolve_topic_config, validate_broker_config, validate_topic_config,
)
from metadata.errors import ApiError
from metadata.image import BROKER_RESOURCE, TOPIC_RESOURCE, ConfigResource, MetadataImage
from metadata.records import Config
from wire.error_codes import ErrorCode

__all__ = [
    "AlterOp", "ConfigError", "alter_configs", "incremental_alter_configs", "describe_configs",
    "DescribedConfig", "effective_topic_value", "effective_broker_value",
]


class AlterOp(enum.IntEnum):  # IncrementalAlterConfigs operation ids
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True, slots=True)
class ConfigError:
    code: ErrorCode
    message: str | None = None


_OK = ConfigError(ErrorCode.NONE)


def _check_resource(image: MetadataImage, resource: ConfigResource) -> None:
    rtype, rname = resource
    if rtype == TOPIC_RESOURCE:
        if rname not in image.topics_by_name:
            raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {rname} does not exist")
    elif rtype == BROKER_RESOURCE:
        if rname and not (rname.isdigit() and int(rname) <= 2**31 - 1):
            raise ApiError(ErrorCode.INVALID_REQUEST, f"Invalid broker name {rname!r}")
    else:
        raise ApiError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {rtype}")


def _validate(resource: ConfigResource, name: str, value: str) -> None:
    if resource[0] == TOPIC_RESOURCE:
        validate_topic_config(name, value)
    else:
        validate_broker_config(name, value)


def _definition(resource: ConfigResource, name: str) -> ConfigDef | None:
    return (TOPIC_CONFIGS if resource[0] == TOPIC_RESOURCE else BROKER_CONFIGS).get(name)


def alter_configs(image: MetadataImage, resources: Mapping[ConfigResource, Mapping[str, str | None]],
                  validate_only: bool = False) -> tuple[list[Config], dict[ConfigResource, ConfigError]]:
    """Legacy AlterConfigs: each resource's dynamic configs are REPLACED by the given set."""
    records: list[Config] = []
    results: dict[ConfigResource, ConfigError] = {}
    for resource in sorted(resources):
        wanted = {k: v for k, v in resources[resource].items() if v is not None}
        try:
            _check_resource(image, resource)
            for name in sorted(wanted):
                _validate(resource, name, wanted[name])
        except ApiError as e:
            results[resource] = ConfigError(e.code, e.message)
            continue
        results[resource] = _OK
        current = image.configs.get(resource, {})
        out = [Config(resource[0], resource[1], n, wanted[n]) for n in sorted(wanted)
               if current.get(n) != wanted[n]]
        out += [Config(resource[0], resource[1], n, None) for n in sorted(current)
                if n not in wanted]
        if not validate_only:
            records += out
    return records, results


def incremental_alter_configs(
    image: MetadataImage,
    resources: Mapping[ConfigResource, Sequence[tuple[str, AlterOp, str | None]]],
    validate_only: bool = False, static: Mapping[str, str] | None = None,
) -> tuple[list[Config], dict[ConfigResource, ConfigError]]:
    """IncrementalAlterConfigs: SET / DELETE one key, APPEND / SUBTRACT list items."""
    static = static or {}
    records: list[Config] = []
    results: dict[ConfigResource, ConfigError] = {}
    for resource in sorted(resources):
        current = dict(image.configs.get(resource, {}))
        try:
            _check_resource(image, resource)
            new = dict(current)
            seen = set()
            for name, op, value in resources[resource]:
                if name in seen:
                    raise ApiError(ErrorCode.INVALID_REQUEST, f"Duplicate config key {name}")
                seen.add(name)
                new_value = _incremental(image, resource, name, AlterOp(op), value, current,
                                         static)
                if new_value is None:
                    new.pop(name, None)
                else:
                    _validate(resource, name, new_value)
                    new[name] = new_value
        except (ApiError, ValueError) as e:
            code = e.code if isinstance(e, ApiError) else ErrorCode.INVALID_REQUEST
            results[resource] = ConfigError(code, getattr(e, "message", None) or str(e))
            continue
        results[resource] = _OK
        if validate_only:
            continue
        for name in sorted(set(current) | set(new)):
            if current.get(name) != new.get(name):
                records.append(Config(resource[0], resource[1], name, new.get(name)))
    return records, results


def _incremental(image, resource, name, op, value, current, static) -> str | None:
    d = _definition(resource, name)
    if op == AlterOp.DELETE:
        if d is not None and resource[0] == BROKER_RESOURCE and not d.dynamic:
            raise ApiError(ErrorCode.INVALID_REQUEST,
                           f"Cannot update these configs dynamically: {name}")
        return None
    if value is None:
        raise ApiError(ErrorCode.INVALID_REQUEST, f"Null value not supported for {op.name} {name}")
    if op == AlterOp.SET:
        return value
    if d is None:
        raise ApiError(ErrorCode.INVALID_CONFIG, f"Unknown config name: {name}")
    if d.type != ConfigType.LIST:
        raise ApiError(ErrorCode.INVALID_CONFIG,
                       f"{op.name} is only valid for list configs, not {name}")
    base = current.get(name)
    if base is None:  # append to / subtract from the value in force, like Kafka
        base = _effective_string(image, resource, name, static) or ""
    items = [p.strip() for p in base.split(",") if p.strip()]
    changes = [p.strip() for p in value.split(",") if p.strip()]
    if op == AlterOp.APPEND:
        items += [c for c in changes if c not in items]
    else:
        items = [i for i in items if i not in changes]
    return ",".join(items)


def _effective_string(image, resource, name, static) -> str | None:
    if resource[0] == TOPIC_RESOURCE:
        return resolve_topic_config(name, {}, {}, image.broker_config(None), static)[0].value
    chain = _broker_chain(image, resource[1], name, static)
    return chain[0].value if chain else None


def _broker_chain(image, broker_name: str, name: str, static) -> list[Resolved]:
    per_broker = image.configs.get((BROKER_RESOURCE, broker_name), {}) if broker_name else {}
    return resolve_broker_config(name, per_broker, image.broker_config(None), static)


@dataclass(frozen=True, slots=True)
class DescribedConfig:
    name: str
    value: str | None  # None for sensitive values
    read_only: bool
    source: ConfigSource
    sensitive: bool
    type: ConfigType
    synonyms: tuple[Resolved, ...] = ()


def describe_configs(image: MetadataImage, resource: ConfigResource,
                     keys: Sequence[str] | None = None, *, include_synonyms: bool = False,
                     static: Mapping[str, str] | None = None,
                     ) -> tuple[ConfigError, list[DescribedConfig]]:
    """DescribeConfigs for one resource, as served by a broker with `static` as its file."""
    static = static or {}
    try:
        _check_resource(image, resource)
    except ApiError as e:
        return ConfigError(e.code, e.message), []
    rtype, rname = resource
    defs = TOPIC_CONFIGS if rtype == TOPIC_RESOURCE else BROKER_CONFIGS
    names = sorted(defs) if keys is None else [k for k in keys if k in defs]
    out = []
    for name in names:
        d = defs[name]
        if rtype == TOPIC_RESOURCE:
            per_broker = image.broker_config(_local_broker_id(static))
            chain = resolve_topic_config(name, image.topic_config(rname), per_broker,
                                         image.broker_config(None), static)
            read_only = False
        else:
            chain = _broker_chain(image, rname, name, static)
            read_only = not d.dynamic
        top = chain[0] if chain else Resolved(name, None, ConfigSource.DEFAULT_CONFIG)
        hide = d.sensitive
        synonyms = tuple(Resolved(r.name, None if hide else r.value, r.source) for r in chain)
        out.append(DescribedConfig(
            name=name, value=None if hide else top.value, read_only=read_only,
            source=top.source, sensitive=hide, type=d.type,
            synonyms=synonyms if include_synonyms else ()))
    return _OK, out


def _local_broker_id(static: Mapping[str, str]) -> int | None:
    node = static.get("node.id", "")
    return int(node) if node.lstrip("-").isdigit() and int(node) >= 0 else None


def effective_topic_value(image: MetadataImage, topic: str, name: str,
                          static: Mapping[str, str] | None = None) -> Any:
    """A topic setting as the controller sees it (topic → cluster default → static → default)."""
    chain = resolve_topic_config(name, image.topic_config(topic), {},
                                 image.broker_config(None), static or {})
    d = TOPIC_CONFIGS[name]
    for r in chain:
        try:
            return parse(d, r.value)
        except ApiError:
            continue  # a bad static value falls through to the next layer
    return parse(d, d.default)


def effective_broker_value(image: MetadataImage, name: str,
                           static: Mapping[str, str] | None = None) -> Any:
    d = BROKER_CONFIGS[name]
    for r in _broker_chain(image, "", name, static or {}):
        try:
            return parse(d, r.value)
        except ApiError:
            continue
    return None
