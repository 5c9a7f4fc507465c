"""The group coordinator's broker settings, read with Kafka's names.

Settings the metadata layer knows (offsets.topic.num.partitions, ...) resolve
through the normal chain (dynamic configs over the node file); the others
are read from the node file (`BrokerConfig.static`) with Kafka's defaults.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from broker.groups import GroupConfig
from metadata.controller.dynamic_configs import effective_broker_value
from metadata.image import MetadataImage

__all__ = ["GroupSettings", "group_settings", "static_int", "OFFSETS_TOPIC"]

OFFSETS_TOPIC = "__consumer_offsets"


@dataclass(frozen=True)
class GroupSettings:
    group: GroupConfig
    offsets_topic_replication_factor: int = 3   # offsets.topic.replication.factor
    offsets_topic_segment_bytes: int = 104_857_600  # offsets.topic.segment.bytes
    commit_timeout_ms: int = 5_000              # offsets.commit.timeout.ms
    load_yield_batches: int = 256               # batches replayed between yields to the event loop

    def offsets_topic_configs(self) -> dict[str, str]:
        """What Kafka sets on `__consumer_offsets` when it creates it."""
        return {"cleanup.policy": "compact", "segment.bytes": str(self.offsets_topic_segment_bytes),
                "compression.type": "producer"}


def static_int(static: Mapping[str, str], name: str, default: int, minimum: int = 0) -> int:
    raw = static.get(name)
    if raw is None:
        return default
    try:
        value = int(str(raw).strip(), 10)
    except ValueError:
        raise ValueError(f"{name}: {raw!r} is not an integer") from None
    if value < minimum:
        raise ValueError(f"{name}: {value} is below the minimum {minimum}")
    return value


def _resolved(image: MetadataImage, static: Mapping[str, str], name: str, default: int) -> int:
    value = effective_broker_value(image, name, static)
    return default if value is None else int(value)


def group_settings(image: MetadataImage, static: Mapping[str, str]) -> GroupSettings:
    """Raises ValueError naming the setting when a node-file value is malformed."""
    retention_minutes = _resolved(image, static, "offsets.retention.minutes", 10_080)
    config = GroupConfig(
        num_partitions=_resolved(image, static, "offsets.topic.num.partitions", 50),
        min_session_timeout_ms=static_int(static, "group.min.session.timeout.ms", 6_000),
        max_session_timeout_ms=static_int(static, "group.max.session.timeout.ms", 1_800_000),
        initial_rebalance_delay_ms=_resolved(image, static, "group.initial.rebalance.delay.ms", 3_000),
        max_group_size=static_int(static, "group.max.size", 2**31 - 1, minimum=1),
        offsets_retention_ms=retention_minutes * 60_000,
        offsets_retention_check_interval_ms=static_int(static, "offsets.retention.check.interval.ms",
                                                        600_000, minimum=1),
        offset_metadata_max_bytes=static_int(static, "offset.metadata.max.bytes", 4_096),
    )
    return GroupSettings(
        group=config,
        offsets_topic_replication_factor=_resolved(image, static, "offsets.topic.replication.factor", 3),
        offsets_topic_segment_bytes=static_int(static, "offsets.topic.segment.bytes", 104_857_600, minimum=1),
        commit_timeout_ms=static_int(static, "offsets.commit.timeout.ms", 5_000, minimum=1),
    )
