"""What a served connection knows about its peer: listener, protocol, address, principal.

One object per accepted connection, made by the listener that accepted it. Its principal
starts as the TLS certificate's mapped subject (SSL, SASL_SSL with a client certificate)
or ANONYMOUS, and a SASL exchange replaces it (`authenticated`). Handlers and the
inter-node gate read it; nothing in a request can change it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from wire.security.principal import ANONYMOUS, KafkaPrincipal

__all__ = ["ConnectionSecurity", "SECURITY_PROTOCOLS", "uses_tls", "uses_sasl", "is_member"]

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def uses_tls(protocol: str) -> bool:
    return protocol in ("SSL", "SASL_SSL")


def uses_sasl(protocol: str) -> bool:
    return protocol in ("SASL_PLAINTEXT", "SASL_SSL")


@dataclass(slots=True)
class ConnectionSecurity:
    listener: str  # the listener's name, e.g. "CONTROLLER", "SASL_SSL"
    protocol: str  # one of SECURITY_PROTOCOLS
    peer_host: str = ""
    principal: KafkaPrincipal = field(default=ANONYMOUS)
    tls_subject: str | None = None  # the client certificate's subject (RFC 2253), if any
    # False until a SASL listener's exchange completes; always True on the others.
    authenticated: bool = True

    @classmethod
    def accepted(cls, listener: str, protocol: str, peer_host: str = "",
                 principal: KafkaPrincipal | None = None, tls_subject: str | None = None) -> "ConnectionSecurity":
        return cls(listener, protocol, peer_host, principal or ANONYMOUS, tls_subject,
                   authenticated=not uses_sasl(protocol))

    def authenticate(self, principal: KafkaPrincipal) -> None:
        """The SASL exchange succeeded as `principal`."""
        self.principal = principal
        self.authenticated = True


def is_member(security: ConnectionSecurity, super_users: frozenset[KafkaPrincipal]) -> bool:
    """May this connection speak for a cluster member (Raft, controller RPCs, replica fetch)?

    With `super.users` set, only those principals. Without it, the listener's own
    authentication is the check: a SASL listener's login or a verified client certificate
    on a TLS listener (whose client auth is then required); a PLAINTEXT listener
    authenticates nobody, so it admits everyone, as an unsecured Kafka cluster does.
    """
    if not security.authenticated:
        return False
    if super_users:
        return security.principal in super_users
    if uses_sasl(security.protocol):
        return True
    if uses_tls(security.protocol):
        return security.tls_subject is not None
    return True
