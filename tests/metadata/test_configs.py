import pytest

from metadata.config_definitions import ConfigSource
from metadata.controller.dynamic_configs import (
    AlterOp, alter_configs, describe_configs, effective_topic_value, incremental_alter_configs,
)
from metadata.image import BROKER_RESOURCE, TOPIC_RESOURCE
from tests.metadata.helpers import apply, cluster, with_topic
from wire.error_codes import ErrorCode

T = (TOPIC_RESOURCE, "t")
DEFAULT_BROKER = (BROKER_RESOURCE, "")


@pytest.fixture
def img():
    return with_topic(cluster(1), "t", 1, 1, configs={"retention.ms": "1000",
                                                      "cleanup.policy": "compact"})


@pytest.mark.parametrize("name,value,code", [
    ("retention.ms", "abc", ErrorCode.INVALID_CONFIG),
    ("retention.ms", "-2", ErrorCode.INVALID_CONFIG),
    ("segment.bytes", "1000", ErrorCode.INVALID_CONFIG),
    ("cleanup.policy", "delete,shred", ErrorCode.INVALID_CONFIG),
    ("min.cleanable.dirty.ratio", "1.5", ErrorCode.INVALID_CONFIG),
    ("message.timestamp.type", "Now", ErrorCode.INVALID_CONFIG),
    ("compression.type", "brotli", ErrorCode.INVALID_CONFIG),
    ("unclean.leader.election.enable", "yes", ErrorCode.INVALID_CONFIG),
    ("min.insync.replicas", "0", ErrorCode.INVALID_CONFIG),
    ("max.message.bytes", "99999999999", ErrorCode.INVALID_CONFIG),
    ("no.such", "1", ErrorCode.INVALID_CONFIG),
    ("retention.ms", "-1", ErrorCode.NONE),
    ("cleanup.policy", "compact,delete", ErrorCode.NONE),
])
def test_topic_config_validation(img, name, value, code):
    records, res = incremental_alter_configs(img, {T: [(name, AlterOp.SET, value)]})
    assert res[T].code == code
    assert (records == []) == (code != ErrorCode.NONE)


def test_alter_replaces_all_and_incremental_edits(img):
    records, res = alter_configs(img, {T: {"segment.ms": "5000"}})
    new = apply(img, records)
    assert res[T].code == ErrorCode.NONE and new.topic_config("t") == {"segment.ms": "5000"}
    records, _ = incremental_alter_configs(img, {T: [("retention.ms", AlterOp.DELETE, None),
                                                     ("cleanup.policy", AlterOp.APPEND, "delete")]})
    new = apply(img, records)
    assert new.topic_config("t") == {"cleanup.policy": "compact,delete"}
    records, _ = incremental_alter_configs(new, {T: [("cleanup.policy", AlterOp.SUBTRACT,
                                                      "compact")]})
    assert apply(new, records).topic_config("t") == {"cleanup.policy": "delete"}
    _, res = incremental_alter_configs(img, {T: [("retention.ms", AlterOp.APPEND, "5")]})
    assert res[T].code == ErrorCode.INVALID_CONFIG  # APPEND only for lists
    _, res = incremental_alter_configs(img, {(TOPIC_RESOURCE, "nope"): []})
    assert res[(TOPIC_RESOURCE, "nope")].code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    records, res = alter_configs(img, {T: {}}, validate_only=True)
    assert records == [] and res[T].code == ErrorCode.NONE


def test_broker_configs_dynamic_vs_read_only(img):
    records, res = incremental_alter_configs(
        img, {DEFAULT_BROKER: [("log.retention.ms", AlterOp.SET, "777")]})
    assert res[DEFAULT_BROKER].code == ErrorCode.NONE
    _, res = incremental_alter_configs(
        img, {(BROKER_RESOURCE, "1"): [("num.partitions", AlterOp.SET, "3")]})
    assert res[(BROKER_RESOURCE, "1")].code == ErrorCode.INVALID_REQUEST
    _, res = incremental_alter_configs(img, {(BROKER_RESOURCE, "x"): []})
    assert res[(BROKER_RESOURCE, "x")].code == ErrorCode.INVALID_REQUEST


def test_kafkas_dynamic_thread_and_kerberos_settings_are_accepted_per_broker(img):
    """As Kafka (librdkafka's 0081 sets them): stored and described, though nothing here uses them."""
    broker = (BROKER_RESOURCE, "1")
    records, res = alter_configs(img, {broker: {"sasl.kerberos.min.time.before.relogin": "58000",
                                                "background.threads": "9"}})
    assert res[broker].code == ErrorCode.NONE
    _, entries = describe_configs(apply(img, records), broker, ["sasl.kerberos.min.time.before.relogin"])
    assert [(e.name, e.value, e.source) for e in entries] == [
        ("sasl.kerberos.min.time.before.relogin", "58000", ConfigSource.DYNAMIC_BROKER_CONFIG)]
    _, res = alter_configs(img, {broker: {"background.threads": "0"}})
    assert res[broker].code == ErrorCode.INVALID_CONFIG


def test_describe_sources_and_synonyms(img):
    static = {"log.retention.hours": "2", "log.segment.bytes": "2097152", "node.id": "1"}
    records, _ = incremental_alter_configs(
        img, {DEFAULT_BROKER: [("log.cleaner.delete.retention.ms", AlterOp.SET, "5")]})
    img = apply(img, records)
    err, entries = describe_configs(img, T, include_synonyms=True, static=static)
    by = {e.name: e for e in entries}
    assert err.code == ErrorCode.NONE
    assert (by["retention.ms"].value, by["retention.ms"].source) == (
        "1000", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert [s.name for s in by["retention.ms"].synonyms] == [
        "retention.ms", "log.retention.hours", "retention.ms"]
    assert by["retention.ms"].synonyms[1].value == str(2 * 3_600_000)
    assert (by["segment.bytes"].value, by["segment.bytes"].source) == (
        "2097152", ConfigSource.STATIC_BROKER_CONFIG)
    assert by["delete.retention.ms"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    assert (by["max.message.bytes"].value, by["max.message.bytes"].source) == (
        "1048588", ConfigSource.DEFAULT_CONFIG)
    err, entries = describe_configs(img, (BROKER_RESOURCE, "1"),
                                    ["num.partitions", "ssl.keystore.password"],
                                    static={"ssl.keystore.password": "hunter2"})
    pw = entries[1]
    assert entries[0].read_only and pw.sensitive and pw.value is None
    assert pw.source == ConfigSource.STATIC_BROKER_CONFIG
    err, _ = describe_configs(img, (TOPIC_RESOURCE, "missing"))
    assert err.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_effective_topic_values_for_the_controller(img):
    assert effective_topic_value(img, "t", "min.insync.replicas") == 1
    assert effective_topic_value(img, "t", "min.insync.replicas",
                                 {"min.insync.replicas": "2"}) == 2
    assert effective_topic_value(img, "t", "retention.ms") == 1000
    assert effective_topic_value(img, "t", "unclean.leader.election.enable") is False
