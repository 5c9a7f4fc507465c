"""ACLs as Kafka's wire carries them: the codes (ResourceType, PatternType, AclOperation,
AclPermissionType), a binding, and a Describe/DeleteAcls filter with its matching rule."""
from __future__ import annotations

import enum
from typing import NamedTuple

__all__ = ["ResourceType", "PatternType", "AclOperation", "AclPermission", "WILDCARD", "CLUSTER_NAME",
           "WILDCARD_PRINCIPAL", "AclBinding", "AclFilter"]

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
