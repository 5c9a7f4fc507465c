"""Keeping the target's topics in step with the source's: the remote topics exist, with at least
the source's partition count and the source's topic-level settings (those set on the topic
itself, minus `config.properties.exclude`), as MirrorSourceConnector keeps them."""
from __future__ import annotations

from raftkafka.client import RESOURCE_TOPIC, Admin, KafkaError, NewTopic
from raftkafka.connect.mirror_config import FlowConfig
from wire.error_codes import ErrorCode

__all__ = ["source_topics", "ensure_remote_topics", "sync_topic_configs", "ensure_internal_topic"]

_DYNAMIC_TOPIC_CONFIG = 1  # DescribeConfigs config_source: set on the topic itself


async def source_topics(flow: FlowConfig, source: Admin) -> dict[str, int]:
    """Replicated source topics -> partition count."""
    return {name: len(info.partitions) for name, info in (await source.list_topics()).items()
            if flow.replicates_topic(name)}


async def topic_configs(flow: FlowConfig, source: Admin, topics) -> dict[str, dict[str, str]]:
    if not topics:
        return {}
    described = await source.describe_configs([(RESOURCE_TOPIC, t) for t in sorted(topics)])
    return {name: {k: e.value for k, e in entries.items()
                   if e.source == _DYNAMIC_TOPIC_CONFIG and e.value is not None and not e.sensitive
                   and not flow.config_exclude.fullmatch(k)}
            for (_, name), entries in described.items()}


async def ensure_remote_topics(flow: FlowConfig, source: Admin, target: Admin, topics: dict[str, int], log) -> None:
    """Create missing remote topics (partitions, configs) and add partitions the source gained."""
    existing = await target.list_topics()
    remote = {flow.policy.remote_topic(flow.source.alias, t): t for t in topics}
    missing = [r for r in remote if r not in existing]
    configs = await topic_configs(flow, source, [remote[r] for r in missing])
    if missing:
        results = await target.create_topics([
            NewTopic(r, topics[remote[r]], flow.replication_factor, configs.get(remote[r], {})) for r in missing])
        for name, error in sorted(results.items()):
            if error is None:
                log(f"{flow.name}: created topic {name} ({topics[remote[name]]} partitions)")
            elif error.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise error
    grow = {r: topics[t] for r, t in remote.items() if r in existing and len(existing[r].partitions) < topics[t]}
    if grow:
        for name, error in sorted((await target.create_partitions(grow)).items()):
            if error is not None and error.code != ErrorCode.INVALID_PARTITIONS:
                raise error
            log(f"{flow.name}: {name} now has {grow[name]} partitions, as on {flow.source.alias}")


async def sync_topic_configs(flow: FlowConfig, source: Admin, target: Admin, topics) -> None:
    """Set on each remote topic the source topic's own settings that differ there."""
    wanted = await topic_configs(flow, source, topics)
    remote = {flow.policy.remote_topic(flow.source.alias, t): t for t in wanted}
    if not remote:
        return
    current = await target.describe_configs([(RESOURCE_TOPIC, r) for r in sorted(remote)])
    for (_, name), entries in sorted(current.items()):
        changes = {k: v for k, v in wanted[remote[name]].items() if k not in entries or entries[k].value != v}
        if changes:
            await target.alter_configs((RESOURCE_TOPIC, name), changes)


async def ensure_internal_topic(admin: Admin, name: str, replication_factor: int) -> None:
    """A compacted one-partition topic of MirrorMaker's own, created if missing."""
    try:
        await admin.create_topic(name, 1, replication_factor, {"cleanup.policy": "compact"})
    except KafkaError as e:
        if e.code != ErrorCode.TOPIC_ALREADY_EXISTS:
            raise KafkaError(f"cannot create {name} (replication factor {replication_factor}): {e}", e.code) from None
