"""Client quota admin APIs (KIP-546): DescribeClientQuotas and AlterClientQuotas."""
from __future__ import annotations

from wire.protocol.message import request, response
from wire.protocol.schema import ArrayOf, F, BOOL, FLOAT64, INT8, INT16, INT32, STRING

__all__ = [
    "DescribeClientQuotasRequest", "DescribeClientQuotasResponse",
    "AlterClientQuotasRequest", "AlterClientQuotasResponse",
]


def _entity(name: str):
    return F("entity", ArrayOf(name,
        F("entity_type", STRING),
        F("entity_name", STRING, nullable="0+"),  # null: the <default> entity
    ))


DescribeClientQuotasRequest = request(48, "DescribeClientQuotas", "0-1", flexible="1+", fields=[
    F("components", ArrayOf("ComponentData",
        F("entity_type", STRING),
        F("match_type", INT8),  # 0 exact name, 1 default, 2 any specified name
        F("match", STRING, nullable="0+"),
    )),
    F("strict", BOOL),
])

DescribeClientQuotasResponse = response(48, "DescribeClientQuotas", "0-1", flexible="1+", fields=[
    F("throttle_time_ms", INT32),
    F("error_code", INT16),
    F("error_message", STRING, nullable="0+", default=None),
    F("entries", ArrayOf("EntryData",
        _entity("EntityData"),
        F("values", ArrayOf("ValueData",
            F("key", STRING),
            F("value", FLOAT64),
        )),
    ), nullable="0+"),
])

AlterClientQuotasRequest = request(49, "AlterClientQuotas", "0-1", flexible="1+", fields=[
    F("entries", ArrayOf("EntryData",
        _entity("EntityData"),
        F("ops", ArrayOf("OpData",
            F("key", STRING),
            F("value", FLOAT64),
            F("remove", BOOL),
        )),
    )),
    F("validate_only", BOOL),
])

AlterClientQuotasResponse = response(49, "AlterClientQuotas", "0-1", flexible="1+", fields=[
    F("throttle_time_ms", INT32),
    F("entries", ArrayOf("EntryData",
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+", default=None),
        _entity("EntityData"),
    )),
])
