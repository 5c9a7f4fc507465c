"""The `acls` command: docs/authorization.md's examples, run against brokers with the
authorizer on (this test's connections are User:ANONYMOUS, a super user here), print exactly
what the page shows; bad flags are one line."""
from __future__ import annotations

import pathlib
import re

import pytest

from metadata.authorizer import AuthorizerSettings
from tests.broker.harness import ThreadedCluster

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "authorization.md"
EXAMPLE = re.compile(r"```console\n\$ python -m raftkafka (acls [^\n]*)\n(.*?)```", re.S)


@pytest.fixture(scope="module")
def secured():
    cluster = ThreadedCluster(1, broker_overrides={"authorizer": AuthorizerSettings(
        enabled=True, super_users=frozenset({"User:ANONYMOUS"}))})
    yield cluster.start()
    cluster.stop()


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.rstrip("\n").split("\n")]


def test_the_documented_examples_print_what_the_page_shows(secured, cli):
    examples = EXAMPLE.findall(DOC.read_text())
    assert len(examples) >= 5
    for command, shown in examples:
        argv = command.replace("localhost:9092", secured).split()
        run = cli(*argv)
        assert run.code == 0, (command, run)
        assert _lines(run.out) == _lines(shown), command


@pytest.mark.parametrize("args,message", [
    (["--add", "--topic", "t"], "You must specify one of: --allow-principal, --deny-principal"),
    (["--add", "--allow-principal", "User:a"], "You must provide at least one resource"),
    (["--add", "--allow-principal", "alice", "--topic", "t"], "is not a principal"),
    (["--add", "--allow-principal", "User:a", "--operation", "Fly", "--topic", "t"], "is not an operation"),
    (["--add", "--allow-principal", "User:a", "--consumer", "--topic", "t"], "With --consumer you must specify a --group"),
    (["--add", "--allow-principal", "User:a", "--operation", "IdempotentWrite", "--topic", "t"],
     "ResourceType TOPIC only supports operations"),
    (["--add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "match"],
     "resource pattern type is not valid when adding ACLs"),
    (["--list", "--resource-pattern-type", "fuzzy"], "is not one of literal, prefixed, any, match"),
])
def test_bad_flags_are_one_line(secured, cli, args, message):
    run = cli("acls", "--bootstrap-server", secured, *args)
    assert run.code != 0 and message in run.err and len(run.err.strip().splitlines()) == 1, run


def test_remove_asks_first(secured, cli):
    assert cli("acls", "--bootstrap-server", secured, "--add", "--allow-principal", "User:q", "--topic", "kept").code == 0
    run = cli("acls", "--bootstrap-server", secured, "--remove", "--topic", "kept", stdin=b"n\n")
    assert "Are you sure you want to delete all ACLs for resource filter" in run.out
    listed = cli("acls", "--bootstrap-server", secured, "--list", "--topic", "kept")
    assert "principal=User:q" in listed.out
    cli("acls", "--bootstrap-server", secured, "--remove", "--topic", "kept", stdin=b"y\n")
    assert cli("acls", "--bootstrap-server", secured, "--list", "--topic", "kept").out == ""


def test_kafka_python_admin_creates_describes_and_deletes_acls(secured):
    from kafka.admin import (
        ACL, ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, KafkaAdminClient, ResourcePattern,
        ResourcePatternFilter, ResourceType,
    )

    admin = KafkaAdminClient(bootstrap_servers=secured)
    try:
        pattern = ResourcePattern(ResourceType.TOPIC, "kp-", ACLResourcePatternType.PREFIXED)
        acl = ACL("User:kp", "*", ACLOperation.READ, ACLPermissionType.ALLOW, pattern)
        created = admin.create_acls([acl])
        assert created["failed"] == [] and len(created["succeeded"]) == 1
        flt = ACLFilter("User:kp", None, ACLOperation.ANY, ACLPermissionType.ANY,
                        ResourcePatternFilter(ResourceType.TOPIC, "kp-x", ACLResourcePatternType.MATCH))
        found, error = admin.describe_acls(flt)
        assert error.errno == 0 and [(a.principal, a.operation, a.resource_pattern.resource_name)
                                     for a in found] == [("User:kp", ACLOperation.READ, "kp-")]
        (_, deleted, error), = admin.delete_acls([flt])
        assert error.errno == 0 and len(deleted) == 1
        assert admin.describe_acls(flt)[0] == []
    finally:
        admin.close()
