"""Deliberate authorization bugs patched into the real node code, for the mutation tests.

Each mutation is a function taking pytest's `monkeypatch`; the full-cluster simulation (its
ACL churn and authorization checker) must find each within a bounded number of seeds.
Nothing here is a switch in node code: the bug exists only while the test patches it in.
"""
from __future__ import annotations

import broker.authorization
from metadata.authorizer import AclIndex
from wire.acl_codes import PatternType


def broker_index_ignores_prefixed_acls(monkeypatch) -> None:
    """A broker's ACL index, rebuilt from each replayed image, leaves PREFIXED ACLs out: the
    images stay equal to the log (the metadata checker sees nothing), the decisions do not."""

    def index(b):
        acls = b.metadata.image.acls
        if b.acl_index is None or b.acl_index.source is not acls:
            kept = {k: rec for k, rec in acls.items() if rec.pattern_type != PatternType.PREFIXED}
            b.acl_index = AclIndex(kept)
            b.acl_index.source = acls
        return b.acl_index

    monkeypatch.setattr(broker.authorization, "_index", index)


def broker_acl_index_not_rebuilt(monkeypatch) -> None:
    """A broker keeps the ACL index it first built and never rebuilds it for a newer image
    (a cache keyed wrongly): after ACLs change, and across controller failovers, it decides by
    old ACLs while its image already holds the new ones."""

    def index(b):
        if b.acl_index is None:
            b.acl_index = AclIndex(b.metadata.image.acls)
        return b.acl_index

    monkeypatch.setattr(broker.authorization, "_index", index)


ACL_MUTATIONS = {
    "broker_index_ignores_prefixed_acls": broker_index_ignores_prefixed_acls,
    "broker_acl_index_not_rebuilt": broker_acl_index_not_rebuilt,
}
