"""Option parsing and validation, with the names and messages of Spark's Kafka source.

Spark hands options over in a case-insensitive dict whose keys arrive lower-cased
(G15), so everything here works on lower-cased keys and names the option in its
documented spelling when it complains. Every problem is an `InvalidOptionError`
raised at planning time, before a single record is read.

Start/end precedence follows Spark's Kafka source: `startingTimestamp` >
`startingOffsetsByTimestamp` > `startingOffsets` (and the same for ending).
"""
from __future__ import annotations

import logging
import re
import uuid
from dataclasses import dataclass
from typing import Mapping, Union

from raftkafka.client.security import SECURITY_PROPERTIES, ClientSecurity
from spark_source.client_properties import ClientTuning, PropertyError, client_properties
from spark_source.offsets import (
    EARLIEST,
    LATEST,
    OffsetsFormatError,
    PartitionOffsets,
    TopicPartition,
    parse_assign_option,
    parse_offsets_option,
)

__all__ = [
    "InvalidOptionError",
    "Earliest",
    "Latest",
    "SpecificOffsets",
    "GlobalTimestamp",
    "SpecificTimestamps",
    "OffsetSpec",
    "Subscription",
    "SourceOptions",
    "SinkOptions",
    "parse_source_options",
    "parse_sink_options",
    "parse_duration_ms",
    "start_is_stable",
]


class InvalidOptionError(ValueError):
    """A bad, unknown or contradictory option; the message names it."""


# ----------------------------------------------------------------------------- start/end specs


@dataclass(frozen=True)
class Earliest:
    pass


@dataclass(frozen=True)
class Latest:
    pass


@dataclass(frozen=True)
class SpecificOffsets:
    offsets: PartitionOffsets  # values may be EARLIEST (-2) / LATEST (-1)


@dataclass(frozen=True)
class GlobalTimestamp:
    timestamp_ms: int
    strategy: str = "error"  # what to do when no offset has a timestamp >= it: "error" | "latest"


@dataclass(frozen=True)
class SpecificTimestamps:
    timestamps: PartitionOffsets
    strategy: str = "error"


OffsetSpec = Union[Earliest, Latest, SpecificOffsets, GlobalTimestamp, SpecificTimestamps]


@dataclass(frozen=True)
class Subscription:
    """Exactly one of: fixed topics, a regex, or fixed partitions."""

    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[TopicPartition, ...] = ()

    def describe(self) -> str:
        if self.pattern is not None:
            return f"subscribePattern={self.pattern}"
        if self.assigned:
            return "assign=" + ",".join(f"{t}-{p}" for t, p in self.assigned)
        return "subscribe=" + ",".join(self.topics)


@dataclass(frozen=True)
class SourceOptions:
    bootstrap_servers: str
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    min_records_per_partition: int | None = 50_000  # ours: smaller ranges share a task (pack_ranges); 0 → None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    request_timeout_ms: int = 30_000
    client_id: str = "raftkafka-spark"
    source_id: str | None = None  # keys the stored initial offsets (initial_offsets.py)
    security: tuple[tuple[str, str], ...] = ()  # Kafka client security properties (kafka.* prefix dropped)
    tuning: ClientTuning = ClientTuning()  # kafka.* consumer properties, group id, fetchOffset.*
    poll_timeout_ms: int | None = None  # kafkaConsumer.pollTimeoutMs; None: the request timeout


@dataclass(frozen=True)
class SinkOptions:
    bootstrap_servers: str
    topic: str | None = None
    sink_id: str | None = None
    request_timeout_ms: int = 30_000
    client_id: str = "raftkafka-spark-sink"
    security: tuple[tuple[str, str], ...] = ()
    tuning: ClientTuning = ClientTuning()  # kafka.* producer properties


# ----------------------------------------------------------------------------- option names

# lower-cased key -> documented spelling, per role.
# Security: `kafka.security.protocol`, `kafka.ssl.ca.location`, ... (Kafka client properties, prefixed).
_SECURITY = ["kafka." + name for name in sorted(SECURITY_PROPERTIES)]
_COMMON = ["kafka.bootstrap.servers", "bootstrap.servers", "kafka.request.timeout.ms", "kafka.client.id", *_SECURITY]
# Any other kafka.* option is a Kafka client property (client_properties.py). groupIdPrefix /
# kafka.group.id name the source's consumers, which assign partitions and commit nothing (as Spark's).
_SOURCE = _COMMON + [
    "subscribe", "subscribePattern", "assign",
    "startingOffsets", "startingTimestamp", "startingOffsetsByTimestamp", "startingOffsetsByTimestampStrategy",
    "endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp",
    "maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay",
    "minPartitions", "maxRecordsPerPartition", "minRecordsPerPartition", "failOnDataLoss", "includeHeaders",
    "groupIdPrefix", "kafka.group.id", "sourceId",
    "kafkaConsumer.pollTimeoutMs", "fetchOffset.numRetries", "fetchOffset.retryIntervalMs",
]
# Spark itself passes checkpointLocation to a streaming sink.
_SINK = _COMMON + ["topic", "sinkId", "checkpointLocation"]
_STREAM_ONLY = {"maxoffsetspertrigger", "minoffsetspertrigger", "maxtriggerdelay", "sourceid"}
_BATCH_ONLY = {"endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp"}

# Kafka consumer settings Spark's Kafka source refuses, with its reasons.
_REFUSED = {
    "kafka.auto.offset.reset": "Kafka option 'auto.offset.reset' is not supported; use startingOffsets",
    "kafka.key.deserializer": "Kafka option 'key.deserializer' is not supported; keys are always byte arrays",
    "kafka.value.deserializer": "Kafka option 'value.deserializer' is not supported; values are always byte arrays",
    "kafka.key.serializer": "Kafka option 'key.serializer' is not supported; keys are always byte arrays",
    "kafka.value.serializer": "Kafka option 'value.serializer' is not supported; values are always byte arrays",
    "kafka.enable.auto.commit": "Kafka option 'enable.auto.commit' is not supported; the source commits no offsets",
    "kafka.interceptor.classes": "Kafka option 'interceptor.classes' is not supported",
}


def _check_known(opts: Mapping[str, str], allowed: list[str], role: str) -> dict[str, str]:
    names = {name.lower(): name for name in allowed}
    lowered: dict[str, str] = {}
    for key in sorted(opts):
        low = key.lower()
        if low == "path":
            raise InvalidOptionError(f"the raftkafka {role} takes no path; name topics with options instead")
        if low in _REFUSED:
            raise InvalidOptionError(_REFUSED[low])
        if low not in names and not low.startswith("kafka."):
            raise InvalidOptionError(f"unknown option '{key}' for the raftkafka {role}; "
                                     f"known options: {', '.join(sorted(allowed, key=str.lower))} "
                                     "and Kafka client properties as kafka.*")
        lowered[low] = str(opts[key])
    return lowered


# ----------------------------------------------------------------------------- small parsers


def _bool(value: str, name: str) -> bool:
    low = value.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    raise InvalidOptionError(f"option '{name}' must be true or false, got '{value}'")


def _positive_int(value: str, name: str) -> int:
    try:
        number = int(value.strip())
    except ValueError:
        number = 0
    if number <= 0:
        raise InvalidOptionError(f"Invalid value '{value}' for option '{name}', must be a positive integer")
    return number


def _non_negative_int(value: str, name: str) -> int:
    try:
        number = int(value.strip())
    except ValueError:
        number = -1
    if number < 0:
        raise InvalidOptionError(f"Invalid value '{value}' for option '{name}', must be a non-negative integer")
    return number


_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|sec|m|min|h|d)?\s*$", re.IGNORECASE)
_UNIT_MS = {None: 1, "ms": 1, "s": 1000, "sec": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_duration_ms(value: str, name: str = "maxTriggerDelay") -> int:
    """Spark's time strings: "15m", "30s", "500ms", "1h"; a bare number is milliseconds."""
    match = _DURATION.match(value)
    if not match:
        raise InvalidOptionError(f"option '{name}' must be a duration like 30s, 15m or 500ms, got '{value}'")
    unit = match.group(2).lower() if match.group(2) else None
    return int(match.group(1)) * _UNIT_MS[unit]


def _security(opts: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """The kafka.security.protocol / kafka.ssl.* / kafka.sasl.* options, checked now (files
    readable, values valid) so a mistake fails at planning, not in a task."""
    properties = {low[len("kafka."):]: value for low, value in opts.items() if low in _SECURITY}
    if not properties:
        return ()
    try:
        ClientSecurity.from_properties(properties)
    except ValueError as e:
        raise InvalidOptionError(f"Kafka security options (kafka.*): {e}") from None
    return tuple(sorted(properties.items()))

def _client_properties(opts: dict[str, str], allowed: list[str], role: str) -> tuple[tuple[str, object], ...]:
    handled = {name.lower() for name in allowed if name.lower().startswith("kafka.")}
    try:
        return client_properties(opts, role=role, handled=handled)
    except PropertyError as exc:
        raise InvalidOptionError(str(exc)) from None


def _group_id(opts: dict[str, str]) -> str | None:
    """kafka.group.id as given, else groupIdPrefix plus a random suffix (Spark's rule); None if neither."""
    if "kafka.group.id" in opts:
        if not opts["kafka.group.id"].strip():
            raise InvalidOptionError("option 'kafka.group.id' is empty")
        return opts["kafka.group.id"]
    prefix = opts.get("groupidprefix")
    if prefix is None:
        return None
    if not prefix.strip():
        raise InvalidOptionError("option 'groupIdPrefix' is empty")
    return f"{prefix}-{uuid.uuid4()}"


def _bootstrap(opts: dict[str, str]) -> str:
    a, b = opts.get("kafka.bootstrap.servers"), opts.get("bootstrap.servers")
    if a is not None and b is not None and a != b:
        raise InvalidOptionError("options 'kafka.bootstrap.servers' and 'bootstrap.servers' disagree; give one")
    servers = (a if a is not None else b or "").strip()
    if not servers:
        raise InvalidOptionError("Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer")
    for item in servers.split(","):
        host, sep, port = item.strip().rpartition(":")
        if not sep or not host or not port.isdigit():
            raise InvalidOptionError(f"option 'kafka.bootstrap.servers': '{item.strip()}' is not host:port")
    return servers


def _subscription(opts: dict[str, str]) -> Subscription:
    given = [name for name in ("subscribe", "subscribePattern", "assign") if name.lower() in opts]
    if len(given) != 1:
        raise InvalidOptionError("One of the following options must be specified for Kafka source: "
                                 f"subscribe, subscribePattern, assign (got: {', '.join(given) or 'none'})")
    value = opts[given[0].lower()]
    if given[0] == "subscribe":
        topics = sorted({t.strip() for t in value.split(",") if t.strip()})
        if not topics:
            raise InvalidOptionError(f"No topics to subscribe to as specified value for option 'subscribe' is '{value}'")
        return Subscription(topics=tuple(topics))
    if given[0] == "subscribePattern":
        if not value.strip():
            raise InvalidOptionError(f"Pattern to subscribe is empty as specified value for option "
                                     f"'subscribePattern' is '{value}'")
        try:
            re.compile(value)
        except re.error as exc:
            raise InvalidOptionError(f"option 'subscribePattern' is not a valid regular expression: {exc}") from None
        return Subscription(pattern=value)
    try:
        return Subscription(assigned=tuple(parse_assign_option(value)))
    except OffsetsFormatError as exc:
        raise InvalidOptionError(str(exc)) from None


def _spec(opts: dict[str, str], side: str, default: OffsetSpec, strategy: str) -> OffsetSpec:
    """startingX / endingX with Spark's precedence: timestamp > offsetsByTimestamp > offsets."""
    ts_name, by_ts_name, offsets_name = f"{side}Timestamp", f"{side}OffsetsByTimestamp", f"{side}Offsets"
    if ts_name.lower() in opts:
        return GlobalTimestamp(_non_negative_int(opts[ts_name.lower()], ts_name), strategy)
    if by_ts_name.lower() in opts:
        try:
            stamps = parse_offsets_option(opts[by_ts_name.lower()], by_ts_name)
        except OffsetsFormatError as exc:
            raise InvalidOptionError(str(exc)) from None
        bad = sorted(tp for tp, ts in stamps.items() if ts < 0)
        if bad:
            raise InvalidOptionError(f"option '{by_ts_name}': timestamp of {bad[0][0]}-{bad[0][1]} must be >= 0")
        return SpecificTimestamps(stamps, strategy)
    text = opts.get(offsets_name.lower())
    if text is None:
        return default
    low = text.strip().lower()
    if low == "earliest":
        return Earliest()
    if low == "latest":
        return Latest()
    try:
        return SpecificOffsets(parse_offsets_option(text, offsets_name))
    except OffsetsFormatError as exc:
        raise InvalidOptionError(str(exc)) from None


# ----------------------------------------------------------------------------- entry points


def parse_source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    opts = _check_known(options, _SOURCE, "stream source" if streaming else "batch source")
    for key in sorted(opts):
        if streaming and key in _BATCH_ONLY:
            raise InvalidOptionError(f"Ending offset not valid in streaming queries (option '{_spelled(key)}')")
        if not streaming and key in _STREAM_ONLY:
            raise InvalidOptionError(f"option '{_spelled(key)}' applies to streaming queries only")
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise InvalidOptionError("option 'startingOffsetsByTimestampStrategy' must be error or latest, "
                                 f"got '{opts['startingoffsetsbytimestampstrategy']}'")
    starting = _spec(opts, "starting", Latest() if streaming else Earliest(), strategy)
    ending = _spec(opts, "ending", Latest(), "latest")
    if not streaming:
        _check_batch_bounds(starting, ending)

    max_per_trigger = min_per_trigger = None
    if "maxoffsetspertrigger" in opts:
        max_per_trigger = _positive_int(opts["maxoffsetspertrigger"], "maxOffsetsPerTrigger")
    if "minoffsetspertrigger" in opts:
        min_per_trigger = _positive_int(opts["minoffsetspertrigger"], "minOffsetsPerTrigger")
    if max_per_trigger is not None and min_per_trigger is not None and min_per_trigger > max_per_trigger:
        raise InvalidOptionError(f"option 'minOffsetsPerTrigger' ({min_per_trigger}) is greater than "
                                 f"'maxOffsetsPerTrigger' ({max_per_trigger})")
    if "maxtriggerdelay" in opts and min_per_trigger is None:
        raise InvalidOptionError("option 'maxTriggerDelay' needs 'minOffsetsPerTrigger'")
    delay = parse_duration_ms(opts["maxtriggerdelay"]) if "maxtriggerdelay" in opts else 15 * 60 * 1000
    source_id = _stable_id(opts, "sourceId")
    if streaming and source_id is None and not start_is_stable(starting):
        # Spark's Kafka source keeps the resolved start in its checkpoint; a Python source is never
        # shown the checkpoint, so without a sourceId a restart before batch 0 commits resolves
        # 'latest' again. Warn rather than refuse: switching from format("kafka") must stay a
        # one-word change.
        logging.getLogger("raftkafka.spark").warning(
            "streaming query starts at 'latest' or a timestamp without option 'sourceId': if it restarts "
            "before its first micro-batch commits, the start is resolved again and may move forward; set a "
            "sourceId that stays the same across restarts to store the resolved start in the cluster")

    return SourceOptions(
        bootstrap_servers=_bootstrap(opts),
        subscription=_subscription(opts),
        starting=starting,
        ending=ending,
        max_offsets_per_trigger=max_per_trigger,
        min_offsets_per_trigger=min_per_trigger,
        max_trigger_delay_ms=delay,
        min_partitions=_positive_int(opts["minpartitions"], "minPartitions") if "minpartitions" in opts else None,
        max_records_per_partition=(_positive_int(opts["maxrecordsperpartition"], "maxRecordsPerPartition")
                                   if "maxrecordsperpartition" in opts else None),
        min_records_per_partition=(_non_negative_int(opts["minrecordsperpartition"], "minRecordsPerPartition") or None
                                   if "minrecordsperpartition" in opts else SourceOptions.min_records_per_partition),
        fail_on_data_loss=_bool(opts.get("failondataloss", "true"), "failOnDataLoss"),
        include_headers=_bool(opts.get("includeheaders", "false"), "includeHeaders"),
        request_timeout_ms=_positive_int(opts.get("kafka.request.timeout.ms", "30000"), "kafka.request.timeout.ms"),
        client_id=opts.get("kafka.client.id", "raftkafka-spark"),
        security=_security(opts),
        source_id=source_id,
        tuning=ClientTuning(
            consumer=_client_properties(opts, _SOURCE, "source"),
            group_id=_group_id(opts),
            offset_retries=_non_negative_int(opts.get("fetchoffset.numretries", "3"), "fetchOffset.numRetries"),
            offset_retry_interval_ms=_non_negative_int(opts.get("fetchoffset.retryintervalms", "10"),
                                                       "fetchOffset.retryIntervalMs")),
        poll_timeout_ms=(_positive_int(opts["kafkaconsumer.polltimeoutms"], "kafkaConsumer.pollTimeoutMs")
                         if "kafkaconsumer.polltimeoutms" in opts else None),
    )


def start_is_stable(spec: OffsetSpec) -> bool:
    """True when resolving `spec` again later gives the same offsets (unless retention deleted the start):
    earliest and explicit offsets; not latest (-1) nor timestamps (a match may appear later)."""
    if isinstance(spec, Earliest):
        return True
    if isinstance(spec, SpecificOffsets):
        return all(off != LATEST for off in spec.offsets.values())
    return False


def _stable_id(opts: dict[str, str], name: str) -> str | None:
    value = opts.get(name.lower())
    if value is not None and not re.fullmatch(r"[A-Za-z0-9._-]{1,100}", value):
        raise InvalidOptionError(f"option '{name}' must be 1-100 of [A-Za-z0-9._-], got '{value}'")
    return value


def _check_batch_bounds(starting: OffsetSpec, ending: OffsetSpec) -> None:
    if isinstance(starting, Latest):
        raise InvalidOptionError("option 'startingOffsets': starting offset can't be latest for batch queries")
    if isinstance(starting, SpecificOffsets):
        bad = sorted(tp for tp, off in starting.offsets.items() if off == LATEST)
        if bad:
            raise InvalidOptionError(f"option 'startingOffsets': starting offset for {bad[0][0]}-{bad[0][1]} "
                                     "can't be latest (-1) for batch queries")
    if isinstance(ending, Earliest):
        raise InvalidOptionError("option 'endingOffsets': ending offset can't be earliest for batch queries")
    if isinstance(ending, SpecificOffsets):
        bad = sorted(tp for tp, off in ending.offsets.items() if off == EARLIEST)
        if bad:
            raise InvalidOptionError(f"option 'endingOffsets': ending offset for {bad[0][0]}-{bad[0][1]} "
                                     "can't be earliest (-2) for batch queries")
    if isinstance(starting, SpecificOffsets) and isinstance(ending, SpecificOffsets):
        for tp in sorted(set(starting.offsets) & set(ending.offsets)):
            s, e = starting.offsets[tp], ending.offsets[tp]
            if s >= 0 and e >= 0 and s > e:
                raise InvalidOptionError(f"options 'startingOffsets'/'endingOffsets': {tp[0]}-{tp[1]} starts at {s} "
                                         f"after it ends at {e}")


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    opts = _check_known(options, _SINK, "sink")
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise InvalidOptionError("option 'topic' is empty")
    sink_id = _stable_id(opts, "sinkId")
    return SinkOptions(
        bootstrap_servers=_bootstrap(opts),
        topic=topic.strip() if topic else None,
        sink_id=sink_id,
        request_timeout_ms=_positive_int(opts.get("kafka.request.timeout.ms", "30000"), "kafka.request.timeout.ms"),
        client_id=opts.get("kafka.client.id", "raftkafka-spark-sink"),
        security=_security(opts),
        tuning=ClientTuning(producer=_client_properties(opts, _SINK, "sink")),
    )


def _spelled(low: str) -> str:
    for name in _SOURCE + _SINK:
        if name.lower() == low:
            return name
    return low
