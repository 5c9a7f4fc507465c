"""The Kafka console-tool options users reach for first, against real brokers: headers in and
out, --include, formatter options, delete-offsets, reset export/import, --by-duration,
--all-groups, the coordinator column, --add-config-file, get-offsets, --version."""
from __future__ import annotations

import subprocess
import sys

import pytest

from raftkafka.cli.consumer_groups import export_csv, parse_duration_ms, read_reset_csv
from raftkafka.cli.common import CommandError
from raftkafka.client.blocking import BlockingProducer
from tests.cli.test_groups import table


def _create(cli, brokers, topic, partitions=2):
    assert cli("topics", "--bootstrap-server", brokers, "--create", "--topic", topic, "--partitions", partitions,
               "--replication-factor", 2).code == 0


def test_headers_produced_from_lines_and_printed_by_the_formatter(cli, brokers, topic_name):
    _create(cli, brokers, topic_name, 1)
    lines = b"h1:v1,h2:v2\tk1\tone\n" + b"NULL\tk2\ttwo\n" + b"h3,h4:NULL\tNULL\tthree\n"
    r = cli("produce", "--bootstrap-server", brokers, "--topic", topic_name, "--property", "parse.headers=true",
            "--property", "parse.key=true", "--property", "null.marker=NULL", stdin=lines)
    assert r.code == 0, r
    r = cli("consume", "--bootstrap-server", brokers, "--topic", topic_name, "--from-beginning", "--max-messages", 3,
            "--formatter", "org.apache.kafka.tools.consumer.DefaultMessageFormatter",
            "--property", "print.headers=true", "--property", "print.key=true", "--property", "print.offset=true",
            "--property", "print.partition=true", "--property", "key.separator=|", "--property", "null.literal=<nil>",
            "--property", "headers.separator=;", "--property", "print.value=true")
    assert r.code == 0, r
    assert r.out.splitlines() == ["Partition:0|Offset:0|h1:v1;h2:v2|k1|one",
                                  "Partition:0|Offset:1|NO_HEADERS|k2|two",
                                  "Partition:0|Offset:2|h3:<nil>;h4:<nil>|<nil>|three"]
    r = cli("consume", "--bootstrap-server", brokers, "--topic", topic_name, "--from-beginning", "--max-messages", 1,
            "--property", "print.value=false", "--property", "print.timestamp=true", "--property", "line.separator=;;")
    assert r.out.startswith("CreateTime:") and r.out.endswith(";;")
    # A line without the headers delimiter stops the producer unless ignore.error is set.
    r = cli("produce", "--bootstrap-server", brokers, "--topic", topic_name, "--property", "parse.headers=true",
            stdin=b"no-delimiter-here\n")
    assert r.code == 1 and "no headers delimiter" in r.err
    r = cli("consume", "--bootstrap-server", brokers, "--topic", topic_name, "--formatter", "com.example.Fancy")
    assert r.code == 1 and "only Kafka's DefaultMessageFormatter" in r.err


def test_include_reads_every_matching_topic(cli, brokers, topic_name):
    for suffix in ("a", "b", "other"):
        _create(cli, brokers, f"{topic_name}-{suffix}", 1)
        cli("produce", "--bootstrap-server", brokers, "--topic", f"{topic_name}-{suffix}", stdin=suffix.encode() + b"\n")
    r = cli("consume", "--bootstrap-server", brokers, "--include", f"{topic_name}-(a|b)", "--from-beginning",
            "--timeout-ms", 3000, "--skip-message-on-error")
    assert r.code == 0 and sorted(r.out.split()) == ["a", "b"]
    r = cli("consume", "--bootstrap-server", brokers, "--include", "no-such-topic-.*", "--timeout-ms", 100)
    assert r.code == 1 and "no topic matches" in r.err


@pytest.mark.parametrize("group", [False, True], ids=["assigned", "group"])
def test_include_picks_up_a_topic_created_later(cli, brokers, topic_name, group):
    """Topics matching --include that appear while the consumer runs are read from where
    auto.offset.reset says (here the beginning), as Kafka's pattern subscription."""
    _create(cli, brokers, f"{topic_name}-a", 1)
    cli("produce", "--bootstrap-server", brokers, "--topic", f"{topic_name}-a", stdin=b"a\n")
    argv = [sys.executable, "-m", "raftkafka", "consume", "--bootstrap-server", brokers,
            "--include", f"{topic_name}-.*", "--from-beginning", "--max-messages", "2", "--timeout-ms", "30000",
            "--consumer-property", "metadata.max.age.ms=300"] + (["--group", f"{topic_name}-g"] if group else [])
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as consumer:
        try:
            assert consumer.stdout.readline() == b"a\n"  # running, before the second topic exists
            _create(cli, brokers, f"{topic_name}-b", 2)
            cli("produce", "--bootstrap-server", brokers, "--topic", f"{topic_name}-b", stdin=b"b\n")
            out, err = consumer.communicate(timeout=60)
        finally:
            consumer.kill()
    assert consumer.returncode == 0, err
    assert out == b"b\n" and b"Processed a total of 2 messages" in err


@pytest.fixture
def group_with_offsets(cli, brokers, topic_name):
    _create(cli, brokers, topic_name)
    cli("produce", "--bootstrap-server", brokers, "--topic", topic_name, "--property", "parse.key=true",
        stdin=b"".join(b"k%d\tv%d\n" % (i, i) for i in range(10)))
    for group in (f"{topic_name}-g1", f"{topic_name}-g2"):
        assert cli("consume", "--bootstrap-server", brokers, "--topic", topic_name, "--group", group,
                   "--from-beginning", "--max-messages", 10, "--timeout-ms", 20_000).code == 0
    return topic_name


def test_reset_export_then_from_file_across_groups(cli, brokers, group_with_offsets, tmp_path):
    topic = group_with_offsets
    g1, g2 = f"{topic}-g1", f"{topic}-g2"
    base = ["groups", "--bootstrap-server", brokers, "--reset-offsets"]
    r = cli(*base, "--group", g1, "--topic", topic, "--to-offset", 1, "--export")
    assert r.code == 0 and r.out.splitlines() == [f"{topic},0,1", f"{topic},1,1"]  # Kafka's CSV, one group
    r = cli(*base, "--group", g1, "--group", g2, "--topic", f"{topic}:0", "--to-earliest", "--export")
    assert r.out.splitlines() == [f"{g1},{topic},0,0", f"{g2},{topic},0,0"]  # several: a group column
    plan = tmp_path / "plan.csv"
    plan.write_text(f"{topic},0,2\n{topic},1,3\n")
    r = cli(*base, "--group", g1, "--group", g2, "--from-file", plan, "--execute")
    assert r.code == 0
    for group in (g1, g2):
        rows = table(cli("groups", "--bootstrap-server", brokers, "--describe", "--group", group).out)
        assert [row["CURRENT-OFFSET"] for row in rows] == ["2", "3"]
    r = cli(*base, "--group", g1, "--all-topics", "--by-duration", "P1D", "--execute")
    assert [row["NEW-OFFSET"] for row in table(r.out)] == ["0", "0"]  # a day ago: before every record
    r = cli(*base, "--all-groups", "--topic", topic, "--to-latest")
    planned = {row["GROUP"] for row in table(r.out)}
    assert {g1, g2} <= planned

    r = cli("groups", "--bootstrap-server", brokers, "--describe", "--group", g1, "--state")
    [state] = table(r.out)
    assert state["COORDINATOR"].count(":") == 1 and state["(ID)"].strip("()").isdigit()


def test_delete_offsets(cli, brokers, group_with_offsets):
    topic, group = group_with_offsets, f"{group_with_offsets}-g1"
    r = cli("groups", "--bootstrap-server", brokers, "--delete-offsets", "--group", group, "--topic", f"{topic}:1")
    assert r.code == 0, r
    assert f"Request succeed for deleting offsets with topic {topic} group {group}" in r.out
    assert [(row["PARTITION"], row["STATUS"]) for row in table(r.out.split("\n", 1)[1])] == [("1", "Successful")]
    rows = table(cli("groups", "--bootstrap-server", brokers, "--describe", "--group", group).out)
    assert [row["PARTITION"] for row in rows] == ["0"]


def test_add_config_file(cli, brokers, topic_name, tmp_path):
    _create(cli, brokers, topic_name, 1)
    props = tmp_path / "topic.properties"
    # message.format.version: deprecated and without effect in Kafka 3.x, still accepted (librdkafka's 0092 sets it)
    props.write_text("# retention for the test\nretention.ms=60000\nsegment.bytes : 1048576\n"
                     "message.format.version=0.10.0\n")
    r = cli("configs", "--bootstrap-server", brokers, "--alter", "--topic", topic_name, "--add-config-file", props)
    assert r.code == 0, r
    r = cli("configs", "--bootstrap-server", brokers, "--describe", "--topic", topic_name)
    assert "retention.ms=60000" in r.out and "segment.bytes=1048576" in r.out
    assert "message.format.version=0.10.0" in r.out
    r = cli("configs", "--bootstrap-server", brokers, "--alter", "--topic", topic_name, "--add-config-file", props,
            "--add-config", "retention.ms=1")
    assert r.code == 1 and "only one of" in r.err


def test_get_offsets(cli, brokers, topic_name):
    _create(cli, brokers, topic_name, 3)
    with BlockingProducer(brokers) as producer:
        for partition, count in ((0, 2), (2, 5)):
            for _ in range(count):
                producer.send(topic_name, b"v", partition=partition)
        producer.flush()
    r = cli("get-offsets", "--bootstrap-server", brokers, "--topic", topic_name)
    assert r.code == 0 and r.out.splitlines() == [f"{topic_name}:0:2", f"{topic_name}:1:0", f"{topic_name}:2:5"]
    r = cli("get-offsets", "--bootstrap-server", brokers, "--topic", topic_name, "--partitions", "1-2", "--time", -2)
    assert r.out.splitlines() == [f"{topic_name}:1:0", f"{topic_name}:2:0"]
    r = cli("get-offsets", "--bootstrap-server", brokers, "--topic-partitions", f"{topic_name}:2", "--time", "earliest")
    assert r.out.splitlines() == [f"{topic_name}:2:0"]
    r = cli("get-offsets", "--bootstrap-server", brokers, "--topic", topic_name, "--time", "4102444800000")
    assert r.out == ""  # no record that recent: left out, as Kafka's tool does
    r = cli("get-offsets", "--bootstrap-server", brokers, "--topic", topic_name, "--time", "soon")
    assert r.code == 1 and "--time 'soon'" in r.err


def test_version_on_every_command(cli):
    from raftkafka.cli.main import build_parser
    commands = sorted(build_parser()._subparsers._group_actions[0].choices)
    assert {"get-offsets", "groups", "simulate"} <= set(commands)
    for command in commands:
        r = cli(command, "--version")
        assert r.code == 0 and r.out.startswith("raftkafka "), command


def test_reset_csv_and_duration_parsing(tmp_path):
    plans = {"g1": {("t", 0): 5}, "g2": {("t", 1): 7}}
    path = tmp_path / "p.csv"
    path.write_text(export_csv(plans))
    assert read_reset_csv(str(path)) == plans
    path.write_text("t,0,5\nt,x,1\n")
    with pytest.raises(CommandError, match="must be numbers"):
        read_reset_csv(str(path))
    assert [parse_duration_ms(t) for t in ("PT1H30M", "P1DT2H", "PT0.25S", "pt10s")] == [5_400_000, 93_600_000, 250,
                                                                                           10_000]
    for bad in ("1h", "P", "PT", "-PT1S"):
        with pytest.raises(CommandError):
            parse_duration_ms(bad)
