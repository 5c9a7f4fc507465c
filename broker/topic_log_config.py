"""A topic's effective LogConfig from the metadata image (topic → broker → static → default).

The storage layer knows only `LogConfig`; the metadata layer knows Kafka's
topic config names and their broker synonyms. This is the one place that
joins them, so a Config record changing `retention.ms` or a broker default
like `log.retention.hours` reaches the partition logs.
"""
from __future__ import annotations

from dataclasses import fields
from typing import Mapping

from metadata.config_definitions import TOPIC_CONFIGS, resolve_topic_config
from metadata.image import MetadataImage
from storage.log import LogConfig, LogConfigError

__all__ = ["log_config_for", "LOG_CONFIG_NAMES"]

# LogConfig field -> Kafka topic config name (segment_bytes -> segment.bytes).
LOG_CONFIG_NAMES = tuple(f.name.replace("_", ".") for f in fields(LogConfig))


def log_config_for(image: MetadataImage, topic: str, static: Mapping[str, str],
                   node_id: int | None = None) -> LogConfig:
    overrides = image.topic_config(topic)
    per_broker = image.broker_config(node_id) if node_id is not None else {}
    cluster = image.broker_config(None)
    props = {}
    for name in LOG_CONFIG_NAMES:
        if name not in TOPIC_CONFIGS:
            continue
        chain = resolve_topic_config(name, overrides, per_broker, cluster, static)
        if chain and chain[0].value is not None:
            props[name] = chain[0].value
    try:
        return LogConfig.from_properties(props)
    except LogConfigError:
        # A value the controller accepted but the log refuses (never expected):
        # fall back layer by layer rather than leave the partition unopenable.
        config = LogConfig()
        for name in sorted(props):
            try:
                config = LogConfig.from_properties({name: props[name]}, base=config)
            except LogConfigError:
                continue
        return config
