"""ACL bindings as Kafka names them: resource pattern + access control entry, and their filters.

The codes and the binding/filter shapes are the wire's (wire.acl_codes, re-exported here).
An ACL is stored as an `AccessControlEntry` metadata record; this module says which records
a Describe/DeleteAcls filter matches and which new bindings CreateAcls must refuse.
"""
from __future__ import annotations

import enum

from metadata.records import AccessControlEntry
from wire.acl_codes import (
    CLUSTER_NAME, WILDCARD, WILDCARD_PRINCIPAL, AclBinding, AclFilter, AclOperation, AclPermission, PatternType,
    ResourceType,
)
from wire.security.principal import parse_principal

__all__ = [
    "ResourceType", "PatternType", "AclOperation", "AclPermission", "WILDCARD", "CLUSTER_NAME",
    "WILDCARD_PRINCIPAL", "AclBinding", "AclFilter", "acl_fields", "binding_of", "invalid_binding", "invalid_filter",
]


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
