"""ACL bindings as Kafka names them: resource pattern + access control entry, and their filters.

The codes are Kafka's wire codes (ResourceType, PatternType, AclOperation, AclPermissionType).
An ACL is stored as an `AccessControlEntry` metadata record; this module says which records
a Describe/DeleteAcls filter matches and which new bindings CreateAcls must refuse.
"""
from __future__ import annotations

import enum
from typing import NamedTuple

from metadata.records import AccessControlEntry
from wire.security.principal import parse_principal

__all__ = [
    "ResourceType", "PatternType", "AclOperation", "AclPermission", "WILDCARD", "CLUSTER_NAME",
    "WILDCARD_PRINCIPAL", "AclBinding", "AclFilter", "acl_fields", "binding_of", "invalid_binding", "invalid_filter",
]

WILDCARD = "*"  # a LITERAL resource name matching every name; an ACL host matching every host
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only: LITERAL or PREFIXED, name compared exactly
    MATCH = 2  # filters only: every pattern that would apply to the named resource
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermission(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class AclBinding(NamedTuple):
    """One ACL without its id: who (principal, host) may or may not do what to which resources."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int


def acl_fields(obj) -> tuple:
    """The seven ACL fields of any object naming them as AclBinding does (rpc infos, filters)."""
    return tuple(getattr(obj, name) for name in AclBinding._fields)


def binding_of(rec: AccessControlEntry) -> AclBinding:
    return AclBinding(rec.resource_type, rec.resource_name, rec.pattern_type, rec.principal, rec.host,
                      rec.operation, rec.permission_type)


def _known(enum_type: type[enum.IntEnum], code: int) -> bool:
    return code in enum_type._value2member_map_ and code != 0


def invalid_binding(b: AclBinding) -> str | None:
    """Why CreateAcls refuses this binding (INVALID_REQUEST), or None when it may be stored."""
    if not _known(ResourceType, b.resource_type) or b.resource_type == ResourceType.ANY:
        return "Invalid resourceType"
    if b.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return "Invalid patternType"
    if not _known(AclOperation, b.operation) or b.operation == AclOperation.ANY:
        return "Invalid operation"
    if not _known(AclPermission, b.permission) or b.permission == AclPermission.ANY:
        return "Invalid permissionType"
    if not b.resource_name:
        return "Resource name should not be empty"
    if b.resource_type == ResourceType.CLUSTER and b.resource_name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not b.host:
        return "Invalid host"
    try:
        parse_principal(b.principal)
    except ValueError:
        return f"Could not parse principal from `{b.principal}` (no colon is present separating the "\
               "principal type from the principal name)"
    return None


class AclFilter(NamedTuple):
    """A Describe/DeleteAcls filter: ANY codes and None strings match everything."""

    resource_type: int = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: int = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: int = AclOperation.ANY
    permission: int = AclPermission.ANY

    def matches(self, b: AclBinding) -> bool:
        return self._matches_pattern(b) and self._matches_entry(b)

    def _matches_pattern(self, b: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != b.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, b.pattern_type):
            return False
        if self.resource_name is None:
            return True
        if self.pattern_type in (PatternType.ANY, b.pattern_type):
            return self.resource_name == b.resource_name
        # MATCH: the binding's pattern applies to the named resource
        if b.pattern_type == PatternType.LITERAL:
            return b.resource_name in (self.resource_name, WILDCARD)
        return b.pattern_type == PatternType.PREFIXED and self.resource_name.startswith(b.resource_name)

    def _matches_entry(self, b: AclBinding) -> bool:
        return ((self.principal is None or self.principal == b.principal)
                and (self.host is None or self.host == b.host)
                and self.operation in (AclOperation.ANY, b.operation)
                and self.permission in (AclPermission.ANY, b.permission))


def invalid_filter(f: AclFilter) -> str | None:
    """Why a Describe/DeleteAcls filter cannot be used (INVALID_REQUEST), or None."""
    if not _known(ResourceType, f.resource_type):
        return "Unknown resource type in filter"
    if not _known(PatternType, f.pattern_type):
        return "Unknown pattern type in filter"
    if not _known(AclOperation, f.operation):
        return "Unknown operation in filter"
    if not _known(AclPermission, f.permission):
        return "Unknown permission type in filter"
    return None
