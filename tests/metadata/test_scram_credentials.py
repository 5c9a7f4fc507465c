"""AlterUserScramCredentials as a pure controller function: Kafka's checks, per-user results,
records that replay into the image (and its snapshot) holding keys, never the password."""
from __future__ import annotations

import uuid

import pytest
import trio

from metadata.bootstrap_records import encode_bootstrap_records, read_bootstrap_records
from metadata.controller.scram import ScramDeletion, ScramUpsertion, alter_user_scram_credentials, credential_record
from metadata.delta import MetadataDelta
from metadata.image import EMPTY_IMAGE
from metadata.records import Topic
from metadata.snapshot import image_to_records
from storage.env import write_file_atomic
from storage.memfs import MemFileSystem
from storage.meta_properties import DataDirError
from wire.error_codes import ErrorCode
from wire.security.sasl_scram import ScramClient, ScramCredential, ScramServer, salted_password

SALT = b"salt-salt-salt"


def upsert(name, mechanism=1, iterations=4096, password="pw"):
    hash_name = "sha512" if mechanism == 2 else "sha256"
    return ScramUpsertion(name, mechanism, iterations, SALT, salted_password(hash_name, password, SALT, iterations))


def apply(image, records):
    delta = MetadataDelta(image)
    for r in records:
        delta.replay(r)
    return delta.apply()


def test_upsert_then_login_then_delete():
    records, results = alter_user_scram_credentials(EMPTY_IMAGE, [], [upsert("alice"), upsert("alice", 2)])
    assert results == {"alice": (ErrorCode.NONE, None)} and len(records) == 2
    image = apply(EMPTY_IMAGE, records)
    rec = image.scram[("alice", 1)]
    assert b"pw" not in rec.stored_key + rec.server_key + rec.salt
    assert ("alice", 1) in apply(EMPTY_IMAGE, list(image_to_records(image))).scram  # snapshots keep them
    server = ScramServer("SCRAM-SHA-256", lambda u: ScramCredential(rec.salt, rec.iterations, rec.stored_key,
                                                                      rec.server_key), "sn")
    client = ScramClient("SCRAM-SHA-256", "alice", "pw", "cn")
    client.respond(server.respond(client.respond(server.respond(client.initial()))))
    assert server.complete and client.complete
    records, results = alter_user_scram_credentials(image, [ScramDeletion("alice", 2)], [])
    assert results["alice"] == (ErrorCode.NONE, None)
    assert set(apply(image, records).scram) == {("alice", 1)}


def test_kafkas_checks_fail_the_whole_user():
    image = EMPTY_IMAGE
    records, results = alter_user_scram_credentials(image, [ScramDeletion("bob", 1)], [
        upsert("alice", iterations=100), upsert("alice", 2), upsert("carol", iterations=20000),
        upsert("dave", mechanism=9), upsert("", 1), upsert("erin"), upsert("erin"), upsert("fay")])
    assert results["alice"][0] == ErrorCode.UNACCEPTABLE_CREDENTIAL  # and her valid SHA-512 is not written
    assert results["bob"][0] == ErrorCode.RESOURCE_NOT_FOUND
    assert results["carol"][0] == ErrorCode.UNACCEPTABLE_CREDENTIAL
    assert results["dave"][0] == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert results[""][0] == ErrorCode.UNACCEPTABLE_CREDENTIAL
    assert results["erin"][0] == ErrorCode.DUPLICATE_RESOURCE
    assert results["fay"] == (ErrorCode.NONE, None)
    assert [(r.name, r.mechanism) for r in records] == [("fay", 1)]


def test_bootstrap_records_round_trip_and_a_damaged_file_is_a_data_dir_error():
    fs = MemFileSystem()
    fs.makedirs("/d")
    assert read_bootstrap_records(fs, "/d") == []
    rec = credential_record("admin", 1, 4096, SALT, salted_password("sha256", "pw", SALT, 4096))
    for data, expected in [(encode_bootstrap_records([rec]), [rec]), (b"\xc1garbage", None),
                           (encode_bootstrap_records([Topic("t", uuid.UUID(int=1))]), None)]:
        trio.run(write_file_atomic, fs, "/d/bootstrap.records", data)
        if expected is None:
            with pytest.raises(DataDirError):
                read_bootstrap_records(fs, "/d")
        else:
            assert read_bootstrap_records(fs, "/d") == expected
