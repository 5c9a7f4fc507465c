"""StandardAuthorizer semantics: a table of (ACLs, settings, request) → decision."""
from __future__ import annotations

import uuid

import pytest

from metadata.acls import AclOperation as Op, AclPermission as Perm, PatternType as Pat, ResourceType as Res
from metadata.authorizer import AclIndex, AuthorizerSettings, authorize, authorized_operations
from metadata.records import AccessControlEntry

ALICE, BOB = "User:alice", "User:bob"
ON = AuthorizerSettings(enabled=True)


def acl(rtype, name, principal, op, perm=Perm.ALLOW, pattern=Pat.LITERAL, host="*"):
    return AccessControlEntry(uuid.uuid4(), rtype, name, pattern, principal, host, op, perm)


def index(*recs):
    return AclIndex({r.id: r for r in recs})


T = Res.TOPIC
CASES = [
    # (name, acls, settings, principal, host, op, rtype, rname, expected)
    ("no authorizer allows everything", [], AuthorizerSettings(), ALICE, "1.2.3.4", Op.WRITE, T, "t", True),
    ("no ACL, default deny", [], ON, ALICE, "h", Op.READ, T, "t", False),
    ("no ACL, allow.everyone", [], AuthorizerSettings(True, allow_if_no_acl=True), ALICE, "h", Op.READ, T, "t", True),
    ("ACL for someone else: resource has ACLs, deny even with allow.everyone",
     [acl(T, "t", BOB, Op.READ)], AuthorizerSettings(True, allow_if_no_acl=True), ALICE, "h", Op.READ, T, "t", False),
    ("ACL on another resource: allow.everyone still applies",
     [acl(T, "other", BOB, Op.READ)], AuthorizerSettings(True, allow_if_no_acl=True), ALICE, "h", Op.READ, T, "t", True),
    ("super user", [acl(T, "t", ALICE, Op.READ, Perm.DENY)], AuthorizerSettings(True, frozenset({ALICE})),
     ALICE, "h", Op.READ, T, "t", True),
    ("literal allow", [acl(T, "t", ALICE, Op.READ)], ON, ALICE, "h", Op.READ, T, "t", True),
    ("literal allow other op", [acl(T, "t", ALICE, Op.READ)], ON, ALICE, "h", Op.WRITE, T, "t", False),
    ("literal is not a prefix", [acl(T, "t", ALICE, Op.READ)], ON, ALICE, "h", Op.READ, T, "tt", False),
    ("other resource type", [acl(Res.GROUP, "t", ALICE, Op.READ)], ON, ALICE, "h", Op.READ, T, "t", False),
    ("wildcard resource", [acl(T, "*", ALICE, Op.READ)], ON, ALICE, "h", Op.READ, T, "anything", True),
    ("prefixed", [acl(T, "fin-", ALICE, Op.WRITE, pattern=Pat.PREFIXED)], ON, ALICE, "h", Op.WRITE, T, "fin-x", True),
    ("prefixed equal name", [acl(T, "fin-", ALICE, Op.WRITE, pattern=Pat.PREFIXED)], ON, ALICE, "h", Op.WRITE, T,
     "fin-", True),
    ("prefixed not matching", [acl(T, "fin-", ALICE, Op.WRITE, pattern=Pat.PREFIXED)], ON, ALICE, "h", Op.WRITE, T,
     "fi", False),
    ("prefixed '*' is a literal star prefix", [acl(T, "*", ALICE, Op.WRITE, pattern=Pat.PREFIXED)], ON, ALICE, "h",
     Op.WRITE, T, "abc", False),
    ("wildcard principal", [acl(T, "t", "User:*", Op.READ)], ON, ALICE, "h", Op.READ, T, "t", True),
    ("principal mismatch", [acl(T, "t", BOB, Op.READ)], ON, ALICE, "h", Op.READ, T, "t", False),
    ("host exact", [acl(T, "t", ALICE, Op.READ, host="10.0.0.1")], ON, ALICE, "10.0.0.1", Op.READ, T, "t", True),
    ("host mismatch", [acl(T, "t", ALICE, Op.READ, host="10.0.0.1")], ON, ALICE, "10.0.0.2", Op.READ, T, "t", False),
    ("ALL implies READ", [acl(T, "t", ALICE, Op.ALL)], ON, ALICE, "h", Op.READ, T, "t", True),
    ("ALL implies CREATE", [acl(T, "t", ALICE, Op.ALL)], ON, ALICE, "h", Op.CREATE, T, "t", True),
    ("READ implies DESCRIBE", [acl(T, "t", ALICE, Op.READ)], ON, ALICE, "h", Op.DESCRIBE, T, "t", True),
    ("WRITE implies DESCRIBE", [acl(T, "t", ALICE, Op.WRITE)], ON, ALICE, "h", Op.DESCRIBE, T, "t", True),
    ("DELETE implies DESCRIBE", [acl(T, "t", ALICE, Op.DELETE)], ON, ALICE, "h", Op.DESCRIBE, T, "t", True),
    ("ALTER implies DESCRIBE", [acl(T, "t", ALICE, Op.ALTER)], ON, ALICE, "h", Op.DESCRIBE, T, "t", True),
    ("CREATE does not imply DESCRIBE", [acl(T, "t", ALICE, Op.CREATE)], ON, ALICE, "h", Op.DESCRIBE, T, "t", False),
    ("DESCRIBE does not imply READ", [acl(T, "t", ALICE, Op.DESCRIBE)], ON, ALICE, "h", Op.READ, T, "t", False),
    ("ALTER_CONFIGS implies DESCRIBE_CONFIGS", [acl(T, "t", ALICE, Op.ALTER_CONFIGS)], ON, ALICE, "h",
     Op.DESCRIBE_CONFIGS, T, "t", True),
    ("ALTER_CONFIGS does not imply DESCRIBE", [acl(T, "t", ALICE, Op.ALTER_CONFIGS)], ON, ALICE, "h",
     Op.DESCRIBE, T, "t", False),
    ("deny wins over allow", [acl(T, "t", ALICE, Op.READ), acl(T, "t", ALICE, Op.READ, Perm.DENY)], ON, ALICE, "h",
     Op.READ, T, "t", False),
    ("prefixed deny wins over literal allow", [acl(T, "tx", ALICE, Op.READ),
                                               acl(T, "t", ALICE, Op.READ, Perm.DENY, Pat.PREFIXED)],
     ON, ALICE, "h", Op.READ, T, "tx", False),
    ("wildcard deny wins", [acl(T, "t", ALICE, Op.READ), acl(T, "*", "User:*", Op.READ, Perm.DENY)], ON, ALICE, "h",
     Op.READ, T, "t", False),
    ("deny ALL denies READ", [acl(T, "t", ALICE, Op.READ), acl(T, "t", ALICE, Op.ALL, Perm.DENY)], ON, ALICE, "h",
     Op.READ, T, "t", False),
    ("deny READ does not deny DESCRIBE", [acl(T, "t", ALICE, Op.DESCRIBE), acl(T, "t", ALICE, Op.READ, Perm.DENY)],
     ON, ALICE, "h", Op.DESCRIBE, T, "t", True),
    ("deny for other host does not apply", [acl(T, "t", ALICE, Op.READ),
                                            acl(T, "t", ALICE, Op.READ, Perm.DENY, host="9.9.9.9")],
     ON, ALICE, "h", Op.READ, T, "t", True),
    ("deny only: no allow → deny", [acl(T, "t", BOB, Op.READ, Perm.DENY)], ON, ALICE, "h", Op.READ, T, "t", False),
    ("cluster resource", [acl(Res.CLUSTER, "kafka-cluster", ALICE, Op.ALTER)], ON, ALICE, "h", Op.ALTER, Res.CLUSTER,
     "kafka-cluster", True),
    ("idempotent write", [acl(Res.CLUSTER, "kafka-cluster", ALICE, Op.IDEMPOTENT_WRITE)], ON, ALICE, "h",
     Op.IDEMPOTENT_WRITE, Res.CLUSTER, "kafka-cluster", True),
    ("group read", [acl(Res.GROUP, "g", ALICE, Op.READ)], ON, ALICE, "h", Op.READ, Res.GROUP, "g", True),
    ("transactional id write", [acl(Res.TRANSACTIONAL_ID, "tx", ALICE, Op.WRITE)], ON, ALICE, "h", Op.WRITE,
     Res.TRANSACTIONAL_ID, "tx", True),
]


@pytest.mark.parametrize("name,acls,settings,principal,host,op,rtype,rname,expected", CASES,
                         ids=[c[0] for c in CASES])
def test_decision(name, acls, settings, principal, host, op, rtype, rname, expected):
    assert authorize(index(*acls), settings, principal, host, op, rtype, rname) is expected


def test_authorized_operations_bits():
    idx = index(acl(T, "t", ALICE, Op.READ), acl(T, "t", ALICE, Op.ALTER_CONFIGS))
    bits = authorized_operations(idx, ON, ALICE, "h", T, "t")
    assert bits == (1 << Op.READ) | (1 << Op.DESCRIBE) | (1 << Op.ALTER_CONFIGS) | (1 << Op.DESCRIBE_CONFIGS)
    assert authorized_operations(idx, AuthorizerSettings(), ALICE, "h", Res.GROUP, "g") == \
        (1 << Op.READ) | (1 << Op.DESCRIBE) | (1 << Op.DELETE)


# --- filters (Describe/DeleteAcls) and validation (CreateAcls) -------------------------

from metadata.acls import AclBinding, AclFilter, invalid_binding, invalid_filter  # noqa: E402

LIT_T = AclBinding(T, "t", Pat.LITERAL, ALICE, "*", Op.READ, Perm.ALLOW)
PRE_F = AclBinding(T, "f", Pat.PREFIXED, ALICE, "*", Op.READ, Perm.ALLOW)
STAR = AclBinding(T, "*", Pat.LITERAL, BOB, "*", Op.WRITE, Perm.DENY)
FILTER_CASES = [
    ("match all", AclFilter(), [LIT_T, PRE_F, STAR]),
    ("literal exact", AclFilter(T, "t", Pat.LITERAL), [LIT_T]),
    ("any pattern exact name", AclFilter(T, "f", Pat.ANY), [PRE_F]),
    ("match: applies to foo", AclFilter(T, "foo", Pat.MATCH), [PRE_F, STAR]),
    ("match: applies to t", AclFilter(T, "t", Pat.MATCH), [LIT_T, STAR]),
    ("prefixed only", AclFilter(T, None, Pat.PREFIXED), [PRE_F]),
    ("by principal", AclFilter(principal=BOB), [STAR]),
    ("by op", AclFilter(operation=Op.WRITE), [STAR]),
    ("by permission", AclFilter(permission=Perm.ALLOW), [LIT_T, PRE_F]),
    ("other resource type", AclFilter(Res.GROUP), []),
    ("by host", AclFilter(host="1.1.1.1"), []),
]


@pytest.mark.parametrize("name,flt,expected", FILTER_CASES, ids=[c[0] for c in FILTER_CASES])
def test_filter(name, flt, expected):
    assert [b for b in (LIT_T, PRE_F, STAR) if flt.matches(b)] == expected


@pytest.mark.parametrize("binding,reason", [
    (LIT_T, None),
    (LIT_T._replace(resource_type=Res.ANY), "Invalid resourceType"),
    (LIT_T._replace(resource_type=99), "Invalid resourceType"),
    (LIT_T._replace(pattern_type=Pat.MATCH), "Invalid patternType"),
    (LIT_T._replace(pattern_type=Pat.ANY), "Invalid patternType"),
    (LIT_T._replace(operation=Op.ANY), "Invalid operation"),
    (LIT_T._replace(operation=0), "Invalid operation"),
    (LIT_T._replace(permission=Perm.ANY), "Invalid permissionType"),
    (LIT_T._replace(resource_name=""), "Resource name should not be empty"),
    (LIT_T._replace(resource_type=Res.CLUSTER, resource_name="c"), "The only valid name for the CLUSTER"),
    (LIT_T._replace(principal="alice"), "Could not parse principal"),
])
def test_invalid_binding(binding, reason):
    got = invalid_binding(binding)
    assert (got is None) if reason is None else got.startswith(reason)


def test_invalid_filter():
    assert invalid_filter(AclFilter()) is None
    assert invalid_filter(AclFilter(resource_type=0)) is not None
    assert invalid_filter(AclFilter(pattern_type=9)) is not None
    assert invalid_filter(AclFilter(operation=0)) is not None
    assert invalid_filter(AclFilter(permission=0)) is not None
