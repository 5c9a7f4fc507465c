"""Three controller nodes in one process: real driver, transport and TCP on loopback,
in-memory disks. Also: bad input on the controller listener never hurts a node."""
from __future__ import annotations

import struct
import uuid

import msgpack
import pytest
import trio

from raft.codec import DiagAppendRequest, ErrorResponse
from raft.messages import DescribeQuorumRequest, DescribeQuorumResponse, VoteRequest, VoteResponse
from raft.node_client import open_client
from raftkafka.bench.raft_quorum import free_ports
from raftkafka.node.assembly import ControllerNode
from raftkafka.node.config import load_config
from storage.env import RealEnv
from storage.memfs import MemFileSystem
from storage.java_properties import parse_properties
from storage.meta_properties import MetaProperties, VoterSpec, format_data_dir, uuid_to_str
from wire.error_codes import ErrorCode
from wire.rpc import FrameDecoder, encode_frame

CLUSTER = uuid_to_str(uuid.UUID(int=7))


class Cluster:
    def __init__(self, nursery, n=3):
        self.nursery = nursery
        self.ports = dict(zip(range(1, n + 1), free_ports(n)))
        self.voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in self.ports.items())
        self.fs = {i: MemFileSystem() for i in self.ports}
        self.nodes: dict[int, ControllerNode] = {}
        self.scopes: dict[int, trio.CancelScope] = {}

    async def format(self):
        for i, fs in self.fs.items():
            meta = MetaProperties(CLUSTER, i, uuid_to_str(uuid.UUID(int=100 + i)))
            voters = [VoterSpec(n, "127.0.0.1", p) for n, p in self.ports.items()]
            await format_data_dir(fs, "/data", meta, voters)

    async def start(self, i):
        config = load_config({
            "node.id": i, "process.roles": "controller", "log.dirs": "/data",
            "listeners": f"CONTROLLER://127.0.0.1:{self.ports[i]}",
            "controller.quorum.election.timeout.ms": 300, "controller.quorum.fetch.timeout.ms": 600,
            "metadata.log.max.record.bytes.between.snapshots": 2000,
        })
        env = RealEnv(seed=i)
        env.fs = self.fs[i]
        node = self.nodes[i] = ControllerNode(env, config)
        scope = self.scopes[i] = trio.CancelScope()

        async def run(task_status=trio.TASK_STATUS_IGNORED):
            with scope:
                await node.run(task_status=task_status)

        await self.nursery.start(run)

    def crash(self, i):
        self.scopes.pop(i).cancel()
        self.fs[i].crash()

    async def call(self, i, request, timeout=5.0):
        async with open_client(RealEnv(), "127.0.0.1", self.ports[i]) as client:
            return await client.call(request, timeout=timeout)

    async def leader_view(self, nodes=None, timeout=15.0) -> DescribeQuorumResponse:
        with trio.fail_after(timeout):
            while True:
                for i in nodes or sorted(self.scopes):
                    reply = await self.call(i, DescribeQuorumRequest(CLUSTER))
                    if reply.error == ErrorCode.NONE:
                        return reply
                await trio.sleep(0.05)

    async def append(self, payloads, nodes=None, timeout=15.0):
        with trio.fail_after(timeout):
            while True:
                for i in nodes or sorted(self.scopes):
                    reply = await self.call(i, DiagAppendRequest(CLUSTER, payloads))
                    if reply.error == ErrorCode.NONE:
                        return reply
                await trio.sleep(0.05)


@pytest.fixture
async def cluster(nursery):
    c = Cluster(nursery)
    await c.format()
    for i in c.ports:
        await c.start(i)
    yield c
    nursery.cancel_scope.cancel()


async def test_commit_crash_restart_and_catch_up(cluster):
    view = await cluster.leader_view()
    acked = []
    for i in range(20):
        batch = [b"p%03d-%d" % (i, j) * 10 for j in range(3)]
        reply = await cluster.append(batch, nodes=[1 + i % 3])  # followers forward
        assert reply.error == ErrorCode.NONE
        acked += batch
    # Crash a follower's machine (its unsynced writes are lost), write more, bring it back.
    follower = next(i for i in (1, 2, 3) if i != view.leader_id)
    cluster.crash(follower)
    for i in range(20):
        batch = [b"q%03d" % i * 20]
        await cluster.append(batch, nodes=[view.leader_id])
        acked += batch
    await cluster.start(follower)
    with trio.fail_after(15):
        while True:
            v = await cluster.leader_view()
            ends = {r.replica_id: r.log_end_offset for r in v.voters}
            if ends[follower] >= v.high_watermark:
                break
            await trio.sleep(0.05)
    for i in (1, 2, 3):
        sm = cluster.nodes[i].state_machine
        with trio.fail_after(10):
            while len(sm.payloads) < len(acked):
                await trio.sleep(0.02)
        assert sm.payloads[: len(acked)] == acked


async def test_bad_input_gets_error_answers_and_the_node_lives_on(cluster):
    await cluster.leader_view()
    port = cluster.ports[1]
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    decoder = FrameDecoder()

    async def next_frame():
        with trio.fail_after(5):
            while True:
                frame = decoder.next_frame()
                if frame is not None:
                    return frame
                data = await stream.receive_some(65536)
                assert data, "connection closed"
                decoder.feed(data)

    # Not msgpack at all: an error answer, and the connection stays usable.
    await stream.send_all(struct.pack(">I", 3) + b"\xc1\xc1\xc1")
    frame = await next_frame()
    assert isinstance(frame.message, ErrorResponse) and frame.message.error == ErrorCode.INVALID_REQUEST
    # Unknown type, with its correlation id echoed.
    payload = msgpack.packb(["NoSuchThing", 1, 77, []])
    await stream.send_all(struct.pack(">I", len(payload)) + payload)
    frame = await next_frame()
    assert frame.correlation_id == 77 and isinstance(frame.message, ErrorResponse)
    # A field of the wrong type.
    payload = msgpack.packb(["raft.Vote", 1, 78, [CLUSTER, "one", 1, 0, 0, False]])
    await stream.send_all(struct.pack(">I", len(payload)) + payload)
    assert (await next_frame()).correlation_id == 78
    # A foreign cluster id: Kafka's INCONSISTENT_CLUSTER_ID, never passed to the core.
    await stream.send_all(encode_frame(VoteRequest("other-cluster", 99, 5, 10, 9, False), 79))
    frame = await next_frame()
    assert isinstance(frame.message, VoteResponse) and frame.message.error == ErrorCode.INCONSISTENT_CLUSTER_ID
    assert frame.message.granted is False
    # Same connection, a good request still works.
    await stream.send_all(encode_frame(DescribeQuorumRequest(CLUSTER), 80))
    frame = await next_frame()
    assert frame.correlation_id == 80 and isinstance(frame.message, DescribeQuorumResponse)
    # A frame longer than the limit loses framing: answered, then closed.
    await stream.send_all(struct.pack(">I", 0x7FFFFFFF))
    frame = await next_frame()
    assert isinstance(frame.message, ErrorResponse)
    with trio.fail_after(5):
        while await stream.receive_some(65536):
            pass
    await stream.aclose()
    # Garbage from a raw client that hangs up mid-frame.
    s2 = await trio.open_tcp_stream("127.0.0.1", port)
    await s2.send_all(struct.pack(">I", 100) + b"abc")
    await s2.aclose()
    # The node is still serving and the quorum still commits.
    reply = await cluster.append([b"still-alive"], nodes=[1])
    assert reply.error == ErrorCode.NONE
    assert cluster.nodes[1].transport.bad_frames >= 4


async def test_stale_epoch_vote_is_refused(cluster):
    view = await cluster.leader_view()
    async with open_client(RealEnv(), "127.0.0.1", cluster.ports[view.leader_id]) as client:
        # A vote at an epoch older than the leader's: refused with the current epoch.
        stale = VoteRequest(CLUSTER, view.epoch - 1, 3 if view.leader_id != 3 else 2, 0, 0, False)
        reply = await client.call(stale, timeout=5)
    assert isinstance(reply, VoteResponse) and not reply.granted
    # FENCED_LEADER_EPOCH, or INVALID_REQUEST when the stale epoch is 0 (its last_epoch is not below it).
    assert reply.epoch >= view.epoch and reply.error in (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.INVALID_REQUEST)
    after = await cluster.leader_view()
    assert after.epoch >= view.epoch
    assert (await cluster.append([b"x"])).error == ErrorCode.NONE


def test_parse_properties_ignores_comments():
    assert parse_properties("#c\n!c\n\na = b\n") == {"a": "b"}
