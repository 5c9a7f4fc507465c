"""Kafka's StandardAuthorizer decision as a pure function of the ACLs in the metadata image.

`authorize(acls, settings, principal, host, operation, resource_type, resource_name)`:
1. a `super.users` principal is allowed everything;
2. the ACLs that apply to the resource are the LITERAL ones on its name, the LITERAL ones
   on `*`, and the PREFIXED ones on any prefix of its name;
3. of those, an ACL counts when its principal is the caller or `User:*`, its host is the
   caller's address or `*`, and its operation is the one asked, ALL, or — for ALLOW only —
   one that implies it (READ/WRITE/DELETE/ALTER imply DESCRIBE; ALTER_CONFIGS implies
   DESCRIBE_CONFIGS);
4. a counting DENY wins; else a counting ALLOW allows; else, when the resource has no ACL
   at all (for anyone), `allow.everyone.if.no.acl.found` decides; else deny.

The index is built once per image's ACL map (images share unchanged maps), so every node
holding the same committed log decides the same way.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, Mapping

from metadata.acls import (
    WILDCARD, WILDCARD_PRINCIPAL, AclBinding, AclOperation, AclPermission, PatternType, ResourceType,
    binding_of,
)

__all__ = ["AuthorizerSettings", "AclIndex", "authorize", "authorized_operations", "STANDARD_AUTHORIZER",
           "SUPPORTED_OPERATIONS", "AUTHORIZED_OPERATIONS_OMITTED"]

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
AUTHORIZED_OPERATIONS_OMITTED = -(1 << 31)  # Kafka's "not requested" value (Integer.MIN_VALUE)

_IMPLIES_DESCRIBE = frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                               AclOperation.DELETE, AclOperation.ALTER})
_IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})

# The operations that mean something on each resource type (Kafka's AclEntry.supportedOperations),
# reported in the *_authorized_operations bit fields.
_OP = AclOperation
SUPPORTED_OPERATIONS: dict[int, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (_OP.READ, _OP.WRITE, _OP.CREATE, _OP.DESCRIBE, _OP.DELETE, _OP.ALTER,
                         _OP.DESCRIBE_CONFIGS, _OP.ALTER_CONFIGS),
    ResourceType.GROUP: (_OP.READ, _OP.DESCRIBE, _OP.DELETE),
    ResourceType.CLUSTER: (_OP.CREATE, _OP.CLUSTER_ACTION, _OP.DESCRIBE_CONFIGS, _OP.ALTER_CONFIGS,
                           _OP.IDEMPOTENT_WRITE, _OP.ALTER, _OP.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (_OP.DESCRIBE, _OP.WRITE),
}


@dataclass(frozen=True, slots=True)
class AuthorizerSettings:
    """`authorizer.class.name` (enabled), `super.users`, `allow.everyone.if.no.acl.found`."""

    enabled: bool = False
    super_users: frozenset[str] = frozenset()  # "User:admin" strings
    allow_if_no_acl: bool = False


class AclIndex:
    """ACLs keyed by (resource type, pattern type, resource name) for the lookups of step 2."""

    __slots__ = ("source", "_by_resource")

    def __init__(self, acls: Mapping[object, object]):
        self.source = acls  # the image map it was built from (identity = up to date)
        self._by_resource: dict[tuple[int, int, str], list[AclBinding]] = defaultdict(list)
        for rec in acls.values():
            b = binding_of(rec)
            self._by_resource[(b.resource_type, b.pattern_type, b.resource_name)].append(b)

    def applying_to(self, resource_type: int, name: str) -> Iterable[AclBinding]:
        get = self._by_resource.get
        yield from get((resource_type, PatternType.LITERAL, name), ())
        if name != WILDCARD:
            yield from get((resource_type, PatternType.LITERAL, WILDCARD), ())
        for end in range(1, len(name) + 1):
            yield from get((resource_type, PatternType.PREFIXED, name[:end]), ())


def _counts(acl: AclBinding, principal: str, host: str, operation: int) -> bool:
    if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
        return False
    if acl.host != WILDCARD and acl.host != host:
        return False
    if acl.operation == AclOperation.ALL or acl.operation == operation:
        return True
    if acl.permission != AclPermission.ALLOW:
        return False  # a DENY of READ does not deny DESCRIBE
    if operation == AclOperation.DESCRIBE:
        return acl.operation in _IMPLIES_DESCRIBE
    if operation == AclOperation.DESCRIBE_CONFIGS:
        return acl.operation in _IMPLIES_DESCRIBE_CONFIGS
    return False


def authorize(index: AclIndex, settings: AuthorizerSettings, principal: str, host: str,
              operation: int, resource_type: int, resource_name: str) -> bool:
    if not settings.enabled or principal in settings.super_users:
        return True
    allowed = has_acls = False
    for acl in index.applying_to(resource_type, resource_name):
        has_acls = True
        if _counts(acl, principal, host, operation):
            if acl.permission == AclPermission.DENY:
                return False
            allowed = True
    return allowed or (not has_acls and settings.allow_if_no_acl)


def authorized_operations(index: AclIndex, settings: AuthorizerSettings, principal: str, host: str,
                          resource_type: int, resource_name: str) -> int:
    """The bit field (1 << operation code) of what the caller may do to one resource."""
    bits = 0
    for op in SUPPORTED_OPERATIONS.get(resource_type, ()):
        if authorize(index, settings, principal, host, op, resource_type, resource_name):
            bits |= 1 << op
    return bits
