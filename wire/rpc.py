"""Internal RPC frames for controller traffic (Raft, broker registration, ...).

On the wire a frame is a uint32 big-endian length followed by that many bytes
of msgpack. The payload is a compact array, not a map:

    [type: str, version: int, correlation_id: int, body: array]

`body` holds the message's dataclass fields in declaration order. Messages are
versioned structs, declared once:

    @rpc_message("Vote", version=1)
    @dataclass(slots=True, frozen=True)
    class Vote:
        epoch: int
        candidate_id: int
        last_epoch_end: tuple[int, int] | None = None

Evolution rule: a new version may only append fields, with defaults, so a
newer build reads older frames (missing trailing fields take their defaults).
A frame whose version is newer than this build's raises UnsupportedVersionError;
an unknown type, a missing or surplus field, or a value of the wrong type raises
DecodeError naming the message and field.

Supported field types: int, bool, float, str, bytes, uuid.UUID (16 bytes),
IntEnum subclasses, `T | None`, list[T], tuple[T, ...], fixed tuple[A, B, ...],
dict[K, V], and nested dataclasses (encoded as arrays of their fields).

This module is sans-IO except `RpcConnection`, a thin framing helper over a
trio stream (no reconnects, no timeouts: the transport above owns those).
"""
from __future__ import annotations

import dataclasses
import enum
import struct
import types
import typing
import uuid
from typing import Any, Callable, NamedTuple

import msgpack
import trio

from wire.errors import DecodeError, UnsupportedVersionError

__all__ = [
    "Registry",
    "DEFAULT_REGISTRY",
    "rpc_message",
    "Frame",
    "encode_frame",
    "decode_payload",
    "unpack_payload",
    "FrameDecoder",
    "RpcConnection",
    "DEFAULT_MAX_FRAME_SIZE",
    "FrameTooLargeError",
]

DEFAULT_MAX_FRAME_SIZE = 64 * 1024 * 1024  # Raft Fetch responses and snapshot chunks stay well below
_LENGTH = struct.Struct(">I")


class FrameTooLargeError(ValueError):
    """A request whose frame the peer would refuse unread (over DEFAULT_MAX_FRAME_SIZE)."""


Converter = Callable[[Any, str], Any]


class Frame(NamedTuple):
    type: str
    version: int
    correlation_id: int
    message: Any


# --------------------------------------------------------------------------- #
# Field converters: Python value <-> msgpack-native value, with validation
# --------------------------------------------------------------------------- #


def _fail(path: str, expected: str, value: Any) -> typing.NoReturn:
    raise DecodeError(f"{path}: expected {expected}, got {type(value).__name__}")


def _scalar(kind: type, name: str) -> Converter:
    def check(value, path):
        # bool is an int subclass; never accept one for the other.
        if type(value) is not kind and not (kind is float and type(value) is int):
            _fail(path, name, value)
        return value

    return check


# Encoding checks types too, so a bug shows at the sender, not as a remote DecodeError.
_ENCODE_ACCEPTS = {
    int: lambda v: isinstance(v, int) and not isinstance(v, bool),  # IntEnum values are ints
    bool: lambda v: isinstance(v, bool),
    str: lambda v: isinstance(v, str),
    bytes: lambda v: isinstance(v, (bytes, bytearray, memoryview)),
    float: lambda v: isinstance(v, (float, int)) and not isinstance(v, bool),
}


def _encode_scalar(kind: type) -> Converter:
    accepts = _ENCODE_ACCEPTS[kind]

    def check(value, path):
        if not accepts(value):
            raise TypeError(f"{path}: expected {kind.__name__}, got {type(value).__name__}")
        return int(value) if kind is int and type(value) is not int else value

    return check


class _Codec(NamedTuple):
    encode: Converter
    decode: Converter


def _build_codec(tp: Any) -> _Codec:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp in (int, bool, str, bytes):
        return _Codec(_encode_scalar(tp), _scalar(tp, tp.__name__))
    if tp is float:
        check_float = _scalar(float, "float")
        return _Codec(_encode_scalar(float), lambda v, p: float(check_float(v, p)))
    if tp is uuid.UUID:
        def decode_uuid(value, path):
            if type(value) is not bytes or len(value) != 16:
                raise DecodeError(f"{path}: expected a 16-byte uuid")
            return uuid.UUID(bytes=value)

        def encode_uuid(value, path):
            if not isinstance(value, uuid.UUID):
                raise TypeError(f"{path}: expected UUID, got {type(value).__name__}")
            return value.bytes

        return _Codec(encode_uuid, decode_uuid)
    if isinstance(tp, type) and issubclass(tp, enum.IntEnum):
        def decode_enum(value, path):
            if type(value) is not int:
                _fail(path, tp.__name__, value)
            try:
                return tp(value)
            except ValueError:
                raise DecodeError(f"{path}: {value} is not a valid {tp.__name__}") from None

        return _Codec(_encode_scalar(int), decode_enum)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        if len(members) != 1 or len(args) != 2:
            raise TypeError(f"unsupported union {tp!r}: only `T | None`")
        inner = _build_codec(members[0])
        return _Codec(
            lambda v, p: None if v is None else inner.encode(v, p),
            lambda v, p: None if v is None else inner.decode(v, p),
        )
    if origin is list or (origin is tuple and len(args) == 2 and args[1] is Ellipsis):
        item = _build_codec(args[0])
        container = list if origin is list else tuple

        def decode_seq(value, path):
            if type(value) is not list:
                _fail(path, "array", value)
            return container(item.decode(v, f"{path}[{i}]") for i, v in enumerate(value))

        return _Codec(lambda v, p: [item.encode(x, f"{p}[{i}]") for i, x in enumerate(v)], decode_seq)
    if origin is tuple:
        items = [_build_codec(a) for a in args]

        def decode_tuple(value, path):
            if type(value) is not list or len(value) != len(items):
                raise DecodeError(f"{path}: expected an array of {len(items)}")
            return tuple(c.decode(v, f"{path}[{i}]") for i, (c, v) in enumerate(zip(items, value)))

        return _Codec(lambda v, p: [c.encode(x, p) for c, x in zip(items, v)], decode_tuple)
    if origin is dict:
        key, val = _build_codec(args[0]), _build_codec(args[1])

        def decode_dict(value, path):
            if type(value) is not dict:
                _fail(path, "map", value)
            return {key.decode(k, f"{path}.key"): val.decode(v, f"{path}[{k!r}]") for k, v in value.items()}

        # Sorted keys: the same message always encodes to the same bytes.
        return _Codec(
            lambda v, p: {key.encode(k, p): val.encode(v[k], p) for k in sorted(v)}, decode_dict
        )
    if dataclasses.is_dataclass(tp):
        return _StructCodec(tp).codec()
    raise TypeError(f"unsupported rpc field type {tp!r}")


class _StructCodec:
    """A dataclass as an array of its fields; trailing fields with defaults may be absent."""

    def __init__(self, cls: type):
        self.cls = cls
        fields = dataclasses.fields(cls)
        hints = typing.get_type_hints(cls)
        self.names = [f.name for f in fields]
        self.codecs = [_build_codec(hints[f.name]) for f in fields]
        self.required = sum(
            1 for f in fields if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        )
        # Fields with defaults must trail the required ones (dataclasses enforce this too).

    def encode(self, value, path):
        if not isinstance(value, self.cls):
            raise TypeError(f"{path}: expected {self.cls.__name__}, got {type(value).__name__}")
        return [c.encode(getattr(value, n), f"{path}.{n}") for n, c in zip(self.names, self.codecs)]

    def decode(self, value, path):
        if type(value) is not list:
            _fail(path, f"{self.cls.__name__} array", value)
        if len(value) < self.required:
            raise DecodeError(f"{path}: missing field {self.names[len(value)]!r}")
        if len(value) > len(self.names):
            raise DecodeError(f"{path}: {len(value)} fields, {self.cls.__name__} has {len(self.names)}")
        kwargs = {n: c.decode(v, f"{path}.{n}") for n, c, v in zip(self.names, self.codecs, value)}
        return self.cls(**kwargs)

    def codec(self) -> _Codec:
        return _Codec(self.encode, self.decode)


# --------------------------------------------------------------------------- #
# Registry of message types
# --------------------------------------------------------------------------- #


class _MessageType:
    def __init__(self, name: str, version: int, cls: type):
        self.name = name
        self.version = version
        self.cls = cls
        self._struct: _StructCodec | None = None

    @property
    def struct(self) -> _StructCodec:
        # Compiled on first use so annotations may refer to classes defined later.
        if self._struct is None:
            self._struct = _StructCodec(self.cls)
        return self._struct


class Registry:
    """Message types by name (for decoding) and by class (for encoding)."""

    def __init__(self):
        self._by_name: dict[str, _MessageType] = {}
        self._by_class: dict[type, _MessageType] = {}

    def register(self, name: str, version: int, cls: type) -> None:
        if not dataclasses.is_dataclass(cls):
            raise TypeError(f"rpc message {name} must be a dataclass")
        if version < 1:
            raise ValueError(f"rpc message {name}: version must be >= 1")
        if name in self._by_name or cls in self._by_class:
            raise ValueError(f"rpc message {name} ({cls.__name__}) registered twice")
        entry = _MessageType(name, version, cls)
        self._by_name[name] = entry
        self._by_class[cls] = entry

    def names(self) -> list[str]:
        return sorted(self._by_name)

    def message_class(self, name: str) -> type:
        return self._by_name[name].cls

    def encode_body(self, message) -> tuple[str, int, list]:
        entry = self._by_class.get(type(message))
        if entry is None:
            raise TypeError(f"{type(message).__name__} is not a registered rpc message")
        return entry.name, entry.version, entry.struct.encode(message, entry.name)

    def decode_body(self, name: Any, version: Any, body: Any):
        entry = self._by_name.get(name) if type(name) is str else None
        if entry is None:
            raise DecodeError(f"unknown rpc message type {name!r}")
        if type(version) is not int or version < 1:
            raise DecodeError(f"rpc message {name}: invalid version {version!r}")
        if version > entry.version:
            raise UnsupportedVersionError(
                f"rpc message {name} v{version} is newer than this build's v{entry.version}", version=version
            )
        return entry.struct.decode(body, f"{name} v{version}")


DEFAULT_REGISTRY = Registry()


def rpc_message(name: str, *, version: int, registry: Registry = DEFAULT_REGISTRY):
    """Class decorator: register a dataclass as the rpc message `name` at `version`."""

    def register(cls):
        registry.register(name, version, cls)
        return cls

    return register


# --------------------------------------------------------------------------- #
# Frames
# --------------------------------------------------------------------------- #


def encode_frame(message, correlation_id: int, *, registry: Registry = DEFAULT_REGISTRY) -> bytes:
    """Length prefix + msgpack [type, version, correlation_id, body]."""
    name, version, body = registry.encode_body(message)
    payload = msgpack.packb([name, version, correlation_id, body], use_bin_type=True)
    return _LENGTH.pack(len(payload)) + payload


# Arrays and maps a payload may hold: a few per field of real messages, while one byte of
# msgpack can be an empty array. Without a bound, a 3 MB frame of them costs seconds of CPU
# (the event loop stalls) and hundreds of MB; with it, unpacking stops early.
CONTAINER_BUDGET_BASE = 10_000
BYTES_PER_CONTAINER = 8  # half the smallest real container: a Raft Entry with a tiny payload


class _ContainerBudget:
    __slots__ = ("left",)

    def __init__(self, size: int):
        self.left = CONTAINER_BUDGET_BASE + size // BYTES_PER_CONTAINER

    def take(self, value):
        self.left -= 1
        if self.left < 0:
            raise DecodeError("too many arrays and maps for the frame's size")
        return value


def unpack_payload(payload) -> Any:
    """The msgpack value of a frame's payload, with a bounded number of arrays and maps."""
    budget = _ContainerBudget(len(payload))
    try:
        return msgpack.unpackb(payload, raw=False, use_list=True, strict_map_key=False,
                               list_hook=budget.take, object_hook=budget.take)
    except DecodeError as exc:
        raise DecodeError(f"malformed rpc frame: {exc}") from None
    except Exception as exc:  # msgpack raises ValueError, TypeError, ExtraData, StackError...
        raise DecodeError(f"malformed rpc frame: {type(exc).__name__}: {exc}") from None


def decode_payload(payload, *, registry: Registry = DEFAULT_REGISTRY) -> Frame:
    """Decode one frame's payload (without its length prefix)."""
    value = unpack_payload(payload)
    if type(value) is not list or len(value) != 4:
        raise DecodeError("rpc frame must be an array [type, version, correlation_id, body]")
    name, version, correlation_id, body = value
    if type(correlation_id) is not int:
        raise DecodeError(f"rpc frame correlation id must be an int, got {type(correlation_id).__name__}")
    message = registry.decode_body(name, version, body)
    return Frame(name, version, correlation_id, message)


class FrameDecoder:
    """Incremental framing: feed bytes as they arrive, take out whole frames."""

    def __init__(self, *, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE, registry: Registry = DEFAULT_REGISTRY):
        self.max_frame_size = max_frame_size
        self.registry = registry
        self._buffer = bytearray()
        self._start = 0

    def feed(self, data) -> None:
        if self._start:
            del self._buffer[: self._start]  # compact lazily, once per feed
            self._start = 0
        self._buffer += data

    @property
    def buffered(self) -> int:
        return len(self._buffer) - self._start

    def next_payload(self) -> bytes | None:
        """The next whole frame's payload, or None until more bytes arrive."""
        available = len(self._buffer) - self._start
        if available < 4:
            return None
        (length,) = _LENGTH.unpack_from(self._buffer, self._start)
        if length > self.max_frame_size:
            raise DecodeError(f"rpc frame of {length} bytes exceeds the {self.max_frame_size}-byte limit")
        if available < 4 + length:
            return None
        start = self._start + 4
        self._start = start + length
        return bytes(self._buffer[start : self._start])

    def next_frame(self) -> Frame | None:
        payload = self.next_payload()
        return None if payload is None else decode_payload(payload, registry=self.registry)

    def __iter__(self):
        while (frame := self.next_frame()) is not None:
            yield frame


class RpcConnection:
    """Frames over a trio stream. Sends are serialized; one task should receive."""

    def __init__(
        self,
        stream: trio.abc.Stream,
        *,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        registry: Registry = DEFAULT_REGISTRY,
        receive_size: int = 64 * 1024,
    ):
        self.stream = stream
        self.registry = registry
        self._decoder = FrameDecoder(max_frame_size=max_frame_size, registry=registry)
        self._send_lock = trio.Lock()
        self._receive_size = receive_size

    async def send_frame(self, message, correlation_id: int) -> None:
        data = encode_frame(message, correlation_id, registry=self.registry)
        async with self._send_lock:
            await self.stream.send_all(data)

    async def receive_frame(self) -> Frame | None:
        """The next frame; None on a clean end of stream between frames.

        A stream that ends inside a frame raises DecodeError.
        """
        while True:
            frame = self._decoder.next_frame()
            if frame is not None:
                return frame
            data = await self.stream.receive_some(self._receive_size)
            if not data:
                if self._decoder.buffered:
                    raise DecodeError(f"stream ended inside an rpc frame ({self._decoder.buffered} bytes)")
                return None
            self._decoder.feed(data)

    async def aclose(self) -> None:
        await self.stream.aclose()
