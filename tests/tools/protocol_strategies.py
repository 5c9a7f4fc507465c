"""Hypothesis strategies that build random valid protocol objects from the specs."""
from __future__ import annotations

from hypothesis import strategies as st

from wire.protocol.schema import (
    ArrayOf, BOOL, BYTES, FLOAT64, INT8, INT16, INT32, INT64, Primitive, RECORDS, STRING, StructOf,
    StructSpec, UINT16, UINT32, UUID,
)

_PRIMITIVES = {
    INT8: st.integers(-(1 << 7), (1 << 7) - 1),
    INT16: st.integers(-(1 << 15), (1 << 15) - 1),
    INT32: st.integers(-(1 << 31), (1 << 31) - 1),
    INT64: st.integers(-(1 << 63), (1 << 63) - 1),
    UINT16: st.integers(0, (1 << 16) - 1),
    UINT32: st.integers(0, (1 << 32) - 1),
    BOOL: st.booleans(),
    FLOAT64: st.floats(allow_nan=False),
    STRING: st.text(max_size=12),
    BYTES: st.binary(max_size=16),
    RECORDS: st.binary(max_size=48),
    UUID: st.uuids(),
}


def value_strategy(ftype, nullable: bool, version: int) -> st.SearchStrategy:
    if isinstance(ftype, Primitive):
        base = _PRIMITIVES[ftype]
    elif isinstance(ftype, StructOf):
        base = struct_strategy(ftype.struct, version)
    else:
        assert isinstance(ftype, ArrayOf)
        elem = ftype.element
        inner = struct_strategy(elem, version) if isinstance(elem, StructSpec) else _PRIMITIVES[elem]
        base = st.lists(inner, max_size=3)
    return st.one_of(st.none(), base) if nullable else base


def struct_strategy(spec: StructSpec, version: int) -> st.SearchStrategy:
    fields = {f.name: value_strategy(f.type, f.nullable_in(version), version) for f in spec.fields_in(version)}
    return st.builds(spec.cls, **fields)


def message_strategy(cls, version: int) -> st.SearchStrategy:
    return struct_strategy(cls.SPEC, version)
