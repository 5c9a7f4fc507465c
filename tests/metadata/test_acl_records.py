"""CreateAcls/DeleteAcls as controller operations, and ACLs through replay and snapshots."""
from __future__ import annotations

import random

from metadata.controller.acls import create_acls, delete_acls
from metadata.delta import MetadataDelta
from metadata.image import EMPTY_IMAGE
from metadata.records import AccessControlEntry, RemoveAccessControlEntry, decode_record, encode_record
from metadata.snapshot import image_to_records
from wire.acl_codes import AclBinding, AclFilter, AclOperation as Op, AclPermission as Perm, PatternType as Pat
from wire.acl_codes import ResourceType as Res
from wire.error_codes import ErrorCode as E

READ_T = AclBinding(Res.TOPIC, "t", Pat.LITERAL, "User:a", "*", Op.READ, Perm.ALLOW)
WRITE_P = AclBinding(Res.TOPIC, "p-", Pat.PREFIXED, "User:b", "*", Op.WRITE, Perm.ALLOW)


def _apply(image, records):
    delta = MetadataDelta(image)
    for rec in records:
        delta.replay(decode_record(encode_record(rec)))  # through the log's encoding
    return delta.apply()


def test_create_stores_new_bindings_once_and_refuses_invalid_ones():
    rng = random.Random(1)
    bad = READ_T._replace(pattern_type=Pat.MATCH)
    records, results = create_acls(EMPTY_IMAGE, [READ_T, bad, READ_T, WRITE_P], rng=rng)
    assert [r.error for r in results] == [E.NONE, E.INVALID_REQUEST, E.NONE, E.NONE]
    assert results[1].message == "Invalid patternType"
    assert all(isinstance(r, AccessControlEntry) for r in records) and len(records) == 2
    image = _apply(EMPTY_IMAGE, records)
    again, results = create_acls(image, [READ_T], rng=rng)
    assert again == [] and results[0].error == E.NONE  # already there: nothing written


def test_delete_removes_every_match_once_and_reports_it_per_filter():
    records, _ = create_acls(EMPTY_IMAGE, [READ_T, WRITE_P], rng=random.Random(2))
    image = _apply(EMPTY_IMAGE, records)
    removals, results = delete_acls(image, [AclFilter(Res.TOPIC), AclFilter(principal="User:a"),
                                            AclFilter(operation=0)])
    assert sorted(results[0].deleted) == sorted([READ_T, WRITE_P]) and results[1].deleted == [READ_T]
    assert results[2].error == E.INVALID_REQUEST
    assert len(removals) == 2 and all(isinstance(r, RemoveAccessControlEntry) for r in removals)
    assert _apply(image, removals).acls == {}


def test_acls_survive_a_snapshot():
    records, _ = create_acls(EMPTY_IMAGE, [READ_T, WRITE_P], rng=random.Random(3))
    image = _apply(EMPTY_IMAGE, records)
    restored = _apply(EMPTY_IMAGE, list(image_to_records(image)))
    assert restored.acls == image.acls
