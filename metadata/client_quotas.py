"""Client quota entities, keys and precedence, as Kafka's (KIP-55, KIP-546).

An entity is a tuple of `EntityPart(type, name)` sorted by type, a name None meaning that
type's `<default>`: `(user=alice)`, `(client-id=<default>)`, `(client-id=app, user=alice)`,
`(ip=10.0.0.1)`. The image maps each entity to its quota values (`image.client_quotas`).

Which quota applies to a connection's (user, client-id) is decided per quota key, first match
wins (Kafka's DefaultQuotaCallback):

    1 user=U, client-id=C      2 user=U, client-id=<default>     3 user=U
    4 user=<default>, client-id=C   5 user=<default>, client-id=<default>   6 user=<default>
    7 client-id=C              8 client-id=<default>

The level that matched also decides who shares the measured rate: levels 1, 2, 4, 5 measure
each (user, client-id) pair alone, 3 and 6 all of a user's clients together, 7 and 8 one
client-id across users (its metric tags, with "" for the shared part).
"""
from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass
from typing import Mapping

from metadata.errors import bounded_message
from metadata.records import EntityPart
from wire.error_codes import ErrorCode

__all__ = [
    "USER", "CLIENT_ID", "IP", "PRODUCER_BYTE_RATE", "CONSUMER_BYTE_RATE", "REQUEST_PERCENTAGE",
    "CONTROLLER_MUTATION_RATE", "CONNECTION_CREATION_RATE", "Entity", "QuotaError", "entity_of",
    "entity_error", "value_error", "QuotaFilterError", "describe", "resolve", "Resolved", "ip_connection_rate",
]

USER, CLIENT_ID, IP = "user", "client-id", "ip"
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

Entity = tuple[EntityPart, ...]

# key -> integral (Kafka's LONG/INT config type: a value with a fraction is refused)
_USER_CLIENT_KEYS = {PRODUCER_BYTE_RATE: True, CONSUMER_BYTE_RATE: True, REQUEST_PERCENTAGE: False,
                     CONTROLLER_MUTATION_RATE: False}
_IP_KEYS = {CONNECTION_CREATION_RATE: True}
_INTEGRAL_MAX = float(2 ** 63 - 1)


@dataclass(frozen=True, slots=True)
class QuotaError:
    code: ErrorCode
    message: str

    def __post_init__(self):
        object.__setattr__(self, "message", bounded_message(self.message))


def entity_of(parts) -> Entity:
    """The canonical entity for (type, name) pairs: sorted by type."""
    return tuple(sorted((EntityPart(t, n) for t, n in parts), key=lambda p: p.entity_type))


def entity_error(parts: list[tuple[str, str | None]]) -> QuotaError | None:
    """Kafka's ClientQuotaControlManager.validateEntity, on the request's (type, name) pairs."""
    if not parts:
        return QuotaError(ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity")
    seen: set[str] = set()
    for entity_type, name in parts:
        if entity_type in seen:
            return QuotaError(ErrorCode.INVALID_REQUEST,
                              f"Invalid empty client quota entity, duplicate entity entry {entity_type}")
        seen.add(entity_type)
        if entity_type not in (USER, CLIENT_ID, IP):
            return QuotaError(ErrorCode.INVALID_REQUEST, f"Unhandled client quota entity type: {entity_type}")
        if name is not None and not name:
            return QuotaError(ErrorCode.INVALID_REQUEST, f"Empty {entity_type} not supported")
        if entity_type == IP and name is not None:
            try:
                ipaddress.ip_address(name)
            except ValueError:
                return QuotaError(ErrorCode.INVALID_REQUEST, f"{name} is not a valid IP or resolvable host.")
    if IP in seen and len(seen) != 1:
        return QuotaError(ErrorCode.INVALID_REQUEST,
                          "Invalid quota entity combination, IP entity should not be combined with User or ClientId")
    return None


def value_error(entity: Entity, key: str, value: float) -> QuotaError | None:
    """Whether `key` may be set to `value` on `entity` (Kafka's validateQuotaKeyValue)."""
    keys = _IP_KEYS if any(p.entity_type == IP for p in entity) else _USER_CLIENT_KEYS
    if key not in keys:
        return QuotaError(ErrorCode.INVALID_REQUEST, f"Invalid configuration key {key}")
    if math.isnan(value) or math.isinf(value) or value < 0:
        return QuotaError(ErrorCode.INVALID_REQUEST, f"Illegal value {value} for quota {key}: it must be a "
                                                     "finite, non-negative number")
    if keys[key]:
        if value > _INTEGRAL_MAX:
            return QuotaError(ErrorCode.INVALID_REQUEST, f"Proposed value for {key} is too large for a LONG.")
        if value != math.floor(value):
            return QuotaError(ErrorCode.INVALID_REQUEST, f"{key} cannot be a fractional value.")
    return None


# --------------------------------------------------------------------- describe

EXACT, DEFAULT, SPECIFIED = 0, 1, 2  # DescribeClientQuotas match types


class QuotaFilterError(Exception):
    def __init__(self, code: ErrorCode, message: str):
        message = bounded_message(message)
        super().__init__(message)
        self.code = code
        self.message = message


def describe(quotas: Mapping[Entity, Mapping[str, float]], components: list[tuple[str, int, str | None]],
             strict: bool) -> list[tuple[Entity, Mapping[str, float]]]:
    """The entities a DescribeClientQuotas filter matches (Kafka's ClientQuotasImage.describe);
    raises QuotaFilterError for a filter Kafka refuses."""
    exact: dict[str, str | None] = {}
    specified: set[str] = set()
    for entity_type, match_type, match in components:
        if not entity_type:
            raise QuotaFilterError(ErrorCode.INVALID_REQUEST, "Invalid empty entity type.")
        if entity_type in exact or entity_type in specified:
            raise QuotaFilterError(ErrorCode.INVALID_REQUEST,
                                   f"Entity type {entity_type} cannot appear more than once in the filter.")
        if entity_type not in (USER, CLIENT_ID, IP):
            raise QuotaFilterError(ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {entity_type}")
        if match_type == EXACT:
            if match is None:
                raise QuotaFilterError(ErrorCode.INVALID_REQUEST,
                                       "Request specified MATCH_TYPE_EXACT, but set match string to null.")
            exact[entity_type] = match
        elif match_type in (DEFAULT, SPECIFIED):
            if match is not None:
                name = "MATCH_TYPE_DEFAULT" if match_type == DEFAULT else "MATCH_TYPE_SPECIFIED"
                raise QuotaFilterError(ErrorCode.INVALID_REQUEST,
                                       f"Request specified {name}, but also specified a match string.")
            if match_type == DEFAULT:
                exact[entity_type] = None
            else:
                specified.add(entity_type)
        else:
            raise QuotaFilterError(ErrorCode.UNSUPPORTED_VERSION, f"Unknown match type {match_type}")
    named = set(exact) | specified
    if IP in named and named & {USER, CLIENT_ID}:
        raise QuotaFilterError(ErrorCode.INVALID_REQUEST,
                               "Invalid entity filter component combination. IP filter component should not "
                               "be used with user or clientId filter component.")
    out = []
    for entity in sorted(quotas, key=_sort_key):
        names = {p.entity_type: p.entity_name for p in entity}
        if strict and len(names) != len(named):
            continue
        if any(t not in names or names[t] != n for t, n in exact.items()):
            continue
        if any(names.get(t) is None for t in specified):
            continue
        out.append((entity, quotas[entity]))
    return out


def _sort_key(entity: Entity):
    return [(p.entity_type, p.entity_name is None, p.entity_name or "") for p in entity]


# ------------------------------------------------------------------- precedence


@dataclass(frozen=True, slots=True)
class Resolved:
    """The quota a (user, client-id) gets for one key: its bound (None: unlimited) and the
    metric tags (user, client-id) whose rate is measured against it."""
    bound: float | None
    tags: tuple[str, str]


def _levels(user: str, client_id: str):
    """(entity, tags) in Kafka's precedence order."""
    u, du = EntityPart(USER, user), EntityPart(USER, None)
    c, dc = EntityPart(CLIENT_ID, client_id), EntityPart(CLIENT_ID, None)
    pair, alone, shared = (user, client_id), (user, ""), ("", client_id)
    return (((c, u), pair), ((dc, u), pair), ((u,), alone), ((c, du), pair), ((dc, du), pair),
            ((du,), alone), ((c,), shared), ((dc,), shared))


def resolve(quotas: Mapping[Entity, Mapping[str, float]], user: str, client_id: str, key: str) -> Resolved:
    if quotas:  # (no quotas at all is the common case)
        for entity, tags in _levels(user, client_id):
            value = quotas.get(entity, {}).get(key)
            if value is not None:
                return Resolved(value, tags)
    return Resolved(None, ("", client_id))  # unlimited, measured per client-id (Kafka's default tags)


def ip_connection_rate(quotas: Mapping[Entity, Mapping[str, float]], ip: str) -> float | None:
    """connection_creation_rate for a client address: its own `ip` entity, else the `<default>`
    ip entity, else None (no quota), as Kafka's ConnectionQuotas reads them."""
    for name in (ip, None):
        value = quotas.get((EntityPart(IP, name),), {}).get(CONNECTION_CREATION_RATE)
        if value is not None:
            return value
    return None
