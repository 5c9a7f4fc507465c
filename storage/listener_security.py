"""One listener's security: its protocol, TLS contexts, SASL settings, principal mapping and member rule.

The node builds one per listener from its config (raftkafka.node.security_setup); the code that
serves a listener (the Kafka server, the Raft/controller transport) calls `accept(stream)`
for each connection, and code that connects to a peer's listener uses `client_tls`.
A PLAINTEXT listener's object has no TLS and maps every connection to ANONYMOUS.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

from storage.env import peer_certificate, peer_host
from storage.tls import TlsContext
from wire.security.connection_security import ConnectionSecurity, is_member
from wire.security.principal import KafkaPrincipal
from wire.security.principal_mapping import NoMatchingRule, PrincipalMapper, subject_from_peercert
from wire.security.sasl_config import SaslServerSettings

__all__ = ["ListenerSecurity"]

log = logging.getLogger("raftkafka.security")


@dataclass(frozen=True)
class ListenerSecurity:
    name: str = "PLAINTEXT"
    protocol: str = "PLAINTEXT"
    server_tls: TlsContext | None = None  # what `net.serve` wraps accepted connections with
    client_tls: TlsContext | None = None  # what this node connects to peers' same-named listener with
    mapper: PrincipalMapper = field(default_factory=PrincipalMapper)
    super_users: frozenset[KafkaPrincipal] = frozenset()
    sasl: SaslServerSettings | None = None  # a SASL listener's mechanisms, PLAIN users, session rules

    def accept(self, stream) -> ConnectionSecurity | None:
        """The security state of a connection this listener accepted (after its TLS
        handshake); None when its certificate maps to no principal (close it)."""
        host = peer_host(stream)
        subject = subject_from_peercert(peer_certificate(stream))
        principal = None
        if subject is not None:
            try:
                principal = KafkaPrincipal("User", self.mapper.name_for(subject))
            except NoMatchingRule as e:
                log.warning("closing connection from %s on %s: %s", host, self.name, e)
                return None
        return ConnectionSecurity.accepted(self.name, self.protocol, host, principal, subject)

    def admits_member(self, security: ConnectionSecurity) -> bool:
        """May this connection speak for a cluster member (wire.security.is_member)?"""
        return is_member(security, self.super_users)

    def tls_contexts(self) -> list[TlsContext]:
        return [t for t in (self.server_tls, self.client_tls) if t is not None]
