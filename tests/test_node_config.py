"""Node settings added with the node assembly: static broker configs from the node file,
the client listener, advertised.listeners, the metrics endpoint, and the dev port layout."""
from __future__ import annotations

import pytest

from raftkafka.cli.dev import node_layout
from raftkafka.node.config import ConfigError, Listener, load_config
from raftkafka.node.metadata_roles import broker_config

BASE = {"node.id": 1, "process.roles": "broker,controller", "log.dirs": "/d",
        "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"}


def test_kafka_broker_settings_are_validated_and_kept_as_strings():
    config = load_config({**BASE, "num.partitions": 3, "auto.create.topics.enable": False,
                          "log.retention.check.interval.ms": "500", "replica.fetch.max.bytes": 2048})
    assert config.broker_static["num.partitions"] == "3"
    assert config.broker_static["auto.create.topics.enable"] == "false"
    assert config.broker_static["replica.fetch.max.bytes"] == "2048"
    assert config.broker_static["node.id"] == "1"  # node settings that are broker configs too
    bc = broker_config(config, "cluster")
    assert (bc.host, bc.port, bc.listener_name, bc.cluster_id) == ("127.0.0.1", 9092, "PLAINTEXT", "cluster")
    assert bc.retention_check_interval_s == 0.5 and bc.static["num.partitions"] == "3"


@pytest.mark.parametrize("name, value", [
    ("num.partitions", 0), ("log.cleanup.policy", "shred"), ("replica.fetch.max.bytes", "lots"),
    ("metrics.port", -2), ("no.such.setting", 1),
    ("authorizer.class.name", "kafka.security.authorizer.AclAuthorizer"), ("super.users", "admin"),
    ("allow.everyone.if.no.acl.found", "maybe"),
])
def test_a_bad_setting_is_one_line_naming_it(name, value):
    with pytest.raises(ConfigError) as e:
        load_config({**BASE, name: value})
    assert str(e.value).startswith(f"{name}:") or name in str(e.value)
    assert "\n" not in str(e.value)


def test_advertised_listeners_and_the_bound_port():
    config = load_config({**BASE, "listeners": "PLAINTEXT://0.0.0.0:0,CONTROLLER://127.0.0.1:9093"})
    assert config.advertised(config.broker_listener, 41234).port == 41234
    assert config.advertised(config.broker_listener, 41234).host not in ("0.0.0.0", "")
    config = load_config({**BASE, "advertised.listeners": "PLAINTEXT://kafka-1.example:19092"})
    assert config.advertised(config.broker_listener) == Listener("PLAINTEXT", "kafka-1.example", 19092)


def test_metrics_settings_default_off():
    config = load_config(BASE)
    assert (config.metrics_port, config.metrics_host) == (-1, "0.0.0.0")
    assert load_config({**BASE, "metrics.port": "9464"}).metrics_port == 9464


def test_dev_layout_ports_are_predictable_and_the_voters_cover_every_node():
    layouts = [node_layout(i, 3, 9092, "/tmp/x/node-%d" % i) for i in (1, 2, 3)]
    assert [(l.client_port, l.controller_port) for l in layouts] == [(9092, 9093), (9094, 9095), (9096, 9097)]
    for layout in layouts:
        config = load_config(layout.settings)
        assert [(v.node_id, v.port) for v in config.voters] == [(1, 9093), (2, 9095), (3, 9097)]
        assert config.broker_listener.port == layout.client_port
        assert "offsets.topic.replication.factor" not in config.broker_static  # 3 nodes: Kafka's default
    single = load_config(node_layout(1, 1, 9092, "/tmp/y").settings)
    assert single.broker_static["offsets.topic.replication.factor"] == "1"  # as Kafka's quickstart
    with pytest.raises(ConfigError):
        node_layout(1, 3, 65533, "/tmp/z")


def test_the_authorizer_settings_reach_the_broker():
    from metadata.authorizer import STANDARD_AUTHORIZER

    off = broker_config(load_config(BASE), "c").authorizer
    assert not off.enabled
    on = broker_config(load_config({**BASE, "authorizer.class.name": STANDARD_AUTHORIZER,
                                    "super.users": "User:admin;User:CN=node,O=x",
                                    "allow.everyone.if.no.acl.found": "true"}), "c").authorizer
    assert on.enabled and on.allow_if_no_acl and on.super_users == {"User:admin", "User:CN=node,O=x"}


def test_the_quorum_fetch_sizes_reach_raft_kip_1219():
    assert (load_config(BASE).raft_config().fetch_max_bytes, load_config(BASE).raft_config().snapshot_chunk_bytes) \
        == (1024 * 1024, 1024 * 1024)
    raft = load_config({**BASE, "controller.quorum.fetch.max.bytes": "4096",
                        "controller.quorum.fetch.snapshot.max.bytes": 65536}).raft_config()
    assert (raft.fetch_max_bytes, raft.snapshot_chunk_bytes) == (4096, 65536)
    with pytest.raises(ConfigError, match="controller.quorum.fetch.max.bytes"):
        load_config({**BASE, "controller.quorum.fetch.max.bytes": 0})
