"""MirrorMaker 2's replication policies: what a replicated topic is called on the target.

- `DefaultReplicationPolicy` (the default): `<source alias><separator><topic>`, e.g. `A.orders`
  (`replication.policy.separator`, default `.`), so a topic's origin is in its name and a topic
  that came from the target is never sent back (a cycle).
- `IdentityReplicationPolicy`: the same name as on the source (no cycle detection by name).
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ReplicationPolicy", "make_policy"]


@dataclass(frozen=True)
class ReplicationPolicy:
    separator: str = "."
    identity: bool = False

    def remote_topic(self, source_alias: str, topic: str) -> str:
        return topic if self.identity else f"{source_alias}{self.separator}{topic}"

    def topic_source(self, topic: str) -> str | None:
        """The alias of the cluster a remote topic came from (None for a local topic, or always
        with identity naming)."""
        if self.identity or self.separator not in topic:
            return None
        return topic.split(self.separator, 1)[0]

    def upstream_topic(self, topic: str) -> str | None:
        if self.topic_source(topic) is None:
            return None
        return topic.split(self.separator, 1)[1]

    def is_cycle(self, topic: str, target_alias: str) -> bool:
        """True when `topic` came (directly or through other clusters) from the target."""
        while True:
            source = self.topic_source(topic)
            if source is None:
                return False
            if source == target_alias:
                return True
            topic = self.upstream_topic(topic)

    def is_heartbeats(self, topic: str) -> bool:
        """`heartbeats`, or a remote copy of one (`A.heartbeats`): always replicated, as MirrorMaker does."""
        while True:
            upstream = self.upstream_topic(topic)
            if upstream is None:
                return topic == "heartbeats"
            topic = upstream

    @staticmethod
    def is_internal(topic: str) -> bool:
        """MirrorMaker's own topics and the clusters' internal ones are never replicated."""
        return (topic.startswith("__") or topic.startswith(".") or topic.endswith(".internal")
                or topic.startswith("mm2-"))


_CLASSES = {
    "org.apache.kafka.connect.mirror.DefaultReplicationPolicy": False, "DefaultReplicationPolicy": False,
    "org.apache.kafka.connect.mirror.IdentityReplicationPolicy": True, "IdentityReplicationPolicy": True,
}


def make_policy(class_name: str, separator: str) -> ReplicationPolicy:
    identity = _CLASSES.get(class_name.strip())
    if identity is None:
        raise ValueError(f"replication.policy.class: unknown policy {class_name!r} "
                         "(DefaultReplicationPolicy or IdentityReplicationPolicy)")
    if not separator:
        raise ValueError("replication.policy.separator must not be empty")
    return ReplicationPolicy(separator, identity)
