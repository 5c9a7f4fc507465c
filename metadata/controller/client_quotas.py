"""AlterClientQuotas as a pure function of the image, as Kafka's ClientQuotaControlManager.

Each entry names an entity and its ops (set a key to a value, or remove it). An entry whose
entity or any op is invalid fails alone (INVALID_REQUEST) and writes nothing; a valid one
writes a ClientQuota record per key whose value changes (removing an absent key, or setting
the value a key has, writes nothing). A key set more than once in one entry takes the last
op, as Kafka's map of ops does. `validate_only` checks and writes nothing.
"""
from __future__ import annotations

from dataclasses import dataclass

from metadata.client_quotas import Entity, QuotaError, entity_error, entity_of, value_error
from metadata.image import MetadataImage
from metadata.records import ClientQuota
from wire.error_codes import ErrorCode

__all__ = ["QuotaOp", "QuotaAlteration", "alter_client_quotas"]


@dataclass(frozen=True, slots=True)
class QuotaOp:
    key: str
    value: float
    remove: bool = False


@dataclass(frozen=True, slots=True)
class QuotaAlteration:
    entity: tuple[tuple[str, str | None], ...]  # (type, name) as the request listed them
    ops: tuple[QuotaOp, ...]


def _alter_one(image: MetadataImage, change: QuotaAlteration) -> tuple[list, QuotaError | None]:
    problem = entity_error(list(change.entity))
    if problem is not None:
        return [], problem
    entity: Entity = entity_of(change.entity)
    wanted: dict[str, float | None] = {}
    for op in change.ops:
        wanted[op.key] = None if op.remove else op.value
    current = image.client_quotas.get(entity, {})
    records = []
    for key, value in wanted.items():
        if value is None:
            if key in current:
                records.append(ClientQuota(entity, key, 0.0, remove=True))
            continue
        problem = value_error(entity, key, value)
        if problem is not None:
            return [], problem
        if current.get(key) != value:
            records.append(ClientQuota(entity, key, float(value)))
    return records, None


def alter_client_quotas(image: MetadataImage, changes: list[QuotaAlteration], validate_only: bool = False,
                        ) -> tuple[list, list[tuple[ErrorCode, str | None]]]:
    """(records, one (error, message) per change, in order)."""
    records: list = []
    results: list[tuple[ErrorCode, str | None]] = []
    for change in changes:
        written, problem = _alter_one(image, change)
        if problem is not None:
            results.append((problem.code, problem.message))
            continue
        records.extend(written)
        results.append((ErrorCode.NONE, None))
    return ([] if validate_only else records), results
