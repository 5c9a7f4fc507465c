"""The declarative vocabulary for Kafka message definitions.

A message is a tree of fields. Each field has a type, the versions it exists
in, the versions in which it may be null, a default (used when the field is
absent from a version, and by constructors), and optionally a tag number,
which makes it a tagged field of the flexible versions.

    F("transactional_id", STRING, "3+", nullable="3+", default=None)
    F("topics", ArrayOf("TopicData", F("name", STRING), F("partitions", ArrayOf(INT32))))

Version ranges are written as in Kafka's schemas: "3+", "0-2", "5", "none".
These objects only describe; `wire.protocol.codegen` turns them into code.
"""
from __future__ import annotations

import uuid as _uuid
from dataclasses import dataclass, field as _dc_field
from typing import Any

__all__ = [
    "Primitive",
    "INT8", "INT16", "INT32", "INT64", "UINT16", "UINT32", "BOOL", "FLOAT64",
    "STRING", "BYTES", "RECORDS", "UUID",
    "ArrayOf", "StructOf", "F", "FieldSpec", "StructSpec", "Versions", "parse_versions",
    "MAX_VERSION", "NO_DEFAULT",
]

MAX_VERSION = 0x7FFF
ZERO_UUID = _uuid.UUID(int=0)


@dataclass(frozen=True)
class Primitive:
    name: str
    struct_format: str | None  # big-endian format char for fixed-size types
    size: int  # bytes on the wire for fixed-size types, 0 otherwise
    default: Any

    @property
    def fixed(self) -> bool:
        return self.struct_format is not None

    def __repr__(self) -> str:
        return self.name


INT8 = Primitive("INT8", "b", 1, 0)
INT16 = Primitive("INT16", "h", 2, 0)
INT32 = Primitive("INT32", "i", 4, 0)
INT64 = Primitive("INT64", "q", 8, 0)
UINT16 = Primitive("UINT16", "H", 2, 0)
UINT32 = Primitive("UINT32", "I", 4, 0)
BOOL = Primitive("BOOL", "?", 1, False)
FLOAT64 = Primitive("FLOAT64", "d", 8, 0.0)
STRING = Primitive("STRING", None, 0, "")
BYTES = Primitive("BYTES", None, 0, b"")
# RECORDS decode to a memoryview slice of the frame: never copied, never parsed here.
RECORDS = Primitive("RECORDS", None, 0, b"")
UUID = Primitive("UUID", None, 0, ZERO_UUID)


class Versions:
    """An inclusive version range; `None` bounds mean "never"."""

    __slots__ = ("lo", "hi")

    def __init__(self, lo: int, hi: int):
        self.lo = lo
        self.hi = hi

    def __contains__(self, version: int) -> bool:
        return self.lo <= version <= self.hi

    def __repr__(self) -> str:
        if self.lo > self.hi:
            return "none"
        return f"{self.lo}+" if self.hi == MAX_VERSION else f"{self.lo}-{self.hi}"


NEVER = Versions(1, 0)


def parse_versions(text: str | Versions | None) -> Versions:
    if text is None or text == "none":
        return NEVER
    if isinstance(text, Versions):
        return text
    text = text.strip()
    if text.endswith("+"):
        return Versions(int(text[:-1]), MAX_VERSION)
    if "-" in text:
        lo, hi = text.split("-")
        return Versions(int(lo), int(hi))
    return Versions(int(text), int(text))


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT = _NoDefault()


@dataclass
class ArrayOf:
    """An array of a primitive (`ArrayOf(INT32)`) or of a struct (`ArrayOf("Name", *fields)`)."""

    element: "Primitive | StructSpec"

    def __init__(self, element: "Primitive | str", *fields: "FieldSpec"):
        if isinstance(element, Primitive):
            if fields:
                raise TypeError("an array of a primitive takes no fields")
            self.element = element
        else:
            self.element = StructSpec(element, list(fields))


@dataclass
class StructOf:
    """A single nested struct (not an array)."""

    struct: "StructSpec"

    def __init__(self, name: str, *fields: "FieldSpec"):
        self.struct = StructSpec(name, list(fields))


@dataclass
class FieldSpec:
    name: str
    type: "Primitive | ArrayOf | StructOf"
    versions: Versions
    nullable: Versions
    default: Any
    tag: int | None

    def present_in(self, version: int) -> bool:
        return version in self.versions

    def nullable_in(self, version: int) -> bool:
        return version in self.nullable

    def make_default(self) -> Any:
        """A fresh default value (lists are never shared between objects)."""
        if isinstance(self.type, ArrayOf):
            return None if self.default is None else []
        if isinstance(self.type, StructOf):
            return None if self.default is None else self.type.struct.cls()
        return self.default


def F(
    name: str,
    type: "Primitive | ArrayOf | StructOf",
    versions: str = "0+",
    *,
    nullable: str | None = None,
    default: Any = NO_DEFAULT,
    tag: int | None = None,
) -> FieldSpec:
    if default is NO_DEFAULT:
        default = type.default if isinstance(type, Primitive) else []
    if isinstance(type, StructOf) and nullable and default is not None:
        raise TypeError(f"{name}: a nullable struct defaults to None")
    return FieldSpec(name, type, parse_versions(versions), parse_versions(nullable), default, tag)


@dataclass
class StructSpec:
    name: str
    fields: list[FieldSpec]
    cls: Any = _dc_field(default=None, repr=False)  # filled by the class builder

    def fields_in(self, version: int) -> list[FieldSpec]:
        return [f for f in self.fields if f.present_in(version)]

    def substructs(self) -> list["StructSpec"]:
        out = []
        for f in self.fields:
            if isinstance(f.type, ArrayOf) and isinstance(f.type.element, StructSpec):
                out.append(f.type.element)
            elif isinstance(f.type, StructOf):
                out.append(f.type.struct)
        return out
