"""Metadata records: the versioned structs the controller writes to the Raft log.

They mirror Kafka's metadata records (same type ids, same field meanings) but are our own
definitions, encoded with msgpack as one array: ``[type_id, version, field, field, ...]``.

Each record is a frozen dataclass whose field annotations name their codec (see ``_CODECS``),
so the field list is written once. A field added in a later version carries
``field(default=..., metadata={"since": N})``; decoding an older version fills the default.
A version newer than this build knows raises ``UnsupportedVersionError`` (never a silent
misread); any other malformed input raises ``DecodeError``.
"""
from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, NamedTuple

import msgpack

from wire.errors import DecodeError, UnsupportedVersionError

__all__ = [
    "Endpoint", "EntityPart", "NO_LEADER", "NO_LEADER_CHANGE",
    "RegisterBroker", "UnregisterBroker", "Topic", "Partition", "Config", "PartitionChange",
    "RemoveTopic", "UserScramCredential", "FeatureLevel", "ClientQuota", "ProducerIds",
    "BrokerRegistrationChange", "AccessControlEntry", "RemoveAccessControlEntry", "NoOp",
    "RemoveUserScramCredential", "Record", "RECORD_TYPES", "encode_record", "decode_record",
]

NO_LEADER = -1
NO_LEADER_CHANGE = -2  # PartitionChange.leader: keep the current leader (and its epoch)


class Endpoint(NamedTuple):
    name: str  # listener name, e.g. "PLAINTEXT"
    host: str
    port: int
    security_protocol: int = 0  # Kafka's SecurityProtocol id (0 = PLAINTEXT)


class EntityPart(NamedTuple):
    entity_type: str  # "user", "client-id", "ip"
    entity_name: str | None  # None = the default entity


# --- records (type ids are Kafka's) ------------------------------------------------


@dataclass(frozen=True, slots=True)
class RegisterBroker:
    TYPE: ClassVar[int] = 0
    VERSION: ClassVar[int] = 0
    broker_id: int
    incarnation_id: uuid.UUID
    broker_epoch: int
    endpoints: tuple[Endpoint, ...] = ()
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False
    log_dirs: tuple[uuid.UUID, ...] = ()


@dataclass(frozen=True, slots=True)
class UnregisterBroker:
    TYPE: ClassVar[int] = 1
    VERSION: ClassVar[int] = 0
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class Topic:
    TYPE: ClassVar[int] = 2
    VERSION: ClassVar[int] = 0
    name: str
    topic_id: uuid.UUID


@dataclass(frozen=True, slots=True)
class Partition:
    TYPE: ClassVar[int] = 3
    VERSION: ClassVar[int] = 0
    partition_id: int
    topic_id: uuid.UUID
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    leader: int = NO_LEADER
    leader_recovery_state: int = 0  # 0 RECOVERED, 1 RECOVERING (after an unclean election)
    leader_epoch: int = 0
    partition_epoch: int = 0
    eligible_leader_replicas: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Config:
    TYPE: ClassVar[int] = 4
    VERSION: ClassVar[int] = 0
    resource_type: int  # Kafka's ConfigResource.Type: 2 TOPIC, 4 BROKER
    resource_name: str
    name: str
    value: str | None  # None deletes the override


@dataclass(frozen=True, slots=True)
class PartitionChange:
    """Only the fields that change; None = unchanged. Any change bumps partition_epoch;
    a leader field other than NO_LEADER_CHANGE bumps leader_epoch."""

    TYPE: ClassVar[int] = 5
    VERSION: ClassVar[int] = 0
    partition_id: int
    topic_id: uuid.UUID
    isr: tuple[int, ...] | None = None
    leader: int = NO_LEADER_CHANGE
    replicas: tuple[int, ...] | None = None
    removing_replicas: tuple[int, ...] | None = None
    adding_replicas: tuple[int, ...] | None = None
    leader_recovery_state: int | None = None
    eligible_leader_replicas: tuple[int, ...] | None = None
    last_known_elr: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class RemoveTopic:
    TYPE: ClassVar[int] = 9
    VERSION: ClassVar[int] = 0
    topic_id: uuid.UUID


@dataclass(frozen=True, slots=True)
class UserScramCredential:
    TYPE: ClassVar[int] = 11
    VERSION: ClassVar[int] = 0
    name: str
    mechanism: int  # 1 SCRAM-SHA-256, 2 SCRAM-SHA-512
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


@dataclass(frozen=True, slots=True)
class FeatureLevel:
    TYPE: ClassVar[int] = 12
    VERSION: ClassVar[int] = 0
    name: str
    feature_level: int  # 0 removes the feature


@dataclass(frozen=True, slots=True)
class ClientQuota:
    TYPE: ClassVar[int] = 14
    VERSION: ClassVar[int] = 0
    entity: tuple[EntityPart, ...]
    key: str
    value: float
    remove: bool = False


@dataclass(frozen=True, slots=True)
class ProducerIds:
    TYPE: ClassVar[int] = 15
    VERSION: ClassVar[int] = 0
    broker_id: int
    broker_epoch: int
    next_producer_id: int  # first id NOT yet handed out


@dataclass(frozen=True, slots=True)
class BrokerRegistrationChange:
    TYPE: ClassVar[int] = 17
    VERSION: ClassVar[int] = 0
    broker_id: int
    broker_epoch: int
    fenced: bool | None = None  # None = unchanged
    in_controlled_shutdown: bool | None = None
    log_dirs: tuple[uuid.UUID, ...] | None = None


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    TYPE: ClassVar[int] = 18
    VERSION: ClassVar[int] = 0
    id: uuid.UUID
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass(frozen=True, slots=True)
class RemoveAccessControlEntry:
    TYPE: ClassVar[int] = 19
    VERSION: ClassVar[int] = 0
    id: uuid.UUID


@dataclass(frozen=True, slots=True)
class NoOp:
    TYPE: ClassVar[int] = 20
    VERSION: ClassVar[int] = 0


@dataclass(frozen=True, slots=True)
class RemoveUserScramCredential:
    TYPE: ClassVar[int] = 22
    VERSION: ClassVar[int] = 0
    name: str
    mechanism: int


Record = (
    RegisterBroker | UnregisterBroker | Topic | Partition | Config | PartitionChange | RemoveTopic
    | UserScramCredential | FeatureLevel | ClientQuota | ProducerIds | BrokerRegistrationChange
    | AccessControlEntry | RemoveAccessControlEntry | NoOp | RemoveUserScramCredential
)

RECORD_TYPES: dict[int, type] = {
    cls.TYPE: cls for cls in (
        RegisterBroker, UnregisterBroker, Topic, Partition, Config, PartitionChange, RemoveTopic,
        UserScramCredential, FeatureLevel, ClientQuota, ProducerIds, BrokerRegistrationChange,
        AccessControlEntry, RemoveAccessControlEntry, NoOp, RemoveUserScramCredential,
    )
}

# --- field codecs, chosen by annotation ----------------------------------------------

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def _bad(what: str, value: Any) -> DecodeError:
    return DecodeError(f"metadata record: expected {what}, got {type(value).__name__}")


def _int(v: Any) -> int:
    if type(v) is not int or not _INT64_MIN <= v <= _INT64_MAX:
        raise _bad("int64", v)
    return v


def _bool(v: Any) -> bool:
    if type(v) is not bool:
        raise _bad("bool", v)
    return v


def _str(v: Any) -> str:
    if type(v) is not str:
        raise _bad("str", v)
    return v


def _bytes(v: Any) -> bytes:
    if type(v) is not bytes:
        raise _bad("bytes", v)
    return v


def _float(v: Any) -> float:
    if type(v) is float:
        return v
    if type(v) is int:
        return float(v)
    raise _bad("float", v)


def _uuid(v: Any) -> uuid.UUID:
    if type(v) is not bytes or len(v) != 16:
        raise _bad("16-byte uuid", v)
    return uuid.UUID(bytes=v)


def _ints(v: Any) -> tuple[int, ...]:
    if type(v) is not list:
        raise _bad("list", v)
    for x in v:
        if type(x) is not int or not _INT64_MIN <= x <= _INT64_MAX:
            raise _bad("int64", x)
    return tuple(v)


def _uuids(v: Any) -> tuple[uuid.UUID, ...]:
    if type(v) is not list:
        raise _bad("list", v)
    return tuple(_uuid(x) for x in v)


def _endpoints(v: Any) -> tuple[Endpoint, ...]:
    if type(v) is not list:
        raise _bad("list", v)
    out = []
    for e in v:
        if type(e) is not list or len(e) != 4:
            raise _bad("endpoint [name, host, port, protocol]", e)
        out.append(Endpoint(_str(e[0]), _str(e[1]), _int(e[2]), _int(e[3])))
    return tuple(out)


def _entity(v: Any) -> tuple[EntityPart, ...]:
    if type(v) is not list:
        raise _bad("list", v)
    out = []
    for e in v:
        if type(e) is not list or len(e) != 2:
            raise _bad("entity [type, name]", e)
        out.append(EntityPart(_str(e[0]), None if e[1] is None else _str(e[1])))
    return tuple(out)


def _optional(decode: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda v: None if v is None else decode(v)


def _same(v: Any) -> Any:
    return v


def _uuid_out(v: uuid.UUID) -> bytes:
    return v.bytes


def _seq_out(v: tuple) -> list:
    return [list(e) if isinstance(e, tuple) else e for e in v]


# annotation text -> (encode, decode)
_CODECS: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {
    "int": (_same, _int),
    "int | None": (_same, _optional(_int)),
    "bool": (_same, _bool),
    "bool | None": (_same, _optional(_bool)),
    "str": (_same, _str),
    "str | None": (_same, _optional(_str)),
    "bytes": (_same, _bytes),
    "float": (_same, _float),
    "uuid.UUID": (_uuid_out, _uuid),
    "tuple[int, ...]": (list, _ints),
    "tuple[int, ...] | None": (lambda v: None if v is None else list(v), _optional(_ints)),
    "tuple[uuid.UUID, ...]": (lambda v: [u.bytes for u in v], _uuids),
    "tuple[uuid.UUID, ...] | None": (
        lambda v: None if v is None else [u.bytes for u in v], _optional(_uuids)),
    "tuple[Endpoint, ...]": (_seq_out, _endpoints),
    "tuple[EntityPart, ...]": (_seq_out, _entity),
}


class _Layout(NamedTuple):
    names: tuple[str, ...]
    encoders: tuple[Callable[[Any], Any], ...]
    decoders: tuple[Callable[[Any], Any], ...]
    since: tuple[int, ...]
    defaults: tuple[Any, ...]


def _layout(cls: type) -> _Layout:
    names, enc, dec, since, defaults = [], [], [], [], []
    for f in dataclasses.fields(cls):
        e, d = _CODECS[f.type]  # a KeyError here is a definition bug, caught at import
        names.append(f.name)
        enc.append(e)
        dec.append(d)
        since.append(f.metadata.get("since", 0))
        defaults.append(f.default)
    return _Layout(tuple(names), tuple(enc), tuple(dec), tuple(since), tuple(defaults))


_LAYOUTS: dict[type, _Layout] = {cls: _layout(cls) for cls in RECORD_TYPES.values()}


def encode_record(rec: Record) -> bytes:
    """Encode a record at its class's current version."""
    layout = _LAYOUTS[type(rec)]
    body: list[Any] = [rec.TYPE, rec.VERSION]
    for name, enc in zip(layout.names, layout.encoders):
        body.append(enc(getattr(rec, name)))
    return msgpack.packb(body, use_bin_type=True)


def decode_record(data: bytes | bytearray | memoryview) -> Record:
    """Decode one record; DecodeError on malformed input, UnsupportedVersionError if too new."""
    try:
        body = msgpack.unpackb(data, raw=False, use_list=True, strict_map_key=True)
    except Exception as exc:  # msgpack raises several unrelated types for bad bytes
        raise DecodeError(f"metadata record: not valid msgpack ({exc})") from None
    if type(body) is not list or len(body) < 2:
        raise DecodeError("metadata record: expected [type, version, fields...]")
    type_id, version = _int(body[0]), _int(body[1])
    cls = RECORD_TYPES.get(type_id)
    if cls is None:
        raise DecodeError(f"metadata record: unknown type id {type_id}")
    if version < 0:
        raise DecodeError(f"metadata record: negative version {version}")
    if version > cls.VERSION:
        raise UnsupportedVersionError(
            f"{cls.__name__} version {version} is newer than supported {cls.VERSION}",
            version=version)
    layout = _LAYOUTS[cls]
    values = body[2:]
    if version == cls.VERSION:  # the common case: every field present, in order
        if len(values) != len(layout.decoders):
            raise DecodeError(f"{cls.__name__} v{version}: expected {len(layout.decoders)} "
                              f"fields, got {len(values)}")
        return cls(*[dec(v) for dec, v in zip(layout.decoders, values)])
    present = [i for i, s in enumerate(layout.since) if s <= version]
    if len(values) != len(present):
        raise DecodeError(
            f"{cls.__name__} v{version}: expected {len(present)} fields, got {len(values)}")
    kwargs = {name: default for name, default, s in
              zip(layout.names, layout.defaults, layout.since) if s > version}
    for i, raw in zip(present, values):
        kwargs[layout.names[i]] = layout.decoders[i](raw)
    return cls(**kwargs)

def with_changes(rec: Record, **changes: Any) -> Record:
    """A copy of `rec` with some fields replaced (records are frozen)."""
    return dataclasses.replace(rec, **changes)
