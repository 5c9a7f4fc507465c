"""`produce` and `consume` against real brokers."""
from __future__ import annotations

import re
import signal
import subprocess
import sys

import pytest

from raftkafka.cli.common import CommandError
from raftkafka.cli.console_consumer import RecordFormatter
from raftkafka.cli.console_producer import LineReader
from raftkafka.client.fetcher import ConsumerRecord


def make_topic(cli, brokers, name, partitions=1):
    r = cli("topics", "--bootstrap-server", brokers, "--create", "--topic", name, "--partitions", partitions)
    assert r.code == 0, r


def test_keyed_lines_round_trip(cli, brokers, topic_name):
    make_topic(cli, brokers, topic_name, partitions=3)
    lines = [f"key{i % 5}:value {i}" for i in range(20)]
    r = cli("produce", "--bootstrap-server", brokers, "--topic", topic_name, "--property", "parse.key=true",
            "--property", "key.separator=:", stdin=("\n".join(lines) + "\n").encode())
    assert (r.code, r.out, r.err) == (0, "", "")

    r = cli("consume", "--bootstrap-server", brokers, "--topic", topic_name, "--from-beginning",
            "--max-messages", 20, "--property", "print.key=true", "--property", "print.partition=true")
    assert r.code == 0 and r.err == "Processed a total of 20 messages\n"
    rows = [line.split("\t") for line in r.out.splitlines()]
    assert sorted(f"{key}:{value}" for _, key, value in rows) == sorted(lines)
    partitions_of_key = {}
    for partition, key, value in rows:
        partitions_of_key.setdefault(key, set()).add(partition)
    assert all(len(p) == 1 for p in partitions_of_key.values())  # murmur2: one key, one partition
    for partition in {p for p, _, _ in rows}:  # each partition in the order produced
        numbers = [int(v.split()[1]) for p, _, v in rows if p == partition]
        assert numbers == sorted(numbers)


def test_partition_offset_and_formatter_fields(cli, brokers, topic_name):
    make_topic(cli, brokers, topic_name)
    r = cli("produce", "--bootstrap-server", brokers, "--topic", topic_name, "--property", "parse.key=true",
            "--property", "null.marker=NULL", stdin=b"a\t1\nb\t2\nc\tNULL\nNULL\t4")  # no final newline
    assert r.code == 0, r
    r = cli("consume", "--bootstrap-server", brokers, "--topic", topic_name, "--partition", 0, "--offset", 1,
            "--max-messages", 3, "--property", "print.offset=true", "--property", "print.key=true",
            "--property", "print.timestamp=true")
    assert r.code == 0, r
    rows = [line.split("\t") for line in r.out.splitlines()]
    assert [row[1:] for row in rows] == [["Offset:1", "b", "2"], ["Offset:2", "c", "null"],
                                         ["Offset:3", "null", "4"]]
    assert all(row[0].startswith("CreateTime:") and int(row[0].split(":")[1]) > 0 for row in rows)


def test_consume_stops_after_idle_timeout(cli, brokers, topic_name):
    make_topic(cli, brokers, topic_name)
    r = cli("consume", "--bootstrap-server", brokers, "--topic", topic_name, "--timeout-ms", 300)
    assert (r.code, r.out, r.err) == (0, "", "Processed a total of 0 messages\n")


def test_missing_key_separator_stops_with_line_number(cli, brokers, topic_name):
    make_topic(cli, brokers, topic_name)
    r = cli("produce", "--bootstrap-server", brokers, "--topic", topic_name, "--property", "parse.key=true",
            stdin=b"k\tfirst\nno separator here\nk\tthird\n")
    assert (r.code, r.err) == (1, "error: no key separator '\\t' found on line 2\n")
    r = cli("consume", "--bootstrap-server", brokers, "--topic", topic_name, "--from-beginning",
            "--timeout-ms", 500)
    assert r.out == "first\n"  # what came before the bad line was still delivered


def test_unknown_topic_and_bad_flags(cli, brokers):
    r = cli("consume", "--bootstrap-server", brokers, "--topic", "never-created", "--timeout-ms", 100)
    assert r.code == 1 and r.err.startswith("error: topic 'never-created': UNKNOWN_TOPIC_OR_PARTITION")
    cases = [
        ("consume", ["--property", "print.nothing=true"], "unknown --property 'print.nothing'"),
        ("consume", ["--property", "print.key=yes"], "print.key must be true or false"),
        ("consume", ["--offset", "5"], "--offset needs --partition"),
        ("consume", ["--partition", "0", "--offset", "soon"], "--offset must be earliest, latest or a number"),
        ("consume", ["--group", "g", "--partition", "0"], "--partition cannot be used with --group"),
        ("consume", ["--max-messages", "0"], "--max-messages must be at least 1"),
        ("consume", ["--consumer-property", "fetch.max.wait.ms=soon"], "not a valid value"),
        ("produce", ["--property", "parse.key=maybe"], "parse.key must be true or false"),
        ("produce", ["--producer-property", "acks=2"], "acks must be all, -1, 0 or 1"),
        ("produce", ["--compression-codec", "brotli"], "compression must be one of"),
        ("produce", ["--producer-property", "linger.ms"], "is not key=value"),
    ]
    for command, flags, text in cases:
        r = cli(command, "--bootstrap-server", brokers, "--topic", "t", *flags)
        assert r.code == 1 and r.err.count("\n") == 1 and text in r.err, (command, flags, r)


def test_group_resumes_from_committed_offsets(cli, brokers, topic_name):
    make_topic(cli, brokers, topic_name, partitions=2)
    values = [f"v{i}" for i in range(6)]
    assert cli("produce", "--bootstrap-server", brokers, "--topic", topic_name,
               stdin="\n".join(values).encode()).code == 0
    first = cli("consume", "--bootstrap-server", brokers, "--topic", topic_name, "--group", topic_name,
                "--from-beginning", "--max-messages", 6)
    assert first.code == 0 and sorted(first.out.splitlines()) == values
    assert cli("produce", "--bootstrap-server", brokers, "--topic", topic_name, stdin=b"later\n").code == 0
    second = cli("consume", "--bootstrap-server", brokers, "--topic", topic_name, "--group", topic_name,
                 "--from-beginning", "--max-messages", 1, "--timeout-ms", 20_000)
    assert (second.code, second.out) == (0, "later\n")


def test_line_reader():
    reader = LineReader({"parse.key": "true", "key.separator": "::", "null.marker": "~"})
    assert reader.record(b"k::v::w", 1) == (b"k", b"v::w", [])
    assert reader.record(b"~::v", 1) == (None, b"v", [])
    assert reader.record(b"k::~", 1) == (b"k", None, [])
    with pytest.raises(CommandError, match="line 7"):
        reader.record(b"kv", 7)
    assert LineReader({"parse.key": "true", "ignore.error": "true"}).record(b"kv", 1) == (None, b"kv", [])
    assert LineReader({}).record(b"a\tb", 1) == (None, b"a\tb", [])


def test_record_formatter():
    record = ConsumerRecord("t", 2, 17, 1234, 1, None, b"v", (("h", b"x"), ("n", None)))
    everything = RecordFormatter({"print.timestamp": "true", "print.partition": "true", "print.offset": "true",
                                  "print.headers": "true", "print.key": "true", "key.separator": "|",
                                  "null.literal": "<null>"})
    assert everything.format(record) == "LogAppendTime:1234|Partition:2|Offset:17|h:x,n:<null>|<null>|v\n"
    assert RecordFormatter({"print.value": "false", "print.key": "true",
                            "line.separator": "\\r\\n"}).format(record) == "null\r\n"


def test_values_only_text_is_each_record_formatted_and_joined():
    values = [b"plain", None, b"", "caf\u00e9".encode(), b"\xff\xfe broken \xc3", b"\xe2\x82", b"tail\xe2\x82\xac"]
    records = [ConsumerRecord("t", 0, i, 0, 0, None, v, ()) for i, v in enumerate(values)]
    for properties in ({}, {"line.separator": "\\r\\n", "null.literal": "\u2205"}, {"line.separator": "\u00a7"}):
        formatter = RecordFormatter(properties)
        assert formatter.values_only
        assert formatter.format_values(records) == "".join(formatter.format(r) for r in records)
    assert not RecordFormatter({"print.key": "true"}).values_only


def test_many_plain_lines_round_trip_in_order(cli, brokers, topic_name):
    make_topic(cli, brokers, topic_name)
    lines = [b"line %05d " % i + b"x" * (i % 300) for i in range(30_000)]  # several 1 MiB blocks
    data = b"\r\n".join(lines[:10]) + b"\r\n" + b"\n".join(lines[10:])  # CRLF lines too, no final newline
    r = cli("produce", "--bootstrap-server", brokers, "--topic", topic_name, stdin=data)
    assert (r.code, r.err) == (0, "")
    r = cli("consume", "--bootstrap-server", brokers, "--topic", topic_name, "--from-beginning",
            "--max-messages", len(lines))
    assert r.code == 0 and r.err == f"Processed a total of {len(lines)} messages\n"
    assert r.out.encode().split(b"\n")[:-1] == lines


def test_default_batches_fit_the_topic_and_refused_records_are_counted(cli, brokers, topic_name):
    # The console's 1 MB batches are held within the topic's max.message.bytes ...
    r = cli("topics", "--bootstrap-server", brokers, "--create", "--topic", topic_name,
            "--config", "max.message.bytes=4000")
    assert r.code == 0, r
    lines = [b"%05d " % i + b"y" * 90 for i in range(2_000)]
    r = cli("produce", "--bootstrap-server", brokers, "--topic", topic_name, stdin=b"\n".join(lines))
    assert (r.code, r.err) == (0, "")
    # ... and a record the broker refuses is reported once and counted. (The batch behind it,
    # if already in flight, fails with it: the idempotent producer then gives up its producer id.)
    r = cli("produce", "--bootstrap-server", brokers, "--topic", topic_name,
            stdin=b"before\n" + b"z" * 5_000 + b"\nafter\n")
    assert r.code == 1 and r.err.count("error: sending to") == 1, r.err
    assert re.search(r"error: [12] of 3 records were not delivered \(.*MESSAGE_TOO_LARGE", r.err), r.err
    r = cli("consume", "--bootstrap-server", brokers, "--topic", topic_name, "--from-beginning",
            "--max-messages", len(lines) + 1)
    assert r.code == 0 and r.out.encode().split(b"\n")[:-1] == lines + [b"before"]


def test_ctrl_c_ends_the_consumer_cleanly(cli, brokers, topic_name):
    """SIGINT stops the loop, not the process: the count is reported and the exit code is 0."""
    make_topic(cli, brokers, topic_name)
    assert cli("produce", "--bootstrap-server", brokers, "--topic", topic_name, stdin=b"one\ntwo\n").code == 0
    child = subprocess.Popen([sys.executable, "-m", "raftkafka", "consume", "--bootstrap-server", brokers,
                              "--topic", topic_name, "--group", topic_name, "--from-beginning"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "one\n" and child.stdout.readline() == "two\n"
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=30)
    finally:
        child.kill()
    assert (child.returncode, out, err) == (0, "", "Processed a total of 2 messages\n")
    r = cli("groups", "--bootstrap-server", brokers, "--describe", "--group", topic_name)
    assert r.out.split("\n")[-2].split()[3] == "2"  # the consumed position was committed on the way out
