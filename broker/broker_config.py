"""The broker role's own settings: identity, listener, and the static (file) configs.

`static` holds the node file's Kafka-named settings (`num.partitions`,
`auto.create.topics.enable`, `log.retention.ms`, ...) as strings; they are the
lowest layer under the dynamic configs in the metadata image, exactly as in
Kafka's config resolution (metadata.config_definitions).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from wire.connection_limits import ConnectionLimits
from storage.listener_security import ListenerSecurity
from storage.tls import TlsContext
from metadata.authorizer import AuthorizerSettings
from wire.protocol import DEFAULT_MAX_FRAME_SIZE
from wire.security.sasl_config import SaslCredentials

__all__ = ["BrokerConfig", "BrokerListener"]


@dataclass(frozen=True)
class BrokerListener:
    """One listener the Kafka protocol is served on (a node may have several)."""

    host: str
    port: int
    security: ListenerSecurity


@dataclass(frozen=True)
class BrokerConfig:
    node_id: int
    data_dirs: tuple[str, ...] = ()
    host: str = "127.0.0.1"  # where the Kafka listener binds
    port: int = 9092  # 0 = any free port (tests)
    listener_name: str = "PLAINTEXT"  # the inter-broker listener: replica fetches go to its endpoints
    rack: str | None = None
    cluster_id: str | None = None
    static: Mapping[str, str] = field(default_factory=dict)
    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE  # socket.request.max.bytes
    connection_limits: ConnectionLimits = ConnectionLimits()  # max.connections, queued.max.request.bytes, ...
    retention_check_interval_s: float = 300.0  # log.retention.check.interval.ms
    cleaner_backoff_s: float = 15.0  # log.cleaner.backoff.ms: the cleaner's pause when nothing is due
    flush_check_interval_s: float = 1.0
    replica_apply_timeout_s: float = 5.0  # how long a request waits for a just-published partition
    # Every client listener; empty = one PLAINTEXT listener `listener_name` on host:port.
    listeners: tuple[BrokerListener, ...] = ()
    super_users: frozenset = frozenset()  # of KafkaPrincipal (super.users)
    inter_broker_tls: TlsContext | None = None  # client side of the inter-broker listener
    inter_broker_sasl: SaslCredentials | None = None  # this node's login there when it is SASL

    def served_listeners(self) -> tuple[BrokerListener, ...]:
        return self.listeners or (BrokerListener(self.host, self.port, ListenerSecurity(self.listener_name)),)
    # authorizer.class.name, super.users, allow.everyone.if.no.acl.found (off: all allowed)
    authorizer: AuthorizerSettings = AuthorizerSettings()

    def static_with_identity(self) -> dict[str, str]:
        """Static configs plus node.id (describe_configs uses it to pick per-broker overrides)."""
        out = dict(self.static)
        out.setdefault("node.id", str(self.node_id))
        return out
