"""The broker role's own settings: identity, listener, and the static (file) configs.

`static` holds the node file's Kafka-named settings (`num.partitions`,
`auto.create.topics.enable`, `log.retention.ms`, ...) as strings; they are the
lowest layer under the dynamic configs in the metadata image, exactly as in
Kafka's config resolution (metadata.config_definitions).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from wire.protocol import DEFAULT_MAX_FRAME_SIZE

__all__ = ["BrokerConfig"]


@dataclass(frozen=True)
class BrokerConfig:
    node_id: int
    data_dirs: tuple[str, ...] = ()
    host: str = "127.0.0.1"  # where the Kafka listener binds
    port: int = 9092  # 0 = any free port (tests)
    listener_name: str = "PLAINTEXT"  # the endpoint clients see in Metadata
    rack: str | None = None
    cluster_id: str | None = None
    static: Mapping[str, str] = field(default_factory=dict)
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE  # socket.request.max.bytes
    retention_check_interval_s: float = 300.0  # log.retention.check.interval.ms
    cleaner_backoff_s: float = 15.0  # log.cleaner.backoff.ms: the cleaner's pause when nothing is due
    flush_check_interval_s: float = 1.0
    replica_apply_timeout_s: float = 5.0  # how long a request waits for a just-published partition

    def static_with_identity(self) -> dict[str, str]:
        """Static configs plus node.id (describe_configs uses it to pick per-broker overrides)."""
        out = dict(self.static)
        out.setdefault("node.id", str(self.node_id))
        return out
