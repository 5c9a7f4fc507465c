"""Node-to-node traffic on a SASL_PLAINTEXT controller listener, real processes, raw frames.

A 3-node cluster whose controller listener (Raft, controller RPCs) and broker listener are
SASL_PLAINTEXT with `super.users=User:admin`: the nodes log in to each other with the JAAS
entry's username/password and form a quorum. A process that sends Raft or controller frames
without logging in, with a wrong password, or as a user that is not a cluster member gets its
connection closed: no vote is counted, no fetch answered, no broker fenced, and the quorum's
epoch and the brokers' state stay as they were.
"""
from __future__ import annotations

import socket

import pytest
import trio

from metadata.controller.client import ControllerClient, ControllerConnection
from metadata.controller.rpc import BrokerHeartbeatRequest
from raft.messages import DescribeQuorumRequest, FetchRequest, VoteRequest
from raft.node_client import open_client
from raft.rpc_authentication import SaslAuthenticate, SaslAuthenticateResponse, SaslHandshake
from storage.env import RealEnv
from storage.meta_properties import read_meta_properties
from tests.e2e.procs import HOST, Processes, free_base_port
from wire.rpc import FrameDecoder, encode_frame
from wire.security.sasl_config import SaslCredentials

pytestmark = pytest.mark.e2e

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
ADMIN = SaslCredentials("PLAIN", "admin", "admin-secret")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    procs = Processes()
    try:
        base = free_base_port(3)
        data = tmp_path_factory.mktemp("internode") / "data"
        procs.dev(3, base, str(data), "listener.security.protocol.map=PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
                  f"sasl.jaas.config={JAAS}", "super.users=User:admin")
        cluster_id = read_meta_properties(RealEnv().fs, str(data / "node-1")).cluster_id
        yield {"controllers": [base + 1, base + 3, base + 5], "cluster_id": cluster_id}
    finally:
        procs.kill_all()


async def _state(cluster):
    """(leader epoch, leader, unfenced brokers) as an authenticated member sees them."""
    env = RealEnv()
    async with open_client(env, HOST, cluster["controllers"][0], login=ADMIN) as client:
        quorum = await client.call(DescribeQuorumRequest(cluster["cluster_id"]))
    conn = ControllerConnection(env, {i + 1: (HOST, p) for i, p in enumerate(cluster["controllers"])},
                                cluster_id=cluster["cluster_id"], login=ADMIN)
    async with trio.open_nursery() as nursery:
        await nursery.start(conn.run)
        view = await ControllerClient(conn).describe_cluster(timeout_s=10)
        nursery.cancel_scope.cancel()
    return quorum.epoch, quorum.leader_id, sorted(b.broker_id for b in view.brokers if not b.fenced)


def state(cluster):
    return trio.run(_state, cluster)


def _next_frame(sock, decoder):
    """The node's next frame; None once it closes the connection (a reset counts)."""
    while True:
        frame = decoder.next_frame()
        if frame is not None:
            return frame
        try:
            data = sock.recv(65536)
        except ConnectionResetError:
            return None
        if not data:
            return None
        decoder.feed(data)


def attack(port: int, *frames) -> list:
    """Send the frames one by one, each after the answer to the one before; the answers
    received before the node hung up."""
    answers, decoder = [], FrameDecoder()
    with socket.create_connection((HOST, port), timeout=10) as sock:
        for frame in frames:
            try:
                sock.sendall(frame)
            except OSError:
                return answers
            reply = _next_frame(sock, decoder)
            if reply is None:
                return answers
            answers.append(reply.message)
    return answers


def test_members_form_the_quorum(cluster):
    epoch, leader, unfenced = state(cluster)
    assert leader in (1, 2, 3) and unfenced == [1, 2, 3]


def test_frames_without_a_login_get_a_closed_connection_and_change_nothing(cluster):
    before = state(cluster)
    cid = cluster["cluster_id"]
    for port in cluster["controllers"]:
        assert attack(port, encode_frame(VoteRequest(cid, before[0] + 5, 7, 10 ** 9, before[0] + 4), 1)) == []
        assert attack(port, encode_frame(FetchRequest(cid, 7, before[0], 0, 0, 0, 1 << 20), 1)) == []
        assert attack(port, encode_frame(BrokerHeartbeatRequest(cid, 2, 0, 0, want_fence=True), 1)) == []
        assert attack(port, b"\x00\x00\x00\x05garbage") == []
    assert state(cluster) == before


def test_a_wrong_password_or_a_non_member_is_refused(cluster):
    before = state(cluster)
    cid = cluster["cluster_id"]
    port = cluster["controllers"][1]
    wrong = attack(port, encode_frame(SaslHandshake("PLAIN"), 1), encode_frame(SaslAuthenticate(b"\0admin\0nope"), 2),
                   encode_frame(VoteRequest(cid, before[0] + 5, 7, 10 ** 9, before[0] + 4), 3))
    assert isinstance(wrong[-1], SaslAuthenticateResponse) and wrong[-1].error == 58
    assert "Invalid username or password" in wrong[-1].message
    # alice logs in, but only super.users speak for cluster members
    alice = attack(port, encode_frame(SaslHandshake("PLAIN"), 1), encode_frame(SaslAuthenticate(b"\0alice\0alice-secret"), 2),
                   encode_frame(BrokerHeartbeatRequest(cid, 3, 0, 0, want_fence=True), 3))
    assert [type(m).__name__ for m in alice] == ["SaslHandshakeResponse", "SaslAuthenticateResponse"]
    unknown = attack(port, encode_frame(SaslHandshake("SCRAM-SHA-256"), 1))
    assert unknown[0].error == 33 and unknown[0].mechanisms == ["PLAIN"]
    assert state(cluster) == before
