"""CreateAcls and DeleteAcls as controller operations: records plus one result per item.

As in Kafka's AclControlManager: a binding that fails validation gets INVALID_REQUEST and
the others still apply; a binding already present succeeds without a new record; each
stored ACL has a fresh uuid (from the controller's seeded rng, so a simulation replays it).
A delete filter removes every stored ACL it matches; an ACL matched by several filters of
one request is reported by each and removed once.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Sequence

from metadata.acls import AclBinding, AclFilter, binding_of, invalid_binding, invalid_filter
from metadata.image import MetadataImage
from metadata.records import AccessControlEntry, RemoveAccessControlEntry
from storage.env import uuid_from_rng
from wire.error_codes import ErrorCode

__all__ = ["AclResult", "DeleteAclsResult", "create_acls", "delete_acls"]


@dataclass(frozen=True, slots=True)
class AclResult:
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None


@dataclass(frozen=True, slots=True)
class DeleteAclsResult:
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    deleted: list[AclBinding] = field(default_factory=list)


def create_acls(image: MetadataImage, bindings: Sequence[AclBinding], *, rng: random.Random,
                ) -> tuple[list[AccessControlEntry], list[AclResult]]:
    present = {binding_of(rec) for rec in image.acls.values()}
    records, results = [], []
    for b in bindings:
        reason = invalid_binding(b)
        if reason is not None:
            results.append(AclResult(ErrorCode.INVALID_REQUEST, reason))
            continue
        if b not in present:
            present.add(b)
            records.append(AccessControlEntry(uuid_from_rng(rng), *b))
        results.append(AclResult())
    return records, results


def delete_acls(image: MetadataImage, filters: Sequence[AclFilter],
                ) -> tuple[list[RemoveAccessControlEntry], list[DeleteAclsResult]]:
    stored = sorted(image.acls.items())  # id order: the same answer on every controller
    removed: set = set()
    records, results = [], []
    for f in filters:
        reason = invalid_filter(f)
        if reason is not None:
            results.append(DeleteAclsResult(ErrorCode.INVALID_REQUEST, reason))
            continue
        deleted = []
        for acl_id, rec in stored:
            b = binding_of(rec)
            if f.matches(b):
                deleted.append(b)
                if acl_id not in removed:
                    removed.add(acl_id)
                    records.append(RemoveAccessControlEntry(acl_id))
        results.append(DeleteAclsResult(deleted=deleted))
    return records, results
