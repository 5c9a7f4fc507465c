"""Compile struct specs into straight-line Python encoders and decoders.

For each (struct, version) we generate the source of two functions once, at
import time, and `exec` it:

    decode(buf, pos) -> (obj, pos)      buf: a byte-format memoryview
    encode(obj, out) -> None            out: a list of byte chunks

Runs of consecutive fixed-size fields become one precompiled `struct.Struct`
call; absent fields get their defaults; the hot path does no dict lookups
and no introspection. Truncated input surfaces as `struct.error` from
`unpack_from` (mapped to `DecodeError` at the message boundary) or as
`DecodeError` from the length readers.
"""
from __future__ import annotations

import struct
from typing import Any, Callable

from wire.protocol import primitives as P
from wire.protocol.schema import ArrayOf, FieldSpec, Primitive, StructOf, StructSpec, BYTES, RECORDS, STRING, UUID

__all__ = ["compile_decoder", "compile_encoder"]

_cache: dict[tuple[int, int, bool, str], Callable] = {}


class _Namespace:
    """Names the generated source refers to; constants are bound, never inlined."""

    def __init__(self) -> None:
        self.names: dict[str, Any] = {"DecodeError": P.DecodeError}
        self._count = 0

    def bind(self, prefix: str, value: Any) -> str:
        for name, existing in self.names.items():
            if existing is value and name.startswith(prefix):
                return name
        self._count += 1
        name = f"{prefix}{self._count}"
        self.names[name] = value
        return name


def _variant(flexible: bool, nullable: bool) -> str:
    return ("compact_" if flexible else "") + ("nullable_" if nullable else "")


_READERS = {STRING: "string", BYTES: "bytes", RECORDS: "records"}
_PRESENCE = struct.Struct(">b")  # the byte before a nullable struct: -1 null, 1 present


# --------------------------------------------------------------------------- #
# decoders
# --------------------------------------------------------------------------- #


def compile_decoder(spec: StructSpec, version: int, flexible: bool) -> Callable:
    key = (id(spec), version, flexible, "d")
    fn = _cache.get(key)
    if fn is None:
        fn = _build_decoder(spec, version, flexible)
        _cache[key] = fn
    return fn


def _decode_value(ns: _Namespace, ftype, nullable: bool, version: int, flexible: bool,
                  target: str, ind: str) -> list[str]:
    """Lines that read one (non-fixed or standalone) value into `target`."""
    if isinstance(ftype, Primitive):
        if ftype.fixed:
            s = ns.bind("_S", struct.Struct(">" + ftype.struct_format))
            return [f"{ind}{target}, = {s}.unpack_from(buf, pos)", f"{ind}pos += {ftype.size}"]
        if ftype is UUID:
            return [f"{ind}{target}, pos = {ns.bind('_r', P.read_uuid)}(buf, pos)"]
        reader = getattr(P, f"read_{_variant(flexible, nullable)}{_READERS[ftype]}")
        return [f"{ind}{target}, pos = {ns.bind('_r', reader)}(buf, pos)"]
    if isinstance(ftype, StructOf):
        sub = ns.bind("_d", compile_decoder(ftype.struct, version, flexible))
        if not nullable:
            return [f"{ind}{target}, pos = {sub}(buf, pos)"]
        # A nullable struct is preceded by one signed byte: negative for null.
        return [f"{ind}present, = {ns.bind('_S', _PRESENCE)}.unpack_from(buf, pos)", f"{ind}pos += 1",
                f"{ind}if present < 0:", f"{ind}    {target} = None", f"{ind}else:",
                f"{ind}    {target}, pos = {sub}(buf, pos)"]
    assert isinstance(ftype, ArrayOf)
    lenreader = ns.bind("_r", getattr(P, f"read_{_variant(flexible, nullable)}array_len"))
    lines = [f"{ind}n, pos = {lenreader}(buf, pos)"]
    inner = ind
    if nullable:
        lines += [f"{ind}if n is None:", f"{ind}    {target} = None", f"{ind}else:"]
        inner = ind + "    "
    lines.append(f"{inner}{ns.bind('_t', P.take_items)}(n)")
    elem = ftype.element
    if isinstance(elem, Primitive) and elem.fixed:
        # One struct call for the whole array; struct caches the format.
        fmt = elem.struct_format
        lines += [
            f"{inner}{target} = list(unpack_from('>%d{fmt}' % n, buf, pos))",
            f"{inner}pos += n * {elem.size}",
        ]
        return lines
    lines += [f"{inner}lst = []", f"{inner}for _ in range(n):"]
    if isinstance(elem, StructSpec):
        sub = ns.bind("_d", compile_decoder(elem, version, flexible))
        lines += [f"{inner}    item, pos = {sub}(buf, pos)"]
    else:
        lines += _decode_value(ns, elem, False, version, flexible, "item", inner + "    ")
    lines += [f"{inner}    lst.append(item)", f"{inner}{target} = lst"]
    return lines


def _standalone_reader(ns_parent: _Namespace, f: FieldSpec, version: int, flexible: bool) -> Callable:
    ns = _Namespace()
    ns.names["unpack_from"] = struct.unpack_from
    body = _decode_value(ns, f.type, f.nullable_in(version), version, flexible, "v", "    ")
    src = "def read(buf, pos):\n" + "\n".join(body) + "\n    return v, pos\n"
    exec(compile(src, f"<tagged {f.name} v{version}>", "exec"), ns.names)
    return ns.names["read"]


def _build_decoder(spec: StructSpec, version: int, flexible: bool) -> Callable:
    ns = _Namespace()
    ns.names["unpack_from"] = struct.unpack_from
    ns.names["_new"] = object.__new__
    ns.names["_C"] = spec.cls
    lines = ["def decode(buf, pos):", "    o = _new(_C)"]
    present = [f for f in spec.fields_in(version) if not (f.tag is not None and flexible)]
    tagged = [f for f in spec.fields_in(version) if f.tag is not None and flexible]
    run: list[FieldSpec] = []

    def flush_run():
        if not run:
            return
        fmt = ">" + "".join(f.type.struct_format for f in run)
        s = ns.bind("_S", struct.Struct(fmt))
        targets = ", ".join(f"o.{f.name}" for f in run)
        lines.append(f"    {targets}, = {s}.unpack_from(buf, pos)")
        lines.append(f"    pos += {struct.calcsize(fmt)}")
        run.clear()

    for f in present:
        if isinstance(f.type, Primitive) and f.type.fixed:
            run.append(f)
            continue
        flush_run()
        lines += _decode_value(ns, f.type, f.nullable_in(version), version, flexible, f"o.{f.name}", "    ")
    flush_run()
    # Fields this version lacks (and tagged ones not sent) take their defaults.
    for f in spec.fields:
        if f.present_in(version) and not (f.tag is not None and flexible):
            continue
        lines.append(f"    o.{f.name} = {_default_expr(ns, f)}")
    if flexible:
        known = {f.tag: (f.name, _standalone_reader(ns, f, version, flexible)) for f in tagged}
        rtags = ns.bind("_r", P.read_tagged_fields)
        lines.append(f"    o._unknown_tags, pos = {rtags}(buf, pos, o, {ns.bind('_K', known)})")
    else:
        lines.append("    o._unknown_tags = None")
    lines.append("    return o, pos")
    src = "\n".join(lines) + "\n"
    exec(compile(src, f"<decode {spec.name} v{version}>", "exec"), ns.names)
    ns.names["decode"].source = src  # for debugging: print(cls._decoders[v].source)
    return ns.names["decode"]


def _default_expr(ns: _Namespace, f: FieldSpec) -> str:
    if isinstance(f.type, ArrayOf):
        return "None" if f.default is None else "[]"
    if isinstance(f.type, StructOf):
        return "None" if f.default is None else f"{ns.bind('_C', f.type.struct.cls)}()"
    return ns.bind("_D", f.default)


# --------------------------------------------------------------------------- #
# encoders
# --------------------------------------------------------------------------- #


def compile_encoder(spec: StructSpec, version: int, flexible: bool) -> Callable:
    key = (id(spec), version, flexible, "e")
    fn = _cache.get(key)
    if fn is None:
        fn = _build_encoder(spec, version, flexible)
        _cache[key] = fn
    return fn


def _encode_value(ns: _Namespace, ftype, nullable: bool, version: int, flexible: bool,
                  value: str, ind: str, out: str = "out") -> list[str]:
    if isinstance(ftype, Primitive):
        if ftype.fixed:
            s = ns.bind("_S", struct.Struct(">" + ftype.struct_format))
            return [f"{ind}{out}.append({s}.pack({value}))"]
        if ftype is UUID:
            return [f"{ind}{ns.bind('_w', P.write_uuid)}({out}, {value})"]
        writer = getattr(P, f"write_{_variant(flexible, nullable)}{_READERS[ftype]}")
        return [f"{ind}{ns.bind('_w', writer)}({out}, {value})"]
    if isinstance(ftype, StructOf):
        sub = ns.bind("_e", compile_encoder(ftype.struct, version, flexible))
        if not nullable:
            return [f"{ind}{sub}({value}, {out})"]
        presence = ns.bind("_S", _PRESENCE)
        return [f"{ind}if {value} is None:", f"{ind}    {out}.append({presence}.pack(-1))", f"{ind}else:",
                f"{ind}    {out}.append({presence}.pack(1))", f"{ind}    {sub}({value}, {out})"]
    assert isinstance(ftype, ArrayOf)
    writelen = ns.bind("_w", P.write_compact_array_len if flexible else P.write_array_len)
    lines = [f"{ind}lst = {value}"]
    inner = ind
    if nullable:
        null = ns.bind("_w", P.write_null_compact_array if flexible else P.write_null_array)
        lines += [f"{ind}if lst is None:", f"{ind}    {null}({out})", f"{ind}else:"]
        inner = ind + "    "
    lines.append(f"{inner}{writelen}({out}, len(lst))")
    elem = ftype.element
    if isinstance(elem, Primitive) and elem.fixed:
        lines.append(f"{inner}{out}.append(pack('>%d{elem.struct_format}' % len(lst), *lst))")
        return lines
    lines.append(f"{inner}for item in lst:")
    if isinstance(elem, StructSpec):
        sub = ns.bind("_e", compile_encoder(elem, version, flexible))
        lines.append(f"{inner}    {sub}(item, {out})")
    else:
        lines += _encode_value(ns, elem, False, version, flexible, "item", inner + "    ", out)
    return lines


def _build_encoder(spec: StructSpec, version: int, flexible: bool) -> Callable:
    ns = _Namespace()
    ns.names["pack"] = struct.pack
    ns.names["_join"] = b"".join
    lines = ["def encode(o, out):"]
    present = [f for f in spec.fields_in(version) if not (f.tag is not None and flexible)]
    tagged = sorted((f for f in spec.fields_in(version) if f.tag is not None and flexible), key=lambda f: f.tag)
    run: list[FieldSpec] = []

    def flush_run():
        if not run:
            return
        fmt = ">" + "".join(f.type.struct_format for f in run)
        s = ns.bind("_S", struct.Struct(fmt))
        lines.append(f"    out.append({s}.pack({', '.join(f'o.{f.name}' for f in run)}))")
        run.clear()

    for f in present:
        if isinstance(f.type, Primitive) and f.type.fixed:
            run.append(f)
            continue
        flush_run()
        lines += _encode_value(ns, f.type, f.nullable_in(version), version, flexible, f"o.{f.name}", "    ")
    flush_run()
    if flexible:
        lines.append("    tags = []")
        for f in tagged:
            # Sent only when it differs from its default (a struct: from its default instance).
            lines.append(f"    if o.{f.name} != {_default_expr(ns, f)}:")
            lines.append("        sub = []")
            lines += _encode_value(ns, f.type, f.nullable_in(version), version, flexible,
                                   f"o.{f.name}", "        ", out="sub")
            lines.append(f"        tags.append(({f.tag}, _join(sub)))")
        lines.append(f"    {ns.bind('_w', P.write_tagged_fields)}(out, tags, o._unknown_tags)")
    if len(lines) == 1:
        lines.append("    pass")
    src = "\n".join(lines) + "\n"
    exec(compile(src, f"<encode {spec.name} v{version}>", "exec"), ns.names)
    ns.names["encode"].source = src
    return ns.names["encode"]
