"""Struct and message classes generated from specs.

Every struct spec becomes a small `__slots__` class with keyword constructor
defaults, attribute access, value equality and a readable repr. Handlers build
responses by constructing these; decoders fill them in without calling
`__init__`. A message class adds its API key, version range and per-version
codecs, compiled on first use of a version (a process that speaks a few APIs
compiles only those):

    req = ProduceRequest.decode(body_bytes, version=8)
    data = ProduceResponse(responses=[...]).encode(version=8)
"""
from __future__ import annotations

import struct
from typing import Any

from wire.errors import DecodeError, UnsupportedVersionError
from wire.protocol.codegen import compile_decoder, compile_encoder
from wire.protocol.schema import FieldSpec, StructOf, StructSpec, Versions, parse_versions, ArrayOf

__all__ = ["Struct", "Message", "define_message", "request", "response", "as_memoryview"]

_MISSING = object()
# What a corrupt frame can raise inside generated code; all become DecodeError.
_DECODE_FAILURES = (struct.error, IndexError, ValueError, OverflowError)


def as_memoryview(data) -> memoryview:
    view = data if isinstance(data, memoryview) else memoryview(data)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


class Struct:
    """Base of every generated struct: equality and repr over the declared fields."""

    __slots__ = ("_unknown_tags",)
    SPEC: StructSpec
    FIELD_NAMES: tuple[str, ...] = ()

    def __eq__(self, other: Any) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        for name in self.FIELD_NAMES:
            if getattr(self, name) != getattr(other, name):
                return False
        return True

    __hash__ = None  # mutable

    def __repr__(self) -> str:
        parts = []
        for name in self.FIELD_NAMES:
            value = getattr(self, name)
            if isinstance(value, memoryview):
                value = f"<{value.nbytes} bytes>"
            else:
                value = repr(value)
            parts.append(f"{name}={value}")
        return f"{type(self).__name__}({', '.join(parts)})"

    def to_dict(self) -> dict:
        """Plain data (nested structs become dicts), for logs and golden files."""
        return {name: _plain(getattr(self, name)) for name in self.FIELD_NAMES}


def _plain(value):
    if isinstance(value, Struct):
        return value.to_dict()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, memoryview):
        return bytes(value)
    return value


def _build_struct_class(spec: StructSpec, base: type, extra: dict | None = None) -> type:
    names = [f.name for f in spec.fields]
    if len(set(names)) != len(names):
        raise TypeError(f"{spec.name}: duplicate field names")
    for sub in spec.substructs():
        if sub.cls is None:
            _build_struct_class(sub, Struct)
    ns: dict[str, Any] = {"_MISSING": _MISSING}
    params, body = [], []
    for i, f in enumerate(spec.fields):
        if isinstance(f.type, (ArrayOf, StructOf)) and f.default is not None:
            params.append(f"{f.name}=_MISSING")
            fresh = "[]" if isinstance(f.type, ArrayOf) else f"_C{i}()"
            if isinstance(f.type, StructOf):
                ns[f"_C{i}"] = f.type.struct.cls
            body.append(f"    self.{f.name} = {fresh} if {f.name} is _MISSING else {f.name}")
        else:
            ns[f"_D{i}"] = f.default
            params.append(f"{f.name}=_D{i}")
            body.append(f"    self.{f.name} = {f.name}")
    body.append("    self._unknown_tags = None")
    src = f"def __init__(self, *, {', '.join(params)}):\n" + "\n".join(body) + "\n" if params else \
        "def __init__(self):\n    self._unknown_tags = None\n"
    exec(compile(src, f"<init {spec.name}>", "exec"), ns)
    attrs = {"__slots__": tuple(names), "__init__": ns["__init__"], "SPEC": spec,
             "FIELD_NAMES": tuple(names), "__qualname__": spec.name}
    attrs.update(extra or {})
    cls = type(spec.name, (base,), attrs)
    spec.cls = cls
    # Nested struct classes are reachable as attributes: ProduceRequest.TopicProduceData.
    for sub in spec.substructs():
        setattr(cls, sub.name, sub.cls)
    return cls


class Message(Struct):
    """A top-level versioned message (request, response or embedded protocol)."""

    __slots__ = ()
    API_KEY: int | None = None
    API_NAME: str = ""
    KIND: str = ""
    VERSIONS: Versions
    FLEXIBLE: Versions
    _decoders: dict[int, Any]
    _encoders: dict[int, Any]
    _flexible_versions: frozenset[int]

    @classmethod
    def is_flexible(cls, version: int) -> bool:
        return version in cls._flexible_versions

    @classmethod
    def _unsupported(cls, version: int) -> UnsupportedVersionError:
        return UnsupportedVersionError(
            f"{cls.__name__} v{version} is not supported (have {cls.VERSIONS})",
            api_key=cls.API_KEY, version=version)

    @classmethod
    def supports(cls, version: int) -> bool:
        return version in cls.VERSIONS

    @classmethod
    def _compile(cls, codecs: dict[int, Any], compile_codec, version: int):
        if version not in cls.VERSIONS:
            raise cls._unsupported(version)
        codec = codecs[version] = compile_codec(cls.SPEC, version, version in cls._flexible_versions)
        return codec

    @classmethod
    def decode_from(cls, buf: memoryview, pos: int, version: int):
        """Decode at `pos` of a byte memoryview; returns (message, new_pos)."""
        decoder = cls._decoders.get(version)
        if decoder is None:
            decoder = cls._compile(cls._decoders, compile_decoder, version)
        try:
            return decoder(buf, pos)
        except DecodeError:
            raise
        except _DECODE_FAILURES as exc:
            raise DecodeError(f"malformed {cls.__name__} v{version}: {exc}") from None

    @classmethod
    def decode(cls, data, version: int, *, allow_trailing: bool = False):
        """Decode a whole buffer; leftover bytes are an error unless allowed."""
        buf = as_memoryview(data)
        obj, pos = cls.decode_from(buf, 0, version)
        if pos != len(buf) and not allow_trailing:
            raise DecodeError(f"{cls.__name__} v{version}: {len(buf) - pos} trailing bytes")
        return obj

    def encode_into(self, out: list, version: int) -> None:
        encoder = self._encoders.get(version)
        if encoder is None:
            encoder = self._compile(self._encoders, compile_encoder, version)
        encoder(self, out)

    def encode(self, version: int) -> bytes:
        out: list = []
        self.encode_into(out, version)
        return b"".join(out)


def define_message(class_name: str, fields: list[FieldSpec], *, api_key: int | None, kind: str,
                   versions: str, flexible: str | None = None) -> type:
    """Build a message class; its codecs are compiled per version on first use."""
    spec = StructSpec(class_name, list(fields))
    vrange = parse_versions(versions)
    frange = parse_versions(flexible)
    _check_tags(spec, vrange, frange)
    extra = {"API_KEY": api_key, "API_NAME": class_name.removesuffix("Request").removesuffix("Response"),
             "KIND": kind, "VERSIONS": vrange, "FLEXIBLE": frange}
    cls = _build_struct_class(spec, Message, extra)
    _set_qualnames(spec, class_name)
    # Every nested struct is also reachable from the message: ProduceRequest.PartitionProduceData.
    for sub in _descendants(spec):
        existing = getattr(cls, sub.name, None)
        if existing is not None and existing is not sub.cls:
            raise TypeError(f"{class_name}: two nested structs are named {sub.name}")
        setattr(cls, sub.name, sub.cls)
    cls._decoders = {}
    cls._encoders = {}
    cls._flexible_versions = frozenset(v for v in range(vrange.lo, vrange.hi + 1) if v in frange)
    return cls


def _set_qualnames(spec: StructSpec, prefix: str) -> None:
    for sub in spec.substructs():
        sub.cls.__qualname__ = f"{prefix}.{sub.name}"
        _set_qualnames(sub, sub.cls.__qualname__)


def _descendants(spec: StructSpec) -> list[StructSpec]:
    out = []
    for sub in spec.substructs():
        out.append(sub)
        out.extend(_descendants(sub))
    return out


def _check_tags(spec: StructSpec, vrange: Versions, frange: Versions) -> None:
    tags = [f.tag for f in spec.fields if f.tag is not None]
    if len(set(tags)) != len(tags):
        raise TypeError(f"{spec.name}: duplicate tags")
    for f in spec.fields:
        if f.tag is not None:
            for v in range(vrange.lo, vrange.hi + 1):
                if f.present_in(v) and v not in frange:
                    raise TypeError(f"{spec.name}.{f.name}: tagged field in non-flexible v{v}")
    for sub in spec.substructs():
        _check_tags(sub, vrange, frange)


def request(api_key: int, name: str, versions: str, *, flexible: str | None = None,
            fields: list[FieldSpec]) -> type:
    return define_message(name + "Request", fields, api_key=api_key, kind="request",
                          versions=versions, flexible=flexible)


def response(api_key: int, name: str, versions: str, *, flexible: str | None = None,
             fields: list[FieldSpec]) -> type:
    return define_message(name + "Response", fields, api_key=api_key, kind="response",
                          versions=versions, flexible=flexible)
