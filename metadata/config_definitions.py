"""Topic and broker configuration: Kafka's names, types, defaults, validation and layering.

Values are strings everywhere (as in ConfigRecord); `parse` turns one into its typed value.
A topic setting resolves as: topic override → the broker synonyms (e.g. retention.ms ←
log.retention.ms ← log.retention.minutes ← log.retention.hours), each looked up in the
dynamic per-broker, dynamic cluster-default and static (node file) layers → the default.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from metadata.errors import ApiError
from wire.error_codes import ErrorCode

__all__ = [
    "check_config_name", "MAX_CONFIG_NAME_LENGTH", "MAX_CONFIG_VALUE_BYTES",
    "ConfigType", "ConfigSource", "ConfigDef", "TOPIC_CONFIGS", "BROKER_CONFIGS",
    "TOPIC_SYNONYMS", "parse", "validate_topic_config", "validate_broker_config",
    "resolve_topic_config", "resolve_broker_config", "Resolved",
]

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1
# Bounds on what a request may store as one config (Kafka has none of its own, but its
# ConfigRecord must fit one 8 MiB metadata batch); refused with INVALID_CONFIG at once.
MAX_CONFIG_NAME_LENGTH = 255
MAX_CONFIG_VALUE_BYTES = 1024 * 1024


class ConfigType(enum.IntEnum):  # Kafka's DescribeConfigs ConfigType ids
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    PASSWORD = 9


class ConfigSource(enum.IntEnum):  # Kafka's DescribeConfigs ConfigSource ids
    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


@dataclass(frozen=True, slots=True)
class ConfigDef:
    name: str
    type: ConfigType
    default: str | None  # as a string, None = no default
    check: Callable[[Any], str | None] | None = None  # returns a complaint or None
    dynamic: bool = True  # False = read-only (broker configs only)
    sensitive: bool = False
    doc: str = ""


def at_least(lo):
    return lambda v: None if v >= lo else f"value must be at least {lo}"


def between(lo, hi):
    return lambda v: None if lo <= v <= hi else f"value must be in [{lo}, {hi}]"


def one_of(*choices):
    return lambda v: None if v in choices else f"value must be one of {', '.join(choices)}"


def list_of(*choices):
    def check(items):
        bad = [i for i in items if i not in choices]
        return f"unknown value(s) {bad}; allowed: {', '.join(choices)}" if bad else None
    return check


def throttled_replicas(items):
    """Kafka's ThrottledReplicaListValidator: `*`, or `partition:broker` entries."""
    if list(items) == ["*"]:
        return None
    bad = [i for i in items if not _is_partition_broker(i)]
    return f"must be * or a list of partition:broker pairs, not {bad}" if bad else None


def _is_partition_broker(item: str) -> bool:
    partition, sep, broker = item.strip().partition(":")
    return bool(sep) and partition.isdigit() and broker.isdigit()


_T = ConfigType
_COMPRESSION = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")


def _defs(*defs: ConfigDef) -> dict[str, ConfigDef]:
    return {d.name: d for d in defs}


TOPIC_CONFIGS: dict[str, ConfigDef] = _defs(
    ConfigDef("cleanup.policy", _T.LIST, "delete", list_of("delete", "compact")),
    ConfigDef("compression.type", _T.STRING, "producer", one_of(*_COMPRESSION)),
    ConfigDef("delete.retention.ms", _T.LONG, "86400000", at_least(0)),
    ConfigDef("file.delete.delay.ms", _T.LONG, "60000", at_least(0)),
    ConfigDef("flush.messages", _T.LONG, str(LONG_MAX), at_least(1)),
    ConfigDef("flush.ms", _T.LONG, str(LONG_MAX), at_least(0)),
    ConfigDef("index.interval.bytes", _T.INT, "4096", at_least(0)),
    ConfigDef("max.compaction.lag.ms", _T.LONG, str(LONG_MAX), at_least(1)),
    ConfigDef("max.message.bytes", _T.INT, "1048588", at_least(0)),
    # Deprecated in Kafka 3.x and without effect there (every batch is format v2), but still
    # accepted, so tools and clients that set it keep working; the same here.
    ConfigDef("message.format.version", _T.STRING, "3.0-IV1"),
    ConfigDef("message.timestamp.type", _T.STRING, "CreateTime", one_of(*_TIMESTAMP_TYPES)),
    ConfigDef("message.timestamp.before.max.ms", _T.LONG, str(LONG_MAX), at_least(0)),
    ConfigDef("message.timestamp.after.max.ms", _T.LONG, "3600000", at_least(0)),
    ConfigDef("min.cleanable.dirty.ratio", _T.DOUBLE, "0.5", between(0.0, 1.0)),
    ConfigDef("min.compaction.lag.ms", _T.LONG, "0", at_least(0)),
    ConfigDef("min.insync.replicas", _T.INT, "1", at_least(1)),
    ConfigDef("preallocate", _T.BOOLEAN, "false"),
    ConfigDef("retention.bytes", _T.LONG, "-1"),
    ConfigDef("retention.ms", _T.LONG, "604800000", at_least(-1)),
    ConfigDef("segment.bytes", _T.INT, "1073741824", at_least(1024 * 1024)),
    ConfigDef("segment.index.bytes", _T.INT, "10485760", at_least(4)),
    ConfigDef("segment.jitter.ms", _T.LONG, "0", at_least(0)),
    ConfigDef("segment.ms", _T.LONG, "604800000", at_least(1)),
    ConfigDef("unclean.leader.election.enable", _T.BOOLEAN, "false"),
    # replicas whose replication counts against the brokers' throttled rates (broker.throttle)
    ConfigDef("leader.replication.throttled.replicas", _T.LIST, "", throttled_replicas),
    ConfigDef("follower.replication.throttled.replicas", _T.LIST, "", throttled_replicas),
)

# topic config -> broker configs that supply its default, highest precedence first, with the
# factor that converts the broker unit into the topic unit (hours -> ms, ...).
TOPIC_SYNONYMS: dict[str, tuple[tuple[str, int], ...]] = {
    "cleanup.policy": (("log.cleanup.policy", 1),),
    "compression.type": (("compression.type", 1),),
    "delete.retention.ms": (("log.cleaner.delete.retention.ms", 1),),
    "file.delete.delay.ms": (("log.segment.delete.delay.ms", 1),),
    "flush.messages": (("log.flush.interval.messages", 1),),
    "flush.ms": (("log.flush.interval.ms", 1),),
    "index.interval.bytes": (("log.index.interval.bytes", 1),),
    "max.compaction.lag.ms": (("log.cleaner.max.compaction.lag.ms", 1),),
    "max.message.bytes": (("message.max.bytes", 1),),
    "message.timestamp.type": (("log.message.timestamp.type", 1),),
    "message.format.version": (("log.message.format.version", 1),),
    "message.timestamp.before.max.ms": (("log.message.timestamp.before.max.ms", 1),),
    "message.timestamp.after.max.ms": (("log.message.timestamp.after.max.ms", 1),),
    "min.cleanable.dirty.ratio": (("log.cleaner.min.cleanable.ratio", 1),),
    "min.compaction.lag.ms": (("log.cleaner.min.compaction.lag.ms", 1),),
    "min.insync.replicas": (("min.insync.replicas", 1),),
    "preallocate": (("log.preallocate", 1),),
    "retention.bytes": (("log.retention.bytes", 1),),
    "retention.ms": (("log.retention.ms", 1), ("log.retention.minutes", 60_000),
                     ("log.retention.hours", 3_600_000)),
    "segment.bytes": (("log.segment.bytes", 1),),
    "segment.index.bytes": (("log.index.size.max.bytes", 1),),
    "segment.jitter.ms": (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", 3_600_000)),
    "segment.ms": (("log.roll.ms", 1), ("log.roll.hours", 3_600_000)),
    "unclean.leader.election.enable": (("unclean.leader.election.enable", 1),),
}

BROKER_CONFIGS: dict[str, ConfigDef] = _defs(
    # log defaults for topics (dynamic, cluster-wide or per broker)
    ConfigDef("log.cleanup.policy", _T.LIST, "delete", list_of("delete", "compact")),
    ConfigDef("compression.type", _T.STRING, "producer", one_of(*_COMPRESSION)),
    ConfigDef("log.cleaner.delete.retention.ms", _T.LONG, "86400000", at_least(0)),
    ConfigDef("log.segment.delete.delay.ms", _T.LONG, "60000", at_least(0)),
    ConfigDef("log.flush.interval.messages", _T.LONG, str(LONG_MAX), at_least(1)),
    ConfigDef("log.flush.interval.ms", _T.LONG, None, at_least(0)),
    ConfigDef("log.index.interval.bytes", _T.INT, "4096", at_least(0)),
    ConfigDef("log.index.size.max.bytes", _T.INT, "10485760", at_least(4)),
    ConfigDef("log.cleaner.max.compaction.lag.ms", _T.LONG, str(LONG_MAX), at_least(1)),
    ConfigDef("log.cleaner.min.compaction.lag.ms", _T.LONG, "0", at_least(0)),
    ConfigDef("log.cleaner.min.cleanable.ratio", _T.DOUBLE, "0.5", between(0.0, 1.0)),
    ConfigDef("message.max.bytes", _T.INT, "1048588", at_least(0)),
    ConfigDef("log.message.timestamp.type", _T.STRING, "CreateTime", one_of(*_TIMESTAMP_TYPES)),
    ConfigDef("log.message.format.version", _T.STRING, "3.0-IV1", dynamic=False),
    ConfigDef("log.message.timestamp.before.max.ms", _T.LONG, str(LONG_MAX), at_least(0)),
    ConfigDef("log.message.timestamp.after.max.ms", _T.LONG, "3600000", at_least(0)),
    ConfigDef("min.insync.replicas", _T.INT, "1", at_least(1)),
    ConfigDef("log.preallocate", _T.BOOLEAN, "false"),
    ConfigDef("log.retention.bytes", _T.LONG, "-1"),
    ConfigDef("log.retention.ms", _T.LONG, None, at_least(-1)),
    ConfigDef("log.retention.minutes", _T.INT, None, at_least(-1)),
    ConfigDef("log.retention.hours", _T.INT, "168", at_least(-1)),
    ConfigDef("log.segment.bytes", _T.INT, "1073741824", at_least(1024 * 1024)),
    ConfigDef("log.roll.ms", _T.LONG, None, at_least(1)),
    ConfigDef("log.roll.hours", _T.INT, "168", at_least(1)),
    ConfigDef("log.roll.jitter.ms", _T.LONG, None, at_least(0)),
    ConfigDef("log.roll.jitter.hours", _T.INT, "0", at_least(0)),
    ConfigDef("unclean.leader.election.enable", _T.BOOLEAN, "false"),
    # topic creation and internal topics
    ConfigDef("num.partitions", _T.INT, "1", at_least(1), dynamic=False),
    ConfigDef("default.replication.factor", _T.INT, "1", at_least(1), dynamic=False),
    ConfigDef("auto.create.topics.enable", _T.BOOLEAN, "true", dynamic=False),
    ConfigDef("delete.topic.enable", _T.BOOLEAN, "true", dynamic=False),
    ConfigDef("offsets.topic.num.partitions", _T.INT, "50", at_least(1), dynamic=False),
    ConfigDef("offsets.topic.replication.factor", _T.SHORT, "3", at_least(1), dynamic=False),
    ConfigDef("offsets.retention.minutes", _T.INT, "10080", at_least(1), dynamic=False),
    ConfigDef("transaction.state.log.num.partitions", _T.INT, "50", at_least(1),
              dynamic=False),
    ConfigDef("transaction.state.log.replication.factor", _T.SHORT, "3", at_least(1),
              dynamic=False),
    ConfigDef("transaction.state.log.min.isr", _T.INT, "2", at_least(1), dynamic=False),
    ConfigDef("transaction.state.log.segment.bytes", _T.INT, "104857600", at_least(1), dynamic=False),
    ConfigDef("transaction.max.timeout.ms", _T.INT, "900000", at_least(1), dynamic=False),
    ConfigDef("transaction.abort.timed.out.transaction.cleanup.interval.ms", _T.INT, "10000", at_least(1),
              dynamic=False),
    ConfigDef("transactional.id.expiration.ms", _T.INT, "604800000", at_least(1), dynamic=False),
    ConfigDef("transaction.remove.expired.transaction.cleanup.interval.ms", _T.INT, "3600000", at_least(1),
              dynamic=False),
    ConfigDef("group.initial.rebalance.delay.ms", _T.INT, "3000", at_least(0), dynamic=False),
    # replication and liveness
    ConfigDef("replica.lag.time.max.ms", _T.LONG, "30000", at_least(1), dynamic=False),
    ConfigDef("broker.heartbeat.interval.ms", _T.INT, "2000", at_least(1), dynamic=False),
    ConfigDef("broker.session.timeout.ms", _T.INT, "9000", at_least(1), dynamic=False),
    ConfigDef("leader.imbalance.check.interval.seconds", _T.LONG, "300", at_least(1),
              dynamic=False),
    ConfigDef("auto.leader.rebalance.enable", _T.BOOLEAN, "true", dynamic=False),
    ConfigDef("leader.imbalance.per.broker.percentage", _T.INT, "10", at_least(0), dynamic=False),
    # bytes/s for throttled replicas (the topics' *.replication.throttled.replicas), per broker
    ConfigDef("leader.replication.throttled.rate", _T.LONG, str(LONG_MAX), at_least(0)),
    ConfigDef("follower.replication.throttled.rate", _T.LONG, str(LONG_MAX), at_least(0)),
    # node identity and listeners
    ConfigDef("node.id", _T.INT, "-1", dynamic=False),
    ConfigDef("process.roles", _T.LIST, "", list_of("broker", "controller"), dynamic=False),
    ConfigDef("log.dirs", _T.STRING, None, dynamic=False),
    ConfigDef("listeners", _T.STRING, "PLAINTEXT://:9092", dynamic=False),
    ConfigDef("advertised.listeners", _T.STRING, None, dynamic=False),
    ConfigDef("ssl.keystore.password", _T.PASSWORD, None, sensitive=True),
    ConfigDef("sasl.jaas.config", _T.PASSWORD, None, sensitive=True),
    # Kafka's dynamic thread-pool and Kerberos/login-refresh settings: a node here has no
    # thread pools and no GSSAPI, so they are stored and described (as tools set them) and
    # change nothing.
    ConfigDef("background.threads", _T.INT, "10", at_least(1)),
    ConfigDef("num.io.threads", _T.INT, "8", at_least(1)),
    ConfigDef("num.network.threads", _T.INT, "3", at_least(1)),
    ConfigDef("num.replica.fetchers", _T.INT, "1", at_least(1)),
    ConfigDef("num.recovery.threads.per.data.dir", _T.INT, "2", at_least(1)),
    ConfigDef("sasl.kerberos.service.name", _T.STRING, None),
    ConfigDef("sasl.kerberos.kinit.cmd", _T.STRING, "/usr/bin/kinit"),
    ConfigDef("sasl.kerberos.ticket.renew.window.factor", _T.DOUBLE, "0.8", between(0.0, 1.0)),
    ConfigDef("sasl.kerberos.ticket.renew.jitter", _T.DOUBLE, "0.05", between(0.0, 1.0)),
    ConfigDef("sasl.kerberos.min.time.before.relogin", _T.LONG, "60000", at_least(0)),
    ConfigDef("sasl.kerberos.principal.to.local.rules", _T.LIST, "DEFAULT"),
    ConfigDef("sasl.login.refresh.window.factor", _T.DOUBLE, "0.8", between(0.5, 1.0)),
    ConfigDef("sasl.login.refresh.window.jitter", _T.DOUBLE, "0.05", between(0.0, 0.25)),
    ConfigDef("sasl.login.refresh.min.period.seconds", _T.SHORT, "60", between(0, 900)),
    ConfigDef("sasl.login.refresh.buffer.seconds", _T.SHORT, "300", between(0, 3600)),
)


def parse(d: ConfigDef, value: str) -> Any:
    """The typed value of `value`, or ApiError(INVALID_CONFIG) naming the setting."""
    def bad(why: str) -> ApiError:
        shown = value if len(value) <= 200 else value[:200] + "..."
        return ApiError(ErrorCode.INVALID_CONFIG, f"Invalid value {shown!r} for configuration "
                                                f"{d.name}: {why}")
    if not isinstance(value, str):
        raise ApiError(ErrorCode.INVALID_CONFIG, f"Invalid value for configuration {d.name}: not a string")
    if len(value) > MAX_CONFIG_VALUE_BYTES:
        raise ApiError(ErrorCode.INVALID_CONFIG, f"Invalid value for configuration {d.name}: {len(value)} "
                                              f"characters, more than the {MAX_CONFIG_VALUE_BYTES} allowed")
    text = value.strip()
    if d.type == ConfigType.BOOLEAN:
        if text.lower() not in ("true", "false"):
            raise bad("expected true or false")
        parsed: Any = text.lower() == "true"
    elif d.type in (ConfigType.INT, ConfigType.SHORT, ConfigType.LONG):
        try:
            parsed = int(text, 10)
        except ValueError:
            raise bad("expected an integer") from None
        limit = {ConfigType.INT: INT_MAX, ConfigType.SHORT: 32767}.get(d.type, LONG_MAX)
        if not -limit - 1 <= parsed <= limit:
            raise bad("out of range")
    elif d.type == ConfigType.DOUBLE:
        try:
            parsed = float(text)
        except ValueError:
            raise bad("expected a number") from None
        if parsed != parsed:
            raise bad("not a number")
    elif d.type == ConfigType.LIST:
        parsed = [p.strip() for p in text.split(",") if p.strip()]
    else:
        parsed = value
    if d.check is not None:
        complaint = d.check(parsed)
        if complaint:
            raise bad(complaint)
    return parsed


def check_config_name(name: str) -> None:
    if len(name) > MAX_CONFIG_NAME_LENGTH:
        raise ApiError(ErrorCode.INVALID_CONFIG, f"Config name of {len(name)} characters; at most "
                                              f"{MAX_CONFIG_NAME_LENGTH} are allowed")


def validate_topic_config(name: str, value: str) -> None:
    check_config_name(name)
    d = TOPIC_CONFIGS.get(name)
    if d is None:
        raise ApiError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")
    parse(d, value)


def validate_broker_config(name: str, value: str) -> None:
    """Dynamic broker configs only: read-only ones are refused as Kafka does."""
    check_config_name(name)
    d = BROKER_CONFIGS.get(name)
    if d is None:
        raise ApiError(ErrorCode.INVALID_CONFIG, f"Unknown broker config name: {name}")
    if not d.dynamic:
        raise ApiError(ErrorCode.INVALID_REQUEST,
                       f"Cannot update these configs dynamically: {name}")
    parse(d, value)


@dataclass(frozen=True, slots=True)
class Resolved:
    name: str
    value: str | None
    source: ConfigSource


def resolve_broker_config(name: str, dynamic_broker: Mapping[str, str],
                          dynamic_default: Mapping[str, str],
                          static: Mapping[str, str]) -> list[Resolved]:
    """Every layer that sets `name`, highest precedence first, ending with the default."""
    out = []
    if name in dynamic_broker:
        out.append(Resolved(name, dynamic_broker[name], ConfigSource.DYNAMIC_BROKER_CONFIG))
    if name in dynamic_default:
        out.append(Resolved(name, dynamic_default[name],
                            ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
    if name in static:
        out.append(Resolved(name, static[name], ConfigSource.STATIC_BROKER_CONFIG))
    d = BROKER_CONFIGS.get(name)
    if d is not None and d.default is not None:
        out.append(Resolved(name, d.default, ConfigSource.DEFAULT_CONFIG))
    return out


def resolve_topic_config(name: str, overrides: Mapping[str, str],
                         dynamic_broker: Mapping[str, str], dynamic_default: Mapping[str, str],
                         static: Mapping[str, str]) -> list[Resolved]:
    """The synonym chain for a topic config, highest precedence first; the first entry is
    the effective value (converted into the topic config's unit)."""
    out = []
    if name in overrides:
        out.append(Resolved(name, overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG))
    for broker_name, factor in TOPIC_SYNONYMS.get(name, ()):
        for r in resolve_broker_config(broker_name, dynamic_broker, dynamic_default, static):
            if r.source == ConfigSource.DEFAULT_CONFIG:
                continue  # the topic's own default stands for the broker defaults
            out.append(Resolved(broker_name, _scale(r.value, factor), r.source))
    d = TOPIC_CONFIGS[name]
    out.append(Resolved(name, d.default, ConfigSource.DEFAULT_CONFIG))
    return out


def _scale(value: str | None, factor: int) -> str | None:
    if factor == 1 or value is None:
        return value
    try:
        n = int(value)
    except ValueError:
        return value
    return str(n if n < 0 else n * factor)  # -1 means "unlimited" in every unit
