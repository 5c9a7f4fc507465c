"""SASL settings with Kafka's names, and the mechanism objects they make.

Server side, per listener (`listener.name.<listener>.<setting>` wins over the plain name,
as in Kafka): `sasl.enabled.mechanisms` (default GSSAPI in Kafka; here PLAIN, since GSSAPI
is not offered), the static PLAIN users from `listener.name.<l>.plain.sasl.jaas.config`
(or `sasl.jaas.config`) as `user_<name>="<password>"` options, `connections.max.reauth.ms`
(KIP-368, 0 = sessions never expire), `sasl.server.max.receive.size` (the largest frame
before the login), `connection.failed.authentication.delay.ms` (how long a failed login's
connection stays open after the answer) and `sasl.handshake.timeout.ms` (raftkafka's own: how long an
unauthenticated connection may take to log in). On outgoing inter-node connections
a node logs in with the `username`/`password` of the listener's JAAS entry for the mechanism
named by `sasl.mechanism.inter.broker.protocol` / `sasl.mechanism.controller.protocol`
(`node_credentials`), as a Kafka broker does.

Client side (Kafka client properties): `sasl.mechanism` with `sasl.username`/`sasl.password`
(librdkafka's names) or a `sasl.jaas.config` carrying `username`/`password` (the Java
client's).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable, Mapping

from wire.security.jaas import JaasError, parse_jaas
from wire.security.sasl_common import MECHANISMS, PLAIN
from wire.security.sasl_plain import PlainClient, PlainServer, static_users_check
from wire.security.sasl_scram import HASHES, ScramClient, ScramCredential, ScramServer, make_nonce

__all__ = [
    "SaslServerSettings", "SaslCredentials", "server_settings", "client_credentials", "node_credentials",
    "new_server", "new_client", "ScramLookup",
]

# (mechanism, username) -> the stored credential, or None
ScramLookup = Callable[[str, str], ScramCredential | None]
DEFAULT_HANDSHAKE_TIMEOUT_MS = 10_000
DEFAULT_MAX_RECEIVE_SIZE = 524_288  # Kafka's sasl.server.max.receive.size
DEFAULT_FAILED_DELAY_MS = 100  # Kafka's connection.failed.authentication.delay.ms


@dataclass(frozen=True)
class SaslCredentials:
    """What a client (or a node on its outgoing connections) logs in with."""
    mechanism: str
    username: str
    password: str = field(repr=False)


@dataclass(frozen=True)
class SaslServerSettings:
    mechanisms: tuple[str, ...] = (PLAIN,)
    plain_users: Mapping[str, str] = field(default_factory=dict, repr=False)
    reauth_ms: int = 0  # connections.max.reauth.ms
    handshake_timeout_ms: int = DEFAULT_HANDSHAKE_TIMEOUT_MS
    max_receive_size: int = DEFAULT_MAX_RECEIVE_SIZE  # sasl.server.max.receive.size
    failed_delay_ms: int = DEFAULT_FAILED_DELAY_MS  # connection.failed.authentication.delay.ms


def _mechanisms(text: str, setting: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(m.strip().upper() for m in text.split(",") if m.strip()))
    if not names:
        raise ValueError(f"{setting}: no mechanism named")
    for name in names:
        if name not in MECHANISMS:
            raise ValueError(f"{setting}: {name} is not supported (supported: {', '.join(MECHANISMS)})")
    return names


def _int(text: str | None, default: int, setting: str) -> int:
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{setting}: {text!r} is not an integer") from None
    if value < 0:
        raise ValueError(f"{setting}: must be >= 0")
    return value


def server_settings(listener: str, lookup: Callable[[str], str | None]) -> SaslServerSettings:
    """The SASL settings of one listener; `lookup(name)` reads a setting, listener-scoped
    first. ValueError names the bad setting."""
    scoped = f"listener.name.{listener.lower()}."
    mechanisms = _mechanisms(lookup("sasl.enabled.mechanisms") or PLAIN, scoped + "sasl.enabled.mechanisms")
    jaas_text = lookup("plain.sasl.jaas.config") or lookup("sasl.jaas.config")
    users = _jaas(jaas_text, scoped + "plain.sasl.jaas.config").plain_users if jaas_text else {}
    if PLAIN in mechanisms and not users:
        raise ValueError(f"{scoped}plain.sasl.jaas.config: PLAIN is enabled on listener {listener} "
                         f"but no user_<name>=\"<password>\" is configured")
    return SaslServerSettings(
        mechanisms=mechanisms, plain_users=users,
        reauth_ms=_int(lookup("connections.max.reauth.ms"), 0, "connections.max.reauth.ms"),
        handshake_timeout_ms=_int(lookup("sasl.handshake.timeout.ms"), DEFAULT_HANDSHAKE_TIMEOUT_MS,
                                  "sasl.handshake.timeout.ms"),
        max_receive_size=_int(lookup("sasl.server.max.receive.size"), DEFAULT_MAX_RECEIVE_SIZE,
                              "sasl.server.max.receive.size"),
        failed_delay_ms=_int(lookup("connection.failed.authentication.delay.ms"), DEFAULT_FAILED_DELAY_MS,
                             "connection.failed.authentication.delay.ms"))


def _jaas(text: str, setting: str):
    try:
        return parse_jaas(text)
    except JaasError as e:
        raise ValueError(f"{setting}: {e}") from None


def node_credentials(listener: str, mechanism_setting: str, lookup: Callable[[str], str | None]) -> SaslCredentials:
    """What this node logs in with to a peer's SASL listener `listener`; ValueError if unset."""
    mechanism = (lookup(mechanism_setting) or PLAIN).strip().upper()
    if mechanism not in MECHANISMS:
        raise ValueError(f"{mechanism_setting}: {mechanism} is not supported (supported: {', '.join(MECHANISMS)})")
    setting = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
    text = lookup(f"{mechanism.lower()}.sasl.jaas.config") or lookup("sasl.jaas.config")
    options = _jaas(text, setting).options if text else {}
    if "username" not in options or "password" not in options:
        raise ValueError(f"{setting}: needs username and password: this node logs in with them "
                         f"to the other nodes' {listener} listener ({mechanism})")
    return SaslCredentials(mechanism, options["username"], options["password"])


def client_credentials(props: Mapping[str, str]) -> SaslCredentials:
    """From Kafka client properties; ValueError names what is missing or wrong."""
    mechanism = (props.get("sasl.mechanism") or props.get("sasl.mechanisms") or "GSSAPI").strip().upper()
    if mechanism not in MECHANISMS:
        raise ValueError(f"sasl.mechanism: {mechanism} is not supported (supported: {', '.join(MECHANISMS)})")
    username, password = props.get("sasl.username"), props.get("sasl.password")
    if username is None and props.get("sasl.jaas.config"):
        try:
            options = parse_jaas(props["sasl.jaas.config"]).options
        except JaasError as e:
            raise ValueError(f"sasl.jaas.config: {e}") from None
        username, password = options.get("username"), options.get("password")
    if not username or password is None:
        raise ValueError("SASL needs sasl.username and sasl.password (or sasl.jaas.config with username and password)")
    return SaslCredentials(mechanism, username, password)


def new_server(mechanism: str, settings: SaslServerSettings, scram: ScramLookup, rng: random.Random):
    """The server state machine for one exchange of an enabled mechanism."""
    if mechanism == PLAIN:
        return PlainServer(static_users_check(settings.plain_users))
    if mechanism in HASHES:
        return ScramServer(mechanism, lambda user: scram(mechanism, user), make_nonce(rng))
    raise ValueError(f"{mechanism} is not a supported mechanism")


def new_client(credentials: SaslCredentials, rng: random.Random):
    if credentials.mechanism == PLAIN:
        return PlainClient(credentials.username, credentials.password)
    return ScramClient(credentials.mechanism, credentials.username, credentials.password, make_nonce(rng))
