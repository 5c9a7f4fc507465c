"""Every error code a message carries, counted as Kafka's `AbstractResponse.errorCounts` counts
them: each `error_code` field at any depth (the response's own, each topic's, each partition's),
NONE included. The broker's request error metric (Kafka's RequestMetrics ErrorsPerSec) is made
from these counts.

Which fields hold error codes is read once per struct spec; counting walks only those paths.
"""
from __future__ import annotations

from wire.protocol.schema import INT16, ArrayOf, StructOf, StructSpec

__all__ = ["error_counts"]

_CODE, _ARRAY, _STRUCT = 0, 1, 2
_PLANS: dict[int, tuple] = {}


def error_counts(message) -> dict[int, int]:
    """{error code: how many error_code fields of `message` hold it}."""
    counts: dict[int, int] = {}
    _count(message, _plan(type(message).SPEC), counts)
    return counts


def _count(struct, plan: tuple, counts: dict[int, int]) -> None:
    for kind, name, inner in plan:
        value = getattr(struct, name, None)
        if value is None:
            continue
        if kind == _CODE:
            counts[value] = counts.get(value, 0) + 1
        elif kind == _ARRAY:
            for item in value:
                _count(item, inner, counts)
        else:
            _count(value, inner, counts)


def _plan(spec: StructSpec) -> tuple:
    """(kind, field name, inner plan) for each field that is or leads to an error_code."""
    plan = _PLANS.get(id(spec))
    if plan is not None:
        return plan
    steps = []
    for field in spec.fields:
        kind = field.type
        if field.name == "error_code" and kind is INT16:
            steps.append((_CODE, field.name, ()))
        elif isinstance(kind, ArrayOf) and isinstance(kind.element, StructSpec):
            inner = _plan(kind.element)
            if inner:
                steps.append((_ARRAY, field.name, inner))
        elif isinstance(kind, StructOf):
            inner = _plan(kind.struct)
            if inner:
                steps.append((_STRUCT, field.name, inner))
    plan = _PLANS[id(spec)] = tuple(steps)
    return plan
