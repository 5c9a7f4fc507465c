"""Node configuration: Kafka's setting names, from a TOML file and/or flags.

A TOML file may use flat dotted keys (`"node.id" = 1`) or nested tables
(`[node] id = 1`); both name the setting `node.id`. Flags override the file:
`--set NAME=VALUE` for any setting, plus short aliases for the common ones
(`--node-id`, `--roles`, `--log-dirs`, `--listeners`, `--controller-quorum-voters`).
Every problem is a `ConfigError` whose message is one line naming the setting.

To add a node setting, add one `Setting` to SETTINGS and a field to NodeConfig.
The broker's Kafka settings (`num.partitions`, `log.retention.hours`,
`offsets.topic.replication.factor`, ...) are the node file's *static* broker
configs: they are validated against the metadata layer's definitions and kept
as strings in `NodeConfig.broker_static`, the lowest layer under the dynamic
configs, exactly as in Kafka (the broker and the controller both read them).

Why one module of ~580 lines: the settings table, NodeConfig and the loader change together
whenever a setting is added; the listener, protocol-map and limits helpers read the same table.
"""
from __future__ import annotations

import logging

import tomllib
from dataclasses import dataclass, field
from typing import Any, Callable

from metadata.authorizer import STANDARD_AUTHORIZER
from metadata.config_definitions import BROKER_CONFIGS
from metadata.config_definitions import parse as parse_broker_value
from metadata.errors import ApiError
from raft.config import RaftConfig
from storage.meta_properties import VoterSpec
from raftkafka.node import connection_limit_settings as limit_settings
from wire.connection_limits import ConnectionLimits
from wire.security.connection_security import SECURITY_PROTOCOLS, uses_tls
from wire.security.principal import parse_principals
from wire.security.sasl_config import SaslCredentials, SaslServerSettings, node_credentials, server_settings

__all__ = [
    "ConfigError",
    "NodeConfig",
    "Listener",
    "SETTINGS",
    "load_config",
    "convert_setting",
    "parse_voters",
    "parse_listeners",
    "add_config_arguments",
    "settings_from_args",
    "listener_sasl",
    "listener_login",
    "controller_login",
]


class ConfigError(Exception):
    """A bad setting. str(e) is the one line to print."""


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"  # from listener.security.protocol.map


# Kafka's default map, plus CONTROLLER (the controller listener's usual name) in plaintext.
DEFAULT_PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT"

# Security settings kept as strings (Kafka's names); each may also be given for one listener
# as `listener.name.<listener, lower case>.<name>`, which wins for that listener.
SECURITY_SETTINGS = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.certificates",
    "ssl.client.auth", "ssl.enabled.protocols", "ssl.protocol", "ssl.cipher.suites",
    "ssl.principal.mapping.rules", "ssl.endpoint.identification.algorithm",
    "ssl.handshake.timeout.ms", "ssl.reload.check.interval.ms",  # raftkafka's own (Kafka has none)
    "sasl.enabled.mechanisms", "sasl.mechanism.inter.broker.protocol", "sasl.mechanism.controller.protocol",
    "sasl.jaas.config", "connections.max.reauth.ms",
    "sasl.handshake.timeout.ms",  # raftkafka's own: how long a SASL login may take
    "sasl.server.max.receive.size", "connection.failed.authentication.delay.ms",
})


def is_security_setting(name: str) -> bool:
    if name in SECURITY_SETTINGS:
        return True
    if name.startswith("listener.name."):
        rest = name[len("listener.name."):].partition(".")[2]
        # `listener.name.sasl_ssl.plain.sasl.jaas.config`: a mechanism-scoped JAAS config.
        return rest in SECURITY_SETTINGS or rest.endswith(".sasl.jaas.config")
    return False


def parse_protocol_map(text: str) -> dict[str, str]:
    """`listener.security.protocol.map`: `NAME:PROTOCOL,...`."""
    out = {}
    for item in [s.strip() for s in text.split(",") if s.strip()]:
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name or protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(f"listener.security.protocol.map: {item!r} is not NAME:PROTOCOL "
                              f"(PROTOCOL one of {', '.join(SECURITY_PROTOCOLS)})")
        out[name] = protocol
    return out


def parse_voters(text: str, setting: str = "controller.quorum.voters") -> list[VoterSpec]:
    """`id@host:port[:directory_id],...` (Kafka's controller.quorum.voters / --initial-controllers)."""
    voters = []
    for item in [s.strip() for s in text.split(",") if s.strip()]:
        node, at, rest = item.partition("@")
        parts = rest.rsplit(":", 2) if rest.count(":") >= 2 else rest.rsplit(":", 1)
        try:
            if not at or len(parts) < 2:
                raise ValueError
            host, port = parts[0], int(parts[1])
            directory_id = parts[2] if len(parts) == 3 else None
            voters.append(VoterSpec(int(node), host.strip("[]"), port, directory_id))
            if not 0 < port < 65536 or int(node) < 0:
                raise ValueError
        except ValueError:
            raise ConfigError(f"{setting}: {item!r} is not id@host:port") from None
    ids = [v.node_id for v in voters]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"{setting}: a node id appears twice")
    return voters


def parse_listeners(text: str, setting: str = "listeners",
                    protocol_map: dict[str, str] | None = None) -> list[Listener]:
    """`NAME://host:port,...`; an empty host means all interfaces. Each name must be in
    `protocol_map` (Kafka's default map when None)."""
    protocols = parse_protocol_map(DEFAULT_PROTOCOL_MAP) if protocol_map is None else protocol_map
    out = []
    for item in [s.strip() for s in text.split(",") if s.strip()]:
        name, sep, addr = item.partition("://")
        host, colon, port = addr.rpartition(":")
        try:
            if not sep or not colon or not name:
                raise ValueError
            out.append(Listener(name.upper(), host.strip("[]") or "0.0.0.0", int(port),
                                protocols.get(name.upper(), "")))
            if not 0 <= int(port) < 65536:
                raise ValueError
        except ValueError:
            raise ConfigError(f"{setting}: {item!r} is not NAME://host:port") from None
        if not out[-1].security_protocol:
            raise ConfigError(f"{setting}: listener {name.upper()} has no security protocol in "
                              f"listener.security.protocol.map")
    if len({l.name for l in out}) != len(out):
        raise ConfigError(f"{setting}: a listener name appears twice")
    return out


def _int(lo: int | None = None):
    def conv(value: Any) -> int:
        if isinstance(value, bool):
            raise ValueError("expected an integer")
        v = int(value)
        if lo is not None and v < lo:
            raise ValueError(f"must be >= {lo}")
        return v

    return conv


def _roles(value: Any) -> tuple[str, ...]:
    items = value if isinstance(value, (list, tuple)) else str(value).split(",")
    roles = tuple(sorted({str(r).strip() for r in items if str(r).strip()}))
    if not roles or any(r not in ("broker", "controller") for r in roles):
        raise ValueError("must be 'broker', 'controller' or both")
    return roles


def _str_list(value: Any) -> tuple[str, ...]:
    items = value if isinstance(value, (list, tuple)) else str(value).split(",")
    out = tuple(str(s).strip() for s in items if str(s).strip())
    if not out:
        raise ValueError("must not be empty")
    return out


def _state_machine(value: Any) -> str:
    if str(value) not in ("metadata", "recording"):
        raise ValueError("must be 'metadata' or 'recording' (a diagnostic for Raft-only tests)")
    return str(value)


def _bool(value: Any) -> bool:
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise ValueError("must be true or false")
    return text == "true"


def _authorizer(value: Any) -> str:
    name = str(value).strip()
    if name not in ("", STANDARD_AUTHORIZER):
        raise ValueError(f"the one authorizer is {STANDARD_AUTHORIZER} (or empty for none)")
    return name


@dataclass(frozen=True)
class Setting:
    name: str
    attr: str
    convert: Callable[[Any], Any]
    default: Any = None  # None = required


SETTINGS = [
    Setting("node.id", "node_id", _int(0)),
    Setting("process.roles", "roles", _roles),
    Setting("log.dirs", "log_dirs", _str_list),
    Setting("listeners", "listeners", str, "CONTROLLER://127.0.0.1:9093"),
    Setting("controller.listener.names", "controller_listener_names", _str_list, ("CONTROLLER",)),
    Setting("controller.quorum.voters", "voters_text", str, ""),
    Setting("controller.quorum.election.timeout.ms", "election_timeout_ms", _int(1), 1000),
    Setting("controller.quorum.fetch.timeout.ms", "fetch_timeout_ms", _int(1), 2000),
    Setting("controller.quorum.election.backoff.max.ms", "election_backoff_max_ms", _int(0), 1000),
    Setting("controller.quorum.append.linger.ms", "append_linger_ms", _int(0), 25),
    Setting("controller.quorum.request.timeout.ms", "request_timeout_ms", _int(1), 2000),
    # KIP-1219 (Kafka 4.3): what one Raft Fetch / FetchSnapshot answer may carry.
    Setting("controller.quorum.fetch.max.bytes", "raft_fetch_max_bytes", _int(1), 1024 * 1024),
    Setting("controller.quorum.fetch.snapshot.max.bytes", "raft_fetch_snapshot_max_bytes", _int(1), 1024 * 1024),
    Setting("metadata.log.segment.bytes", "metadata_segment_bytes", _int(1024), 16 * 1024 * 1024),
    Setting("metadata.log.max.record.bytes.between.snapshots", "snapshot_interval_bytes", _int(1), 20 * 1024 * 1024),
    Setting("metadata.log.max.snapshot.interval.ms", "snapshot_interval_ms", _int(1), 3_600_000),
    Setting("metadata.log.max.records.between.snapshots", "snapshot_interval_records", _int(1), 20_000),
    Setting("broker.heartbeat.interval.ms", "broker_heartbeat_interval_ms", _int(1), 2000),
    Setting("broker.session.timeout.ms", "broker_session_timeout_ms", _int(1), 9000),
    # A broker whose controller connection closed is fenced after this, unless it heartbeats.
    Setting("broker.connection.close.grace.ms", "broker_connection_close_grace_ms", _int(0), 500),
    Setting("broker.rack", "broker_rack", str, ""),
    Setting("controller.state.machine", "state_machine", _state_machine, "metadata"),
    Setting("log.level", "log_level", str, "INFO"),
    Setting("advertised.listeners", "advertised_listeners_text", str, ""),
    Setting("metrics.port", "metrics_port", _int(-1), -1),
    Setting("metrics.host", "metrics_host", str, "0.0.0.0"),
    Setting("listener.security.protocol.map", "protocol_map_text", str, DEFAULT_PROTOCOL_MAP),
    Setting("inter.broker.listener.name", "inter_broker_listener_name", lambda v: str(v).strip().upper(), ""),
    Setting("super.users", "super_users_text", str, ""),
    Setting("authorizer.class.name", "authorizer_class_name", _authorizer, ""),
    Setting("allow.everyone.if.no.acl.found", "allow_everyone_if_no_acl_found", _bool, False),
]
_BY_NAME = {s.name: s for s in SETTINGS}

# Broker settings read from the node file (BrokerConfig.static) that the metadata
# layer's BROKER_CONFIGS does not define: replication, groups, the listener.
EXTRA_BROKER_SETTINGS = frozenset({
    "replica.fetch.wait.max.ms", "replica.fetch.min.bytes", "replica.fetch.max.bytes",
    "replica.fetch.response.max.bytes", "replica.fetch.backoff.ms",
    "max.incremental.fetch.session.cache.slots",
    "group.min.session.timeout.ms", "group.max.session.timeout.ms", "group.max.size",
    "offsets.retention.check.interval.ms", "offset.metadata.max.bytes",
    "offsets.topic.segment.bytes", "offsets.commit.timeout.ms",
    "log.retention.check.interval.ms", "socket.request.max.bytes", "log.cleaner.backoff.ms",
    # Listener resource bounds (wire.connection_limits, node.connection_limit_settings).
    *limit_settings.INTEGER_SETTINGS,
})


def is_broker_setting(name: str) -> bool:
    return (name in BROKER_CONFIGS or name in EXTRA_BROKER_SETTINGS or name in limit_settings.TEXT_SETTINGS
            or limit_settings.is_listener_rate_setting(name))


def _plain_text(raw: Any) -> str:
    if isinstance(raw, bool):
        return "true" if raw else "false"
    if isinstance(raw, (list, tuple)):
        return ",".join(str(v) for v in raw)
    return str(raw).strip()


def _broker_value(name: str, raw: Any) -> str:
    """A static broker setting as the string Kafka's config layers hold."""
    text = _plain_text(raw)
    d = BROKER_CONFIGS.get(name)
    try:
        if d is not None:
            parse_broker_value(d, text)
        elif name in EXTRA_BROKER_SETTINGS or limit_settings.is_listener_rate_setting(name):
            int(text)  # every extra one is a number
    except ApiError as e:
        raise ConfigError(f"{name}: invalid value {raw!r} ({e.message or 'invalid'})") from None
    except ValueError:
        raise ConfigError(f"{name}: invalid value {raw!r} (expected an integer)") from None
    return text


@dataclass(frozen=True)
class NodeConfig:
    node_id: int
    roles: tuple[str, ...]
    log_dirs: tuple[str, ...]
    listeners: list[Listener] = field(default_factory=list)
    controller_listener_names: tuple[str, ...] = ("CONTROLLER",)
    voters: list[VoterSpec] = field(default_factory=list)
    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    election_backoff_max_ms: int = 1000
    append_linger_ms: int = 25
    request_timeout_ms: int = 2000
    raft_fetch_max_bytes: int = 1024 * 1024
    raft_fetch_snapshot_max_bytes: int = 1024 * 1024
    metadata_segment_bytes: int = 16 * 1024 * 1024
    snapshot_interval_bytes: int = 20 * 1024 * 1024
    snapshot_interval_ms: int = 3_600_000
    snapshot_interval_records: int = 20_000
    broker_heartbeat_interval_ms: int = 2000
    broker_session_timeout_ms: int = 9000
    broker_connection_close_grace_ms: int = 500
    broker_rack: str = ""
    state_machine: str = "metadata"
    log_level: str = "INFO"
    advertised_listeners: list[Listener] = field(default_factory=list)
    metrics_port: int = -1  # -1 = no metrics endpoint
    metrics_host: str = "0.0.0.0"
    broker_static: dict[str, str] = field(default_factory=dict)  # Kafka-named, as strings
    inter_broker_listener_name: str = ""  # "" = the first client listener
    super_users: frozenset = frozenset()  # of KafkaPrincipal: the cluster's members and admins
    security: dict[str, str] = field(default_factory=dict)  # ssl.*, sasl.*, listener.name.* as strings
    protocol_map: dict[str, str] = field(default_factory=lambda: parse_protocol_map(DEFAULT_PROTOCOL_MAP))
    authorizer_class_name: str = ""  # "" = no authorizer: every request is allowed
    allow_everyone_if_no_acl_found: bool = False

    @property
    def metadata_log_dir(self) -> str:
        return self.log_dirs[0]

    @property
    def client_listeners(self) -> list[Listener]:
        """Every listener the Kafka protocol is served on: all but the controller ones."""
        return [l for l in self.listeners if l.name not in self.controller_listener_names]

    @property
    def broker_listener(self) -> Listener | None:
        """The first client listener (the one the node's startup line names first)."""
        listeners = self.client_listeners
        return listeners[0] if listeners else None

    @property
    def inter_broker_listener(self) -> Listener | None:
        """The listener follower replicas fetch over (inter.broker.listener.name)."""
        for listener in self.client_listeners:
            if listener.name == (self.inter_broker_listener_name or listener.name):
                return listener
        return None

    def listener_setting(self, listener: str, name: str, default: str | None = None) -> str | None:
        """A security setting for one listener: `listener.name.<listener>.<name>` first, as Kafka."""
        scoped = self.security.get(f"listener.name.{listener.lower()}.{name}")
        return scoped if scoped is not None else self.security.get(name, default)

    def advertised(self, listener: Listener, bound_port: int | None = None) -> Listener:
        """What brokers register for `listener`: advertised.listeners if it names it, else
        the bound address (port 0 becomes the real port; a wildcard host, this host's name)."""
        for adv in self.advertised_listeners:
            if adv.name == listener.name:
                return adv
        host = listener.host
        if host in ("0.0.0.0", "::", ""):
            import socket  # only for the wildcard case; never in node packages

            host = socket.getfqdn()
        port = bound_port if bound_port else listener.port
        return Listener(listener.name, host, port)

    @property
    def controller_listener(self) -> Listener | None:
        for listener in self.listeners:
            if listener.name in self.controller_listener_names:
                return listener
        return None

    def connection_limits(self) -> ConnectionLimits:
        """Every listener's bounds, from the static configs (Kafka's names; unset = Kafka's default)."""
        return limit_settings.connection_limits_of(self.broker_static)  # validated by load_config

    @property
    def controller_connect_listener(self) -> Listener:
        """The listener this node reaches controllers on: its own controller listener, or
        on a broker-only node the first controller.listener.names entry (protocol from the map)."""
        own = self.controller_listener
        if own is not None:
            return own
        name = self.controller_listener_names[0]
        return Listener(name, "", 0, self.protocol_map.get(name, "PLAINTEXT"))

    def raft_config(self) -> RaftConfig:
        return RaftConfig(
            election_timeout=self.election_timeout_ms / 1000,
            fetch_timeout=self.fetch_timeout_ms / 1000,
            election_backoff_max=self.election_backoff_max_ms / 1000,
            append_linger=self.append_linger_ms / 1000,
            request_timeout=self.request_timeout_ms / 1000,
            fetch_max_bytes=self.raft_fetch_max_bytes,
            snapshot_chunk_bytes=self.raft_fetch_snapshot_max_bytes,
        )


def _flatten(doc: dict, prefix: str = "") -> dict[str, Any]:
    out = {}
    for key, value in doc.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, name + "."))
        else:
            out[name] = value
    return out


# Kafka broker settings a stock server.properties carries that tune what this node does not
# have (thread pools, socket buffers, flush-by-count); accepted so the file loads, and ignored.
KAFKA_SETTINGS_WITHOUT_EFFECT = frozenset({
    "num.network.threads", "num.io.threads", "socket.send.buffer.bytes", "socket.receive.buffer.bytes",
    "num.recovery.threads.per.data.dir", "num.replica.fetchers", "queued.max.requests", "background.threads",
    "log.flush.interval.messages", "log.flush.interval.ms", "inter.broker.listener.name",
    "listener.security.protocol.map", "share.coordinator.state.topic.replication.factor",
    "share.coordinator.state.topic.min.isr",
})


def read_config_file(path: str) -> dict[str, Any]:
    """A node's settings from TOML (node.toml) or, for a name ending in .properties, from Kafka's
    server.properties syntax (java.util.Properties)."""
    if not path.endswith(".properties"):
        return read_toml(path)
    from storage.java_properties import PropertiesError, parse_properties

    try:
        with open(path, encoding="utf-8") as f:
            values = parse_properties(f.read())
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except (OSError, UnicodeDecodeError, PropertiesError) as e:
        raise ConfigError(f"config file {path}: {e}") from None
    ignored = sorted(name for name in values if name in KAFKA_SETTINGS_WITHOUT_EFFECT)
    if ignored:
        logging.getLogger(__name__).warning("%s: %s have no effect on this node; ignored", path, ", ".join(ignored))
    return {name: value for name, value in values.items() if name not in KAFKA_SETTINGS_WITHOUT_EFFECT}


def read_toml(path: str) -> dict[str, Any]:
    """The settings in a TOML file (this runs in the CLI, outside node code)."""
    try:
        with open(path, "rb") as f:
            return _flatten(tomllib.load(f))
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"config file {path}: {e}") from None


def convert_setting(name: str, raw: Any) -> Any:
    """One setting's value, validated (ConfigError naming it otherwise)."""
    s = _BY_NAME.get(name)
    if s is None:
        raise ConfigError(f"unknown setting {name!r}")
    if raw is None:
        raise ConfigError(f"{name} is required")
    try:
        return s.convert(raw)
    except (ValueError, TypeError) as e:
        raise ConfigError(f"{name}: invalid value {raw!r} ({e})") from None


def load_config(values: dict[str, Any]) -> NodeConfig:
    """Validate raw settings (file values overridden by flags) into a NodeConfig."""
    kwargs: dict[str, Any] = {}
    static: dict[str, str] = {}
    security: dict[str, str] = {}
    for name in sorted(values):
        if name in _BY_NAME:
            continue  # a node setting (some, like node.id, are also broker configs: added below)
        if is_security_setting(name):
            security[name] = _plain_text(values[name])
            continue
        if not is_broker_setting(name):
            raise ConfigError(f"unknown setting {name!r}")
        static[name] = _broker_value(name, values[name])
    for s in SETTINGS:
        raw = values.get(s.name)
        kwargs[s.attr] = convert_setting(s.name, s.default if raw is None else raw)
    protocol_map = parse_protocol_map(kwargs.pop("protocol_map_text"))
    kwargs["protocol_map"] = protocol_map
    kwargs["listeners"] = parse_listeners(kwargs["listeners"], protocol_map=protocol_map)
    kwargs["voters"] = parse_voters(kwargs.pop("voters_text"))
    kwargs["advertised_listeners"] = parse_listeners(kwargs.pop("advertised_listeners_text"),
                                                     "advertised.listeners", protocol_map)
    try:
        kwargs["super_users"] = parse_principals(kwargs.pop("super_users_text"))
    except ValueError as e:
        raise ConfigError(f"super.users: {e}") from None
    kwargs["security"] = security
    for s in SETTINGS:
        if s.name in BROKER_CONFIGS and s.name in values:
            static[s.name] = _broker_value(s.name, values[s.name])
    kwargs["broker_static"] = static
    config = NodeConfig(**kwargs)
    if "controller" in config.roles and config.controller_listener is None:
        raise ConfigError(
            f"listeners: a controller needs a listener named one of {','.join(config.controller_listener_names)}"
        )
    if "broker" in config.roles and config.broker_listener is None:
        raise ConfigError("listeners: a broker needs a client listener, e.g. PLAINTEXT://127.0.0.1:9092")
    for listener in config.client_listeners:
        if listener.port == 0 and any(a.name == listener.name for a in config.advertised_listeners):
            raise ConfigError("advertised.listeners: cannot advertise a listener bound to port 0")
    if config.inter_broker_listener_name and "broker" in config.roles and config.inter_broker_listener is None:
        raise ConfigError(f"inter.broker.listener.name: {config.inter_broker_listener_name} is not a client "
                          f"listener in listeners")
    for listener in config.listeners:
        if uses_tls(listener.security_protocol) and not (
                config.listener_setting(listener.name, "ssl.keystore.location")
                or config.listener_setting(listener.name, "ssl.keystore.certificate.chain")):
            raise ConfigError(f"listeners: {listener.name} is {listener.security_protocol} but has no certificate "
                              f"(set ssl.keystore.location, or listener.name.{listener.name.lower()}."
                              f"ssl.keystore.location)")
    try:
        config.raft_config()
    except ValueError as e:
        raise ConfigError(str(e)) from None
    _check_request_bounds(static)
    for listener in config.listeners:
        listener_sasl(config, listener)  # a bad SASL setting is a startup error
    if "broker" in config.roles:
        listener_login(config, config.inter_broker_listener, "sasl.mechanism.inter.broker.protocol")
    controller_login(config)
    return config


def _check_request_bounds(static: dict[str, str]) -> None:
    """As Kafka: the request pool holds at least one largest request; counts are positive."""
    frame = int(static.get("socket.request.max.bytes", 100 * 1024 * 1024))
    pool = int(static.get("queued.max.request.bytes", -1))
    if frame < 1:
        raise ConfigError(f"socket.request.max.bytes: invalid value {frame} (must be >= 1)")
    if pool != -1 and pool < frame:
        raise ConfigError(f"queued.max.request.bytes: {pool} must be -1 (no bound) or at least "
                          f"socket.request.max.bytes ({frame})")
    try:
        limit_settings.connection_limits_of(static)
    except ValueError as e:
        raise ConfigError(str(e)) from None


def listener_sasl(config: NodeConfig, listener: Listener) -> SaslServerSettings | None:
    """A SASL listener's mechanisms, PLAIN users and session settings (None on the others)."""
    if listener.security_protocol not in ("SASL_PLAINTEXT", "SASL_SSL"):
        return None
    try:
        return server_settings(listener.name, lambda name: config.listener_setting(listener.name, name))
    except ValueError as e:
        raise ConfigError(str(e)) from None


def listener_login(config: NodeConfig, listener: Listener | None, mechanism_setting: str) -> SaslCredentials | None:
    """The SASL login this node uses towards other nodes' `listener` (None unless it is SASL):
    `mechanism_setting` is sasl.mechanism.inter.broker.protocol or sasl.mechanism.controller.protocol."""
    if listener is None or listener.security_protocol not in ("SASL_PLAINTEXT", "SASL_SSL"):
        return None
    try:
        return node_credentials(listener.name, mechanism_setting,
                                lambda name: config.listener_setting(listener.name, name))
    except ValueError as e:
        raise ConfigError(str(e)) from None


def controller_login(config: NodeConfig) -> SaslCredentials | None:
    """This node's login to the controllers' listener (Raft, controller RPCs) when it is SASL:
    the JAAS username/password configured for that listener (on a broker-only node, the
    controller.listener.names entry it connects to)."""
    return listener_login(config, config.controller_connect_listener, "sasl.mechanism.controller.protocol")


# --------------------------------------------------------------------------- #
# Command-line flags shared by `node` and `format`
# --------------------------------------------------------------------------- #

_ALIASES = {
    "node_id": "node.id",
    "roles": "process.roles",
    "log_dirs": "log.dirs",
    "listeners": "listeners",
    "controller_quorum_voters": "controller.quorum.voters",
    "metrics_port": "metrics.port",
}


def add_config_arguments(parser) -> None:
    parser.add_argument("--config", metavar="FILE", help="TOML file with the node's settings")
    parser.add_argument("--set", metavar="NAME=VALUE", action="append", default=[],
                        help="any setting by its Kafka name (repeatable; wins over the file)")
    parser.add_argument("--node-id", help="node.id")
    parser.add_argument("--roles", help="process.roles: controller, broker or broker,controller")
    parser.add_argument("--log-dirs", "--log-dir", dest="log_dirs", help="log.dirs (the first holds the metadata log)")
    parser.add_argument("--listeners", help="listeners, e.g. CONTROLLER://127.0.0.1:9093")
    parser.add_argument("--controller-quorum-voters", help="controller.quorum.voters: id@host:port,...")
    parser.add_argument("--metrics-port", help="metrics.port: serve Prometheus metrics over HTTP (-1 = off)")


def settings_from_args(args) -> dict[str, Any]:
    """File settings, then --set, then the aliases: later wins."""
    values = read_config_file(args.config) if getattr(args, "config", None) else {}
    for item in getattr(args, "set", []) or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"--set {item!r}: expected NAME=VALUE")
        values[name.strip()] = value.strip()
    for attr, name in _ALIASES.items():
        value = getattr(args, attr, None)
        if value is not None:
            values[name] = value
    return values
