"""MirrorMaker 2's properties file (`connect-mirror-maker.properties`), with Kafka's names and defaults.

    clusters = A, B
    A.bootstrap.servers = host1:9092
    B.bootstrap.servers = host2:9092
    A->B.enabled = true
    A->B.topics = orders, payments-.*
    replication.factor = 3

A setting is looked up as `A->B.<name>` first, then `<name>`. Client settings of a cluster are
`A.<kafka client property>` (`A.security.protocol`, `A.ssl.*`, `A.sasl.*`; `A.producer.*`,
`A.consumer.*`, `A.admin.*` for one kind of client); top-level security settings apply to every
cluster.

`tasks.max` (per flow or top-level) splits a flow's partitions round-robin across that many
tasks, each with its own consumer and producer. `B.exactly.once.source.support = enabled` (or
top-level `exactly.once.source.support`, for every target) makes the flows into B copy records
and their progress in one transaction per task (KIP-618), `transaction.boundary` = `poll`
(Kafka's default: one transaction per batch polled) or `interval` (every
`transaction.boundary.interval.ms`, default `offset.flush.interval.ms`); `disabled` (the
default) and `preparing` copy at-least-once.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from raftkafka.client.security import SECURITY_PROPERTIES
from raftkafka.connect.replication_policy import ReplicationPolicy, make_policy
from raftkafka.connect.worker_config import client_settings

__all__ = ["ClusterConfig", "FlowConfig", "parse_mirror_config"]

_DEFAULTS = {
    "topics": ".*",
    "topics.exclude": r".*[\-\.]internal, .*\.replica, __.*",
    "groups": ".*",
    "groups.exclude": "console-consumer-.*, connect-.*, __.*",
    "replication.factor": "2",
    "replication.policy.class": "org.apache.kafka.connect.mirror.DefaultReplicationPolicy",
    "replication.policy.separator": ".",
    "refresh.topics.enabled": "true",
    "refresh.topics.interval.seconds": "600",
    "refresh.groups.interval.seconds": "600",
    "sync.topic.configs.enabled": "true",
    "sync.topic.configs.interval.seconds": "600",
    "config.properties.exclude": (r"follower\.replication\.throttled\.replicas, "
                                  r"leader\.replication\.throttled\.replicas, message\.timestamp\.difference\.max\.ms, "
                                  r"message\.timestamp\.type, unclean\.leader\.election\.enable, min\.insync\.replicas"),
    "emit.heartbeats.enabled": "true",
    "emit.heartbeats.interval.seconds": "1",
    "heartbeats.topic.replication.factor": "3",
    "emit.checkpoints.enabled": "true",
    "emit.checkpoints.interval.seconds": "60",
    "sync.group.offsets.enabled": "false",
    "sync.group.offsets.interval.seconds": "60",
    "offset.lag.max": "100",
    "offset-syncs.topic.replication.factor": "3",
    "checkpoints.topic.replication.factor": "3",
    "offset.storage.replication.factor": "3",
    "offset.flush.interval.ms": "60000",
    "tasks.max": "1",
    "transaction.boundary": "poll",
}
_EXACTLY_ONCE_VALUES = ("disabled", "preparing", "enabled")
_BOUNDARIES = ("poll", "interval")


@dataclass(frozen=True)
class ClusterConfig:
    alias: str
    bootstrap_servers: str
    properties: dict[str, str] = field(repr=False)  # Kafka client properties of this cluster

    def client_settings(self, kind: str) -> dict[str, str]:
        return client_settings(self.properties, kind)


@dataclass(frozen=True)
class FlowConfig:
    source: ClusterConfig
    target: ClusterConfig
    topics: re.Pattern
    topics_exclude: re.Pattern
    groups: re.Pattern
    groups_exclude: re.Pattern
    config_exclude: re.Pattern
    policy: ReplicationPolicy
    replication_factor: int
    refresh_topics: float | None  # seconds; None: topics are listed once, at start
    sync_topic_configs: float | None
    emit_heartbeats: float | None
    emit_checkpoints: float | None
    sync_group_offsets: float | None
    offset_lag_max: int
    offset_syncs_rf: int
    heartbeats_rf: int
    checkpoints_rf: int
    progress_rf: int
    flush_interval: float  # seconds
    tasks_max: int = 1
    exactly_once: bool = False  # the target's exactly.once.source.support is enabled
    transaction_interval: float | None = None  # seconds (transaction.boundary=interval); None: one per poll

    @property
    def name(self) -> str:
        return f"{self.source.alias}->{self.target.alias}"

    @property
    def offset_syncs_topic(self) -> str:  # on the source cluster (offset-syncs.topic.location=source)
        return f"mm2-offset-syncs.{self.target.alias}.internal"

    def transactional_id(self, task: int) -> str:
        """Connect's per-task id, `<group.id>-<connector>-<task>`, with MM2's group.id `<source>-mm2`:
        the same task of a restarted mirror fences the one it replaces."""
        return f"{self.source.alias}-mm2-MirrorSourceConnector-{task}"

    @property
    def checkpoints_topic(self) -> str:  # on the target cluster
        return f"{self.source.alias}.checkpoints.internal"

    @property
    def progress_topic(self) -> str:  # on the target cluster
        return f"mm2-offsets.{self.source.alias}.internal"

    def replicates_topic(self, topic: str) -> bool:
        wanted = (bool(self.topics.fullmatch(topic)) and not self.topics_exclude.fullmatch(topic)) \
            or self.policy.is_heartbeats(topic)
        return wanted and not self.policy.is_internal(topic) and not self.policy.is_cycle(topic, self.target.alias)

    def replicates_group(self, group: str) -> bool:
        return bool(self.groups.fullmatch(group)) and not self.groups_exclude.fullmatch(group)


def _pattern_list(text: str, name: str) -> re.Pattern:
    """Kafka's comma-separated regex list, as one alternation (an empty list matches nothing)."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    try:
        return re.compile("|".join(f"(?:{p})" for p in parts) if parts else "(?!)")
    except re.error as e:
        raise ValueError(f"{name}: {e}") from None


def parse_mirror_config(properties: dict[str, str]) -> tuple[list[FlowConfig], list[str]]:
    """The enabled flows, and notes on settings that change nothing here (for the log)."""
    aliases = [a.strip() for a in properties.get("clusters", "").split(",") if a.strip()]
    if len(aliases) < 2:
        raise ValueError("clusters must name at least two cluster aliases (clusters = A, B)")
    clusters = {}
    for alias in aliases:
        prefix = alias + "."
        own = {k[len(prefix):]: v for k, v in properties.items() if k.startswith(prefix) and "->" not in k}
        bootstrap = own.get("bootstrap.servers", "").strip()
        if not bootstrap:
            raise ValueError(f"{alias}.bootstrap.servers is required")
        shared = {k: v for k, v in properties.items() if k in SECURITY_PROPERTIES}
        clusters[alias] = ClusterConfig(alias, bootstrap, {**shared, **own})
    flows, notes = [], []
    for source in aliases:
        for target in aliases:
            if source == target:
                continue
            flow = f"{source}->{target}"
            if properties.get(f"{flow}.enabled", "false").strip().lower() != "true":
                continue
            try:
                flows.append(_flow(properties, flow, clusters[source], clusters[target], notes))
            except ValueError as e:
                raise ValueError(f"{flow}: {e}") from None
    if not flows:
        raise ValueError("no replication flow is enabled (set A->B.enabled = true)")
    return flows, notes


def _flow(properties: dict, flow: str, source: ClusterConfig, target: ClusterConfig, notes: list) -> FlowConfig:
    def get(name: str) -> str:
        value = properties.get(f"{flow}.{name}", properties.get(name))
        if value is None and name == "topics.exclude":  # the names before KIP-629
            value = properties.get(f"{flow}.topics.blacklist", properties.get("topics.blacklist"))
        if value is None and name == "groups.exclude":
            value = properties.get(f"{flow}.groups.blacklist", properties.get("groups.blacklist"))
        return (value if value is not None else _DEFAULTS[name]).strip()

    def number(name: str, minimum: int = 1) -> int:
        return number_of(name, get(name), minimum)

    def number_of(name: str, text: str, minimum: int = 1) -> int:
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"{name}={text!r}: not a number") from None
        if value < minimum:
            raise ValueError(f"{name}={text!r}: must be at least {minimum}")
        return value

    def flag(name: str) -> bool:
        text = get(name).lower()
        if text not in ("true", "false"):
            raise ValueError(f"{name} must be true or false, not {text!r}")
        return text == "true"

    def every(enabled: str, interval: str) -> float | None:
        return number(interval) * 1.0 if flag(enabled) else None

    support = properties.get(f"{target.alias}.exactly.once.source.support",
                             properties.get("exactly.once.source.support", "disabled")).strip().lower()
    if support not in _EXACTLY_ONCE_VALUES:
        raise ValueError(f"exactly.once.source.support={support!r}: must be one of {', '.join(_EXACTLY_ONCE_VALUES)}")
    if support == "preparing":
        notes.append(f"{flow}: {target.alias}.exactly.once.source.support=preparing: copying at-least-once "
                     "until it is enabled")
    boundary = get("transaction.boundary").lower()
    if boundary not in _BOUNDARIES:
        raise ValueError(f"transaction.boundary={boundary!r}: must be poll or interval "
                         "(MirrorSourceConnector defines no transaction boundaries of its own)")
    interval = None
    if boundary == "interval":
        text = properties.get(f"{flow}.transaction.boundary.interval.ms", properties.get(
            "transaction.boundary.interval.ms", get("offset.flush.interval.ms")))
        interval = number_of("transaction.boundary.interval.ms", text.strip()) / 1000
    return FlowConfig(
        source=source, target=target,
        topics=_pattern_list(get("topics"), "topics"),
        topics_exclude=_pattern_list(get("topics.exclude"), "topics.exclude"),
        groups=_pattern_list(get("groups"), "groups"),
        groups_exclude=_pattern_list(get("groups.exclude"), "groups.exclude"),
        config_exclude=_pattern_list(get("config.properties.exclude"), "config.properties.exclude"),
        policy=make_policy(get("replication.policy.class"), get("replication.policy.separator")),
        replication_factor=number("replication.factor"),
        refresh_topics=every("refresh.topics.enabled", "refresh.topics.interval.seconds"),
        sync_topic_configs=every("sync.topic.configs.enabled", "sync.topic.configs.interval.seconds"),
        emit_heartbeats=every("emit.heartbeats.enabled", "emit.heartbeats.interval.seconds"),
        emit_checkpoints=every("emit.checkpoints.enabled", "emit.checkpoints.interval.seconds"),
        sync_group_offsets=every("sync.group.offsets.enabled", "sync.group.offsets.interval.seconds"),
        offset_lag_max=number("offset.lag.max", 0),
        offset_syncs_rf=number("offset-syncs.topic.replication.factor"),
        heartbeats_rf=number("heartbeats.topic.replication.factor"),
        checkpoints_rf=number("checkpoints.topic.replication.factor"),
        progress_rf=number("offset.storage.replication.factor"),
        flush_interval=number("offset.flush.interval.ms") / 1000,
        tasks_max=number("tasks.max"),
        exactly_once=support == "enabled",
        transaction_interval=interval)
