"""`groups` against real brokers and their group coordinator."""
from __future__ import annotations

import datetime as dt
import time

import pytest

from raftkafka.cli.common import CommandError
from raftkafka.cli.consumer_groups import parse_datetime, plan_reset
from raftkafka.client.blocking import BlockingConsumer


def table(out: str) -> list[dict[str, str]]:
    lines = [line for line in out.splitlines() if line and not line.startswith("Consumer group")]
    header = lines[0].split()
    return [dict(zip(header, line.split())) for line in lines[1:]]


@pytest.fixture
def consumed(cli, brokers, topic_name):
    """A topic with 2 partitions x 3 records, read and committed by group `topic_name`."""
    r = cli("topics", "--bootstrap-server", brokers, "--create", "--topic", topic_name, "--partitions", 2,
            "--replication-factor", 2)
    assert r.code == 0
    r = cli("produce", "--bootstrap-server", brokers, "--topic", topic_name, "--property", "parse.key=true",
            stdin=b"".join(b"k%d\tv%d\n" % (i, i) for i in range(6)))
    assert r.code == 0
    r = cli("consume", "--bootstrap-server", brokers, "--topic", topic_name, "--group", topic_name,
            "--from-beginning", "--max-messages", 6)
    assert r.code == 0
    return topic_name


def test_list_and_describe_lag(cli, brokers, consumed):
    r = cli("groups", "--bootstrap-server", brokers, "--list")
    assert consumed in r.out.splitlines()
    cli("produce", "--bootstrap-server", brokers, "--topic", consumed, stdin=b"x\ny\n")
    r = cli("groups", "--bootstrap-server", brokers, "--describe", "--group", consumed)
    assert r.code == 0 and f"Consumer group '{consumed}' has no active members." in r.out
    rows = table(r.out)
    assert [(row["TOPIC"], row["PARTITION"]) for row in rows] == [(consumed, "0"), (consumed, "1")]
    assert sum(int(row["CURRENT-OFFSET"]) for row in rows) == 6
    assert sum(int(row["LOG-END-OFFSET"]) for row in rows) == 8
    assert sum(int(row["LAG"]) for row in rows) == 2
    assert all(int(row["LOG-END-OFFSET"]) - int(row["CURRENT-OFFSET"]) == int(row["LAG"]) for row in rows)
    assert {row["CONSUMER-ID"] for row in rows} == {"-"}

    r = cli("groups", "--bootstrap-server", brokers, "--describe", "--group", consumed, "--state")
    [state] = table(r.out)
    assert (state["GROUP"], state["STATE"], state["#MEMBERS"]) == (consumed, "Empty", "0")


def test_reset_dry_run_then_execute(cli, brokers, consumed):
    base = ["groups", "--bootstrap-server", brokers, "--reset-offsets", "--group", consumed]
    r = cli(*base, "--topic", consumed, "--to-earliest")
    assert r.code == 0 and [row["NEW-OFFSET"] for row in table(r.out)] == ["0", "0"]
    r = cli("groups", "--bootstrap-server", brokers, "--describe", "--group", consumed)
    assert sum(int(row["CURRENT-OFFSET"]) for row in table(r.out)) == 6  # a dry run changes nothing

    r = cli(*base, "--topic", f"{consumed}:1", "--shift-by", "-100", "--execute")
    assert r.code == 0 and [(row["PARTITION"], row["NEW-OFFSET"]) for row in table(r.out)] == [("1", "0")]
    r = cli("groups", "--bootstrap-server", brokers, "--describe", "--group", consumed)
    offsets = {row["PARTITION"]: row for row in table(r.out)}
    assert offsets["1"]["CURRENT-OFFSET"] == "0" and offsets["1"]["LAG"] == offsets["1"]["LOG-END-OFFSET"]
    assert offsets["0"]["LAG"] == "0"

    r = cli(*base, "--all-topics", "--to-datetime", "2001-01-01T00:00:00Z", "--execute")
    assert [row["NEW-OFFSET"] for row in table(r.out)] == ["0", "0"]
    r = cli(*base, "--all-topics", "--to-datetime", "2999-01-01T00:00:00+00:00", "--execute")
    ends = {row["PARTITION"]: row["LOG-END-OFFSET"] for row in table(
        cli("groups", "--bootstrap-server", brokers, "--describe", "--group", consumed).out)}
    assert {row["PARTITION"]: row["NEW-OFFSET"] for row in table(r.out)} == ends  # nothing that late: the end
    r = cli(*base, "--topic", consumed, "--to-offset", "1", "--execute")
    r = cli("consume", "--bootstrap-server", brokers, "--topic", consumed, "--group", consumed,
            "--max-messages", 4, "--timeout-ms", 20_000)  # includes joining the group
    assert r.code == 0 and len(r.out.splitlines()) == 4  # 2 + 2 left after offset 1 in each partition


def test_reset_refused_while_the_group_is_active(cli, brokers, consumed):
    with BlockingConsumer(brokers, group_id=consumed, client_id="active-one") as consumer:
        consumer.subscribe([consumed])
        deadline = time.monotonic() + 10
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        r = cli("groups", "--bootstrap-server", brokers, "--reset-offsets", "--group", consumed,
                "--topic", consumed, "--to-earliest", "--execute")
        assert r.code == 1 and r.err == (f"error: Assignments can only be reset if the group '{consumed}' is "
                                         "inactive, but the current state is Stable.\n")
        r = cli("groups", "--bootstrap-server", brokers, "--describe", "--group", consumed)
        assert {row["CONSUMER-ID"] != "-" for row in table(r.out)} == {True}  # both partitions assigned
        r = cli("groups", "--bootstrap-server", brokers, "--describe", "--group", consumed, "--members")
        [member] = table(r.out)
        assert member["#PARTITIONS"] == "2" and member["ASSIGNMENT"] == f"{consumed}-0,{consumed}-1"


def test_errors_are_one_line(cli, brokers):
    cases = [
        (["--describe", "--group", "no-such-group"], "Consumer group 'no-such-group' does not exist."),
        (["--describe"], "--describe needs --group"),
        (["--reset-offsets", "--group", "g", "--to-earliest"], "needs --topic or --all-topics"),
        (["--reset-offsets", "--group", "g", "--topic", "t"], "needs one of --to-earliest"),
        (["--reset-offsets", "--group", "g", "--topic", "t:x", "--to-latest"], "partitions must be numbers"),
        (["--reset-offsets", "--group", "g", "--topic", "t", "--to-datetime", "yesterday"], "not an ISO date-time"),
        (["--reset-offsets", "--group", "g", "--topic", "no-such-topic", "--to-latest"], "UNKNOWN_TOPIC"),
        (["--reset-offsets", "--group", "g", "--all-topics", "--to-latest"], "no committed offsets"),
    ]
    for flags, text in cases:
        r = cli("groups", "--bootstrap-server", brokers, *flags)
        assert r.code == 1 and r.err.count("\n") == 1 and text in r.err, (flags, r)
    r = cli("groups", "--bootstrap-server", brokers, "--reset-offsets", "--to-earliest", "--to-latest")
    assert r.code == 2 and "not allowed with argument" in r.err


def test_plan_reset_clamps_and_shifts():
    tps = [("t", 0), ("t", 1)]
    current = {("t", 0): 5, ("t", 1): None}
    earliest = {("t", 0): 2, ("t", 1): 0}
    latest = {("t", 0): 10, ("t", 1): 4}
    assert plan_reset(("earliest", None), current, earliest, latest, {}) == {("t", 0): 2, ("t", 1): 0}
    assert plan_reset(("latest", None), current, earliest, latest, {}) == {("t", 0): 10, ("t", 1): 4}
    assert plan_reset(("current", None), current, earliest, latest, {}) == {("t", 0): 5, ("t", 1): 4}
    assert plan_reset(("shift", -4), current, earliest, latest, {}) == {("t", 0): 2, ("t", 1): 0}
    assert plan_reset(("shift", 3), current, earliest, latest, {}) == {("t", 0): 8, ("t", 1): 4}
    assert plan_reset(("offset", 99), current, earliest, latest, {}) == {("t", 0): 10, ("t", 1): 4}
    assert plan_reset(("datetime", 0), current, earliest, latest, {tps[0]: 7, tps[1]: -1}) == {tps[0]: 7, tps[1]: 4}


def test_parse_datetime():
    assert parse_datetime("2024-01-31T12:00:00.000Z") == 1706702400000
    assert parse_datetime("2024-01-31T13:00:00+01:00") == 1706702400000
    local = dt.datetime(2024, 1, 31, 12, 0).astimezone()
    assert parse_datetime("2024-01-31T12:00:00") == int(local.timestamp() * 1000)
    with pytest.raises(CommandError):
        parse_datetime("31/01/2024")
