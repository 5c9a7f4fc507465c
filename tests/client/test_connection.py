import pytest
import trio

from raftkafka.client.cluster import Cluster, parse_bootstrap
from raftkafka.client.connection import BrokerConnection
from raftkafka.client.errors import KafkaConnectionError, KafkaTimeoutError, UnsupportedVersionError
from tests.client.memnet import MemEnv
from tests.client.mini_broker import MiniCluster
from wire.protocol import API_VERSIONS, ApiKey, MetadataRequest


async def start(nursery, nodes=(1,), **kw):
    env = MemEnv()
    mini = MiniCluster(env, nodes, **kw)
    await mini.serve_all(nursery)
    return env, mini


async def test_negotiates_highest_common_version(nursery):
    env, mini = await start(nursery)
    conn = await BrokerConnection.open(env, nursery, "b1", 9092)
    assert conn.version_for(ApiKey.PRODUCE) == API_VERSIONS[ApiKey.PRODUCE][1]
    conn.broker_versions[ApiKey.PRODUCE] = (3, 5)
    assert conn.version_for(ApiKey.PRODUCE) == 5
    conn.broker_versions[ApiKey.PRODUCE] = (9, 12)
    with pytest.raises(UnsupportedVersionError):
        conn.version_for(ApiKey.PRODUCE)
    await conn.aclose()


async def test_pipelined_requests_get_their_own_answers(nursery):
    env, mini = await start(nursery)
    mini.create_topic("a", 1)
    mini.create_topic("b", 2)
    conn = await BrokerConnection.open(env, nursery, "b1", 9092)
    results = {}

    async def ask(name):
        resp = await conn.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)]))
        results[name] = len(resp.topics[0].partitions)

    async with trio.open_nursery() as n:
        for name in ["a", "b", "a", "b"]:
            n.start_soon(ask, name)
    assert results == {"a": 1, "b": 2}


async def test_connect_refused_is_a_connection_error(nursery):
    env = MemEnv()
    with pytest.raises(KafkaConnectionError):
        await BrokerConnection.open(env, nursery, "nowhere", 1)


async def test_peer_close_fails_pending_and_later_requests(nursery):
    env, mini = await start(nursery)
    conn = await BrokerConnection.open(env, nursery, "b1", 9092)
    await env.net.reset("b1", 9092)
    with pytest.raises(KafkaConnectionError):
        await conn.request(MetadataRequest(topics=[]))
    assert conn.closed


async def test_request_timeout_closes_connection(nursery, autojump_clock):
    env = MemEnv()

    async def silent(stream):  # answers nothing after ApiVersions
        from tests.client.mini_broker import MiniCluster as M
        m = M(env)
        reader_env = m
        data = await stream.receive_some(65536)
        from wire.protocol import decode_request, encode_response
        header, body = decode_request(data[4:])
        await stream.send_all(encode_response(header, await reader_env.on_api_versions(1, body, header.api_version)))
        await trio.sleep_forever()

    await nursery.start(env.net.serve, "slow", 1, silent)
    conn = await BrokerConnection.open(env, nursery, "slow", 1, request_timeout=2.0)
    with pytest.raises(KafkaTimeoutError):
        await conn.request(MetadataRequest(topics=[]))
    assert conn.closed


def test_parse_bootstrap():
    assert parse_bootstrap("a:1, b:2") == [("a", 1), ("b", 2)]
    assert parse_bootstrap(["[::1]:9092"]) == [("::1", 9092)]
    with pytest.raises(ValueError):
        parse_bootstrap("nohost")
    with pytest.raises(ValueError):
        parse_bootstrap("")


async def test_cluster_bootstraps_skipping_dead_servers_and_finds_leaders(nursery):
    env, mini = await start(nursery, nodes=(1, 2))
    mini.create_topic("t", 4)
    cluster = Cluster(env, nursery, ["dead:1", "b2:9092"])
    info = await cluster.topic("t")
    assert sorted(info.partitions) == [0, 1, 2, 3]
    assert [cluster.leader("t", p) for p in range(4)] == [1, 2, 1, 2]
    assert sorted(cluster.brokers) == [1, 2]
    conn = await cluster.connection(1)
    assert conn.node_id == 1 and conn is await cluster.connection(1)
    await cluster.aclose()


async def test_unknown_topic_raises_after_wait(nursery, autojump_clock):
    env, mini = await start(nursery)
    cluster = Cluster(env, nursery, "b1:9092")
    from raftkafka.client.errors import BrokerResponseError
    with pytest.raises(BrokerResponseError) as info:
        await cluster.topic("missing", wait=1.0)
    assert info.value.code.name == "UNKNOWN_TOPIC_OR_PARTITION"
    await cluster.aclose()
