import functools

import pytest
import trio
import trio.testing

from raftkafka.client.cluster import Cluster, parse_bootstrap
from raftkafka.client.connection import BrokerConnection
from raftkafka.client.errors import KafkaConnectionError, KafkaTimeoutError, UnsupportedVersionError
from tests.client.memnet import MemEnv
from tests.client.mini_broker import MiniCluster
from wire.error_codes import ErrorCode
from wire.protocol import (API_VERSIONS, ApiKey, ApiVersionsResponse, FrameReader, MetadataRequest,
                           decode_request, encode_response)


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
    conn.broker_versions[ApiKey.PRODUCE] = (11, 12)
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


async def connect_to_silent_broker(nursery) -> BrokerConnection:
    """A connection (request timeout 2 s) to a broker that answers the ApiVersions handshake
    and then never again."""
    env = MemEnv()
    mini = MiniCluster(env)

    async def serve(stream):
        data = await stream.receive_some(65536)
        header, body = decode_request(data[4:])
        await stream.send_all(encode_response(header, await mini.on_api_versions(1, body, header.api_version)))
        await trio.sleep_forever()

    await nursery.start(env.net.serve, "slow", 1, serve)
    return await BrokerConnection.open(env, nursery, "slow", 1, request_timeout=2.0)


async def test_request_timeout_closes_connection(nursery, autojump_clock):
    conn = await connect_to_silent_broker(nursery)
    with pytest.raises(KafkaTimeoutError):
        await conn.request(MetadataRequest(topics=[]))
    assert conn.closed


async def test_api_versions_falls_back_when_broker_lacks_our_version(nursery):
    # An older broker answers an unknown ApiVersions version in v0 with UNSUPPORTED_VERSION
    # and its own range; we retry with its highest version.
    env = MemEnv()
    seen_versions = []

    async def old_broker(stream):
        reader = FrameReader()
        while data := await stream.receive_some(65536):
            reader.feed(data)
            for frame in reader:
                header, body = decode_request(frame)
                seen_versions.append(header.api_version)
                keys = [ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=2),
                        ApiVersionsResponse.ApiVersion(api_key=3, min_version=0, max_version=4)]
                if header.api_version > 2:
                    reply = encode_response(header.correlation_id, ApiVersionsResponse(
                        error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=keys), version=0)
                else:
                    reply = encode_response(header, ApiVersionsResponse(error_code=0, api_keys=keys,
                                                                        throttle_time_ms=0))
                await stream.send_all(reply)

    await nursery.start(env.net.serve, "old", 1, old_broker)
    conn = await BrokerConnection.open(env, nursery, "old", 1)
    assert seen_versions == [3, 2]
    assert conn.version_for(ApiKey.METADATA) == 4
    assert not conn.supports(ApiKey.PRODUCE)
    await conn.aclose()


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


async def test_watchdog_times_out_each_request_at_its_own_deadline(nursery, autojump_clock):
    # One watchdog per connection replaces a timer per request: a long-poll request
    # (request timeout + its own wait) is not cut at the plain request timeout, and the
    # request that times out gets KafkaTimeoutError while the others pending on the
    # closed connection get KafkaConnectionError.
    conn = await connect_to_silent_broker(nursery)
    outcomes = {}

    async def ask(name, extra, delay):
        await trio.sleep(delay)
        try:
            await conn.request(MetadataRequest(topics=[]), timeout=extra)
        except Exception as exc:  # noqa: BLE001 - the outcome is what is checked
            outcomes[name] = (type(exc), trio.current_time())

    start = trio.current_time()
    async with trio.open_nursery() as n:
        n.start_soon(ask, "long", 5.0, 0.0)   # due at +7
        n.start_soon(ask, "short", 0.0, 1.0)  # due at +3: the first to be overdue
    assert outcomes["short"] == (KafkaTimeoutError, pytest.approx(start + 3.0))
    assert outcomes["long"] == (KafkaConnectionError, pytest.approx(start + 3.0))
    assert conn.closed


async def test_send_hands_each_answer_to_its_callback_in_order(nursery):
    env, mini = await start(nursery)
    mini.create_topic("a", 1)
    mini.create_topic("b", 2)
    conn = await BrokerConnection.open(env, nursery, "b1", 9092)
    answers = []
    done = trio.Event()

    def on_done(name, response, error):
        answers.append((name, None if response is None else len(response.topics[0].partitions), error))
        if len(answers) == 3:
            done.set()

    for name in ["a", "b", "a"]:
        await conn.send(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)]),
                        functools.partial(on_done, name))
    await done.wait()
    assert answers == [("a", 1, None), ("b", 2, None), ("a", 1, None)]
    await conn.aclose()


async def test_send_callbacks_get_the_timeout_and_the_connection_loss_once(nursery, autojump_clock):
    conn = await connect_to_silent_broker(nursery)
    outcomes = []
    await conn.send(MetadataRequest(topics=[]), lambda response, error: outcomes.append(("first", response, error)))
    await trio.sleep(1.0)
    await conn.send(MetadataRequest(topics=[]), lambda response, error: outcomes.append(("second", response, error)))
    await trio.sleep(10.0)
    assert [(name, response, type(error)) for name, response, error in outcomes] == [
        ("first", None, KafkaTimeoutError), ("second", None, KafkaConnectionError)]
    assert conn.closed
    with pytest.raises(KafkaConnectionError):  # a closed connection refuses at once; no callback
        await conn.send(MetadataRequest(topics=[]), lambda response, error: outcomes.append(("late", error)))
    assert len(outcomes) == 2


async def test_a_send_cancelled_while_waiting_for_room_closes_the_connection(nursery, autojump_clock):
    # Part of the frame may be out: the stream is out of step for good, so the connection
    # closes; the cancelled caller gets Cancelled (not its callback), the others a connection error.
    client, server = trio.testing.lockstep_stream_pair()  # send_all waits until the peer reads
    conn = BrokerConnection(MemEnv(), "stuck", 1, request_timeout=60.0)
    conn._stream = client
    conn.broker_versions = {ApiKey.METADATA: API_VERSIONS[ApiKey.METADATA]}
    nursery.start_soon(conn._read_loop)
    nursery.start_soon(conn._watch_deadlines)

    async def read_one_request_then_stall():
        reader = FrameReader()
        while not list(reader):
            reader.feed(await server.receive_some(65536))
        await trio.sleep_forever()

    nursery.start_soon(read_one_request_then_stall)
    first = []
    await conn.send(MetadataRequest(topics=[]), lambda response, error: first.append(error))
    second = []
    with trio.move_on_after(1.0) as scope:
        await conn.send(MetadataRequest(topics=[]), lambda response, error: second.append(error))
    assert scope.cancelled_caught
    assert conn.closed
    assert [type(e) for e in first] == [KafkaConnectionError] and second == []


class _HeldStream(trio.abc.Stream):
    """A stream whose first send waits until told to finish; reads never return."""

    def __init__(self):
        self.let_first_send_finish = trio.Event()
        self.sends = 0

    async def send_all(self, data):
        self.sends += 1
        if self.sends == 1:
            await self.let_first_send_finish.wait()
        await trio.lowlevel.checkpoint()

    async def wait_send_all_might_not_block(self):
        await trio.lowlevel.checkpoint()

    async def receive_some(self, max_bytes=None):
        await trio.sleep_forever()

    async def aclose(self):
        await trio.lowlevel.checkpoint()


async def test_a_sender_cancelled_as_it_is_handed_the_send_turn_passes_it_on(nursery, autojump_clock):
    # B waits for A's send; A finishes and hands the turn to B, and B is cancelled before it
    # runs: B must give the turn up again, or every later send on the connection hangs.
    stream = _HeldStream()
    conn = BrokerConnection(MemEnv(), "held", 1, request_timeout=60.0)
    conn._stream = stream
    conn.broker_versions = {ApiKey.METADATA: API_VERSIONS[ApiKey.METADATA]}
    ignore = lambda response, error: None  # noqa: E731
    b_scope = trio.CancelScope()
    b_cancelled = []

    async def a():
        await conn.send(MetadataRequest(topics=[]), ignore)
        b_scope.cancel()  # the same step as A's hand-off: B is scheduled, not yet running

    async def b():
        with b_scope:
            await conn.send(MetadataRequest(topics=[]), ignore)
        b_cancelled.append(b_scope.cancelled_caught)

    nursery.start_soon(a)
    await trio.testing.wait_all_tasks_blocked()
    nursery.start_soon(b)
    await trio.testing.wait_all_tasks_blocked()
    stream.let_first_send_finish.set()
    await trio.testing.wait_all_tasks_blocked()
    assert b_cancelled == [True] and stream.sends == 1  # B sent nothing
    with trio.fail_after(1.0):
        await conn.send(MetadataRequest(topics=[]), ignore)
    assert stream.sends == 2
