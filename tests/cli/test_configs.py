"""`configs` against real brokers."""
from __future__ import annotations

from raftkafka.cli.common import parse_key_values


def dynamic(out: str) -> dict[str, str]:
    return dict(line.split()[0].split("=", 1) for line in out.splitlines()[1:])


def test_alter_and_describe_topic(cli, brokers, topic_name):
    assert cli("topics", "--bootstrap-server", brokers, "--create", "--topic", topic_name).code == 0
    r = cli("configs", "--bootstrap-server", brokers, "--alter", "--entity-type", "topics", "--entity-name",
            topic_name, "--add-config", "retention.ms=60000,cleanup.policy=[compact,delete]")
    assert (r.code, r.out) == (0, f"Completed updating config for topic {topic_name}.\n")
    r = cli("configs", "--bootstrap-server", brokers, "--describe", "--entity-type", "topics",
            "--entity-name", topic_name)
    assert r.out.splitlines()[0] == f"Dynamic configs for topic {topic_name} are:"
    assert dynamic(r.out) == {"retention.ms": "60000", "cleanup.policy": "compact,delete"}
    assert "  retention.ms=60000 sensitive=false source=DYNAMIC_TOPIC_CONFIG" in r.out.splitlines()

    r = cli("configs", "--bootstrap-server", brokers, "--alter", "--topic", topic_name,
            "--delete-config", "retention.ms")
    assert r.code == 0
    r = cli("configs", "--bootstrap-server", brokers, "--describe", "--topic", topic_name)
    assert dynamic(r.out) == {"cleanup.policy": "compact,delete"}

    r = cli("configs", "--bootstrap-server", brokers, "--describe", "--topic", topic_name, "--all")
    assert r.out.splitlines()[0] == f"All configs for topic {topic_name} are:"
    everything = dynamic(r.out)
    assert everything["cleanup.policy"] == "compact,delete" and "segment.bytes" in everything
    assert any(line.endswith("source=DEFAULT_CONFIG") for line in r.out.splitlines())


def test_broker_default_and_per_broker(cli, brokers):
    r = cli("configs", "--bootstrap-server", brokers, "--alter", "--entity-type", "brokers", "--entity-default",
            "--add-config", "log.retention.ms=86400000")
    assert (r.code, r.out) == (0, "Completed updating default config for brokers in the cluster.\n")
    r = cli("configs", "--bootstrap-server", brokers, "--describe", "--broker-defaults")
    assert r.out.splitlines()[0] == "Default configs for brokers in the cluster are:"
    assert dynamic(r.out)["log.retention.ms"] == "86400000"
    r = cli("configs", "--bootstrap-server", brokers, "--alter", "--broker-defaults",
            "--delete-config", "log.retention.ms")
    assert r.code == 0
    r = cli("configs", "--bootstrap-server", brokers, "--describe", "--broker-defaults")
    assert "log.retention.ms" not in dynamic(r.out)
    r = cli("configs", "--bootstrap-server", brokers, "--describe", "--entity-type", "brokers", "--entity-name", 1)
    assert r.code == 0 and r.out.splitlines()[0] == "Dynamic configs for broker 1 are:"


def test_errors_are_one_line(cli, brokers, topic_name):
    assert cli("topics", "--bootstrap-server", brokers, "--create", "--topic", topic_name).code == 0
    cases = [
        (["--describe", "--topic", "no-such-topic"], "UNKNOWN_TOPIC_OR_PARTITION"),
        (["--alter", "--topic", "no-such-topic", "--add-config", "retention.ms=1"], "UNKNOWN_TOPIC_OR_PARTITION"),
        (["--alter", "--topic", topic_name, "--add-config", "no.such.config=1"], "INVALID_CONFIG"),
        (["--alter", "--topic", topic_name, "--add-config", "retention.ms=soon"], "INVALID_CONFIG"),
        (["--alter", "--topic", topic_name], "--alter needs --add-config, --add-config-file and/or --delete-config"),
        (["--describe", "--topic", topic_name, "--add-config", "a=1"], "need --alter"),
        (["--alter", "--topic", topic_name, "--add-config", "a=1", "--delete-config", "a"], "both added and deleted"),
        (["--describe", "--entity-type", "brokers"], "--entity-name (or --entity-default for brokers) is required"),
        (["--describe", "--entity-type", "brokers", "--entity-name", "one"], "broker id must be a number"),
        (["--describe"], "--entity-type is required"),
        (["--describe", "--topic", "a", "--broker", "1"], "name one entity"),
        (["--describe", "--entity-type", "topics", "--entity-default"], "--entity-default only applies to brokers"),
    ]
    for flags, text in cases:
        r = cli("configs", "--bootstrap-server", brokers, *flags)
        assert r.code == 1 and r.err.count("\n") == 1 and text in r.err, (flags, r)


def test_describe_every_topic(cli, brokers, topic_name):
    assert cli("topics", "--bootstrap-server", brokers, "--create", "--topic", topic_name,
               "--config", "retention.ms=1234").code == 0
    r = cli("configs", "--bootstrap-server", brokers, "--describe", "--entity-type", "topics")
    lines = r.out.splitlines()
    at = lines.index(f"Dynamic configs for topic {topic_name} are:")
    assert lines[at + 1].startswith("  retention.ms=1234 ")


def test_parse_key_values_keeps_bracketed_lists():
    assert parse_key_values(["a=1,b=[x,y],c=", "d = 4"], "--add-config") == {"a": "1", "b": "x,y", "c": "", "d": "4"}


def test_client_quotas_as_kafka_configs(cli, brokers):
    """Users and clients: set, pair a user with a client-id, defaults, delete, describe, errors."""
    base = ("configs", "--bootstrap-server", brokers)
    r = cli(*base, "--alter", "--entity-type", "clients", "--entity-name", "cli-app",
            "--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048")
    assert (r.code, r.out) == (0, "Completed updating config for client-id 'cli-app'.\n")
    r = cli(*base, "--alter", "--entity-type", "users", "--entity-name", "cli-user", "--entity-type", "clients",
            "--entity-default", "--add-config", "request_percentage=12.5")
    assert r.out == "Completed updating config for user-principal 'cli-user', the default client-id.\n"
    r = cli(*base, "--alter", "--entity-type", "clients", "--entity-name", "cli-app", "--delete-config",
            "consumer_byte_rate")
    assert r.code == 0
    r = cli(*base, "--describe", "--entity-type", "clients", "--entity-name", "cli-app")
    assert r.out == "Quota configs for client-id 'cli-app' are producer_byte_rate=1024.0\n"
    r = cli(*base, "--describe", "--entity-type", "users", "--entity-name", "cli-user", "--entity-type", "clients",
            "--entity-default")
    assert r.out == "Quota configs for user-principal 'cli-user', the default client-id are request_percentage=12.5\n"
    for args, error in [
        (("--entity-type", "clients", "--entity-name", "x", "--add-config", "bogus=1"),
         "INVALID_REQUEST (Invalid configuration key bogus)"),
        (("--entity-type", "clients", "--entity-name", "x", "--add-config", "producer_byte_rate=-1"),
         "must be a finite, non-negative number"),
        (("--entity-type", "clients", "--add-config", "producer_byte_rate=1"),
         "--alter needs an --entity-name or --entity-default for each --entity-type"),
        (("--entity-type", "clients", "--entity-name", "x", "--entity-type", "topics", "--entity-name", "t",
          "--add-config", "producer_byte_rate=1"), "users, clients and ips cannot be combined with topics or brokers"),
    ]:
        r = cli(*base, "--alter", *args)
        assert r.code == 1 and error in r.err and len(r.err.strip().splitlines()) == 1, r.err
