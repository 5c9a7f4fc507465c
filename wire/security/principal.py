"""Who is on the other end of a connection, as Kafka names it: `User:alice`.

A principal comes from authentication only (the TLS client certificate's subject mapped by
`ssl.principal.mapping.rules`, or the SASL user), never from a request body. An
unauthenticated connection is `User:ANONYMOUS`, as in Kafka.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["KafkaPrincipal", "ANONYMOUS", "parse_principal", "parse_principals"]


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    type: str
    name: str

    def __str__(self) -> str:
        return f"{self.type}:{self.name}"


ANONYMOUS = KafkaPrincipal("User", "ANONYMOUS")


def parse_principal(text: str) -> KafkaPrincipal:
    """`User:alice` → KafkaPrincipal("User", "alice"); ValueError without a `Type:` prefix."""
    kind, sep, name = text.strip().partition(":")
    if not sep or not kind or not name:
        raise ValueError(f"{text!r} is not a principal (expected Type:name, e.g. User:admin)")
    return KafkaPrincipal(kind, name)


def parse_principals(text: str) -> frozenset[KafkaPrincipal]:
    """Kafka's `super.users`: principals separated by semicolons (a DN holds commas)."""
    return frozenset(parse_principal(item) for item in text.split(";") if item.strip())
