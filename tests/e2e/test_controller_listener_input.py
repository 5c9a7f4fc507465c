"""What anyone on a PLAINTEXT controller listener (which admits everyone, as Kafka's does)
can send with the cluster's id, and what a node must survive: found after the protocol
fuzzer's runs with `--cluster-id`. Each test runs a one-node `dev` cluster."""
from __future__ import annotations

import os
import pathlib
import socket
import time
import uuid

import pytest
import trio

from raft.messages import MAX_EPOCH, VoteRequest
from storage.env import RealEnv
from storage.meta_properties import read_meta_properties
from tests.e2e.procs import HOST, free_base_port, pid_alive, wait_until
from wire.rpc import encode_frame

pytestmark = pytest.mark.e2e


def _cluster_id(data) -> str:
    return read_meta_properties(RealEnv().fs, str(data / "node-1")).cluster_id


def _send_to_controller(base: int, message) -> None:
    """`message` on a connection of its own to the node's controller listener; it is answered."""
    import raft.codec  # noqa: F401  (registers the Raft messages for encode_frame)

    with socket.create_connection((HOST, base + 1), timeout=10) as s:
        s.sendall(encode_frame(message, 1))
        assert s.recv(4)


def _vote_for_the_last_epoch(base: int, data) -> None:
    _send_to_controller(base, VoteRequest(_cluster_id(data), MAX_EPOCH, 99, 10**9, MAX_EPOCH - 1))


def test_a_vote_for_the_last_epoch_leaves_the_node_running(processes, tmp_path):
    """The node campaigned for epoch 2^31, failed to write it into its log and exited. Now it
    keeps running, says why its quorum can elect no more, and keeps serving its partitions."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    base = free_base_port()
    data = tmp_path / "data"
    _, pids = processes.dev(1, base, str(data))
    bootstrap = f"{HOST}:{base}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("kept", 1)])["kept"].result(30)
    _vote_for_the_last_epoch(base, data)
    log = data / "node-1" / "node.log"
    wait_until(lambda: "is the last an int32 holds" in log.read_text(), 30, "the epoch warning")
    time.sleep(3)  # several election timeouts of a one-node quorum

    assert pid_alive(pids[1])
    assert "Traceback" not in log.read_text()
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 30000})
    delivered = []
    producer.produce("kept", value=b"after", partition=0, on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(30) == 0 and delivered == [None]
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition("kept", 0, 0)])
    got = []
    deadline = time.monotonic() + 30
    while not got and time.monotonic() < deadline:
        got = [m.value() for m in consumer.consume(1, 0.5) if m.error() is None]
    consumer.close()
    assert got == [b"after"]


def test_a_registration_with_an_id_past_int32_leaves_metadata_answering(processes, tmp_path):
    """A broker id of 2^62 registered and heartbeated (so unfenced) made every Metadata answer
    fail to encode: no client could do anything. Now the registration is refused."""
    import metadata.controller.rpc as rpc
    from confluent_kafka.admin import AdminClient

    base = free_base_port()
    data = tmp_path / "data"
    _, pids = processes.dev(1, base, str(data))
    cluster_id = _cluster_id(data)
    endpoint = rpc.EndpointInfo("PLAINTEXT", "127.0.0.1", 1234, 0)
    _send_to_controller(base, rpc.BrokerRegistrationRequest(cluster_id, 1 << 62, uuid.uuid4(), [endpoint], None, []))
    _send_to_controller(base, rpc.BrokerHeartbeatRequest(cluster_id, 1 << 62, 5, 10**6))
    admin = AdminClient({"bootstrap.servers": f"{HOST}:{base}"})
    assert sorted(admin.list_topics(timeout=10).brokers) == [1]
    assert pid_alive(pids[1]) and "Traceback" not in (data / "node-1" / "node.log").read_text()


def test_an_admin_request_too_large_to_forward_is_refused_at_once(processes, tmp_path):
    """A 70 MB AlterUserScramCredentials (the fuzzer's case 56809 of seed 20261131) fits a
    Kafka request (100 MiB) but not the controller listener's frame (64 MiB): the controller
    closed each forwarding connection unread, and the broker sent it again until its 30 s
    passed. Now the broker answers INVALID_REQUEST at once, and the node serves on."""
    from tests.broker.harness import RawClient
    from wire.protocol import AlterUserScramCredentialsRequest as A, ApiVersionsRequest

    base = free_base_port()
    _, pids = processes.dev(1, base, str(tmp_path / "data"))
    upsertions = [A.ScramCredentialUpsertion(name=f"user-{i}", mechanism=1, iterations=4096, salt=b"s" * 16,
                                             salted_password=bytes(70_000)) for i in range(1000)]

    async def check():
        client = await RawClient.connect(base)
        started = time.monotonic()
        answer = await client.call(A(deletions=[], upsertions=upsertions), 0, timeout=60)
        assert time.monotonic() - started < 20  # not the forward's 30 s
        assert {r.error_code for r in answer.results} == {42}  # INVALID_REQUEST, each user
        assert (await client.call(ApiVersionsRequest(), 0)).error_code == 0

    trio.run(check)
    assert pid_alive(pids[1])


def test_requests_forwarded_while_no_controller_leads_leave_one_connection(processes, tmp_path):
    """With no controller leading (here: the quorum raised to the last epoch), every
    forwarded request retried until its timeout, and concurrent retries each opened a
    connection to the controller listener, of which only the last was kept and closed: a
    three-node fuzz run leaked ~18,000 descriptors in minutes, until the metadata log could
    not open a file and the node halted. Now they share one connection."""
    from tests.broker import builders as B
    from tests.broker.harness import RawClient

    base = free_base_port()
    data = tmp_path / "data"
    _, pids = processes.dev(1, base, str(data))
    _vote_for_the_last_epoch(base, data)

    def sockets() -> int:
        fds = pathlib.Path(f"/proc/{pids[1]}/fd")
        return sum(1 for fd in fds.iterdir() if os.readlink(fd).startswith("socket:"))

    before = sockets()

    async def create(i: int) -> None:
        client = await RawClient.connect(base)
        with trio.move_on_after(1):  # the client gives up; the node keeps forwarding
            await client.call(B.create_topic(f"t{i}", 1), 4)
        await client.stream.aclose()

    async def many() -> None:
        async with trio.open_nursery() as nursery:
            for i in range(200):
                nursery.start_soon(create, i)
                await trio.sleep(0.01)

    trio.run(many)
    time.sleep(8)  # several of the forwards' retries (each up to 5 s per try)
    assert sockets() <= before + 4  # the broker's controller connection, both ends, and slack
    assert pid_alive(pids[1])
