"""ACL churn: CreateAcls / DeleteAcls through the real Admin client, under faults.

The bindings come from a fixed pool that mixes what the authorizer must get right: LITERAL,
PREFIXED and wildcard (`*`, `User:*`) patterns, ALLOW and DENY on overlapping resources, host
matching, and ALL. The authorization checker (simulations.checkers.authorization) asks a fixed
set of questions about exactly these principals, hosts and resources on every broker and
compares the answers with the authorizer run over the replayed committed log.
"""
from __future__ import annotations

from raftkafka.client import Admin, KafkaError
from simulations.workloads.clients import AdminChangeProcess
from wire.acl_codes import (
    CLUSTER_NAME, AclBinding, AclFilter, AclOperation as Op, AclPermission, PatternType, ResourceType as Res,
)

__all__ = ["AclChurnProcess", "ACL_POOL", "QUESTIONS"]

_ALLOW, _DENY = AclPermission.ALLOW, AclPermission.DENY
_LIT, _PRE = PatternType.LITERAL, PatternType.PREFIXED

ACL_POOL: tuple[AclBinding, ...] = (
    AclBinding(Res.TOPIC, "data-", _PRE, "User:alice", "*", Op.READ, _ALLOW),
    AclBinding(Res.TOPIC, "data-0", _LIT, "User:alice", "*", Op.READ, _DENY),
    AclBinding(Res.TOPIC, "*", _LIT, "User:bob", "*", Op.DESCRIBE, _ALLOW),
    AclBinding(Res.TOPIC, "da", _PRE, "User:*", "10.0.0.2", Op.WRITE, _DENY),
    AclBinding(Res.TOPIC, "data-1", _LIT, "User:bob", "10.0.0.1", Op.ALL, _ALLOW),
    AclBinding(Res.TOPIC, "other", _PRE, "User:carol", "*", Op.ALTER_CONFIGS, _ALLOW),
    AclBinding(Res.GROUP, "sim-", _PRE, "User:alice", "*", Op.READ, _ALLOW),
    AclBinding(Res.GROUP, "sim-group", _LIT, "User:bob", "*", Op.ALL, _DENY),
    AclBinding(Res.CLUSTER, CLUSTER_NAME, _LIT, "User:carol", "*", Op.ALTER, _ALLOW),
    AclBinding(Res.CLUSTER, CLUSTER_NAME, _LIT, "User:carol", "10.0.0.2", Op.DESCRIBE, _DENY),
    AclBinding(Res.TRANSACTIONAL_ID, "tx", _PRE, "User:carol", "*", Op.WRITE, _ALLOW),
)

_PRINCIPALS = ("User:alice", "User:bob", "User:carol")
_HOSTS = ("10.0.0.1", "10.0.0.2")
_RESOURCES = ((Res.TOPIC, "data-0"), (Res.TOPIC, "data-1"), (Res.TOPIC, "other-topic"), (Res.GROUP, "sim-group"),
              (Res.CLUSTER, CLUSTER_NAME), (Res.TRANSACTIONAL_ID, "tx-1"))
_OPERATIONS = (Op.READ, Op.WRITE, Op.DESCRIBE, Op.ALTER, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS)

# (principal, host, operation, resource type, resource name): what every broker is asked.
QUESTIONS: tuple[tuple[str, str, int, int, str], ...] = tuple(
    (p, h, op, rtype, name) for p in _PRINCIPALS for h in _HOSTS for rtype, name in _RESOURCES for op in _OPERATIONS)


class AclChurnProcess(AdminChangeProcess):
    """Adds or removes one binding of the pool at a time (removing by an exact filter)."""

    async def change(self, admin: Admin):
        binding = self.rng.choice(ACL_POOL)
        if self.rng.random() < 0.55:
            op = self.history.invoke(self.name, "create_acl", _describe(binding))
            try:
                results = await admin.create_acls([binding])
                # An answer that names no result for it (a broken node) leaves it unknown.
                return op, results[0] if results else "answered without a result"
            except KafkaError as e:
                return op, e
        op = self.history.invoke(self.name, "delete_acl", _describe(binding))
        try:
            await admin.delete_acls([AclFilter(*binding)])
        except KafkaError as e:
            return op, e
        return op, None


def _describe(b: AclBinding) -> str:
    return (f"{Res(b.resource_type).name}:{b.resource_name}:{PatternType(b.pattern_type).name} "
            f"{b.principal}@{b.host} {Op(b.operation).name} {AclPermission(b.permission).name}")
