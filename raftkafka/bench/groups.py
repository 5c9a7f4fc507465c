"""Group coordinator benchmark: `python -m raftkafka.bench.groups [--nodes 3] [--seconds 5]`.

Against real node processes (`--nodes` combined controller+broker nodes; the
`__consumer_offsets` partitions have RF = min(3, nodes), so a commit is answered only
once its record is replicated to the ISR), speaking the Kafka protocol directly:

1. Rebalance time of a 10-member group: every round all members rejoin with new
   subscription metadata (a new generation), the leader syncs an assignment, and the
   round ends when every member has its SyncGroup answer. This is the coordinator's
   part of a rebalance; a real client adds the time it takes to notice one (its
   heartbeat interval) and to run its callbacks.
2. Offset commit throughput: OffsetCommit requests of one partition each from
   `--connections` concurrent connections (one simple-consumer group each), for
   `--seconds`; commits/s and latency percentiles.

Prints one JSON object.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time

import trio

from raftkafka.bench.raft_quorum import percentile
from raftkafka.bench.replication import ReplicationProcesses
from raftkafka.client.connection import BrokerConnection
from storage.env import RealEnv
from wire.error_codes import ErrorCode
from wire.protocol import (
    FindCoordinatorRequest, JoinGroupRequest, MetadataRequest, OffsetCommitRequest, SyncGroupRequest,
)

MEMBERS = 10
TOPIC_PARTITIONS = 10


def _join(group: str, member_id: str, metadata: bytes) -> JoinGroupRequest:
    return JoinGroupRequest(group_id=group, session_timeout_ms=30_000, rebalance_timeout_ms=30_000,
                            member_id=member_id, group_instance_id=None, protocol_type="consumer",
                            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=metadata)])


def _sync(group: str, generation: int, member_id: str, assignments: dict[str, bytes]) -> SyncGroupRequest:
    S = SyncGroupRequest
    return S(group_id=group, generation_id=generation, member_id=member_id, group_instance_id=None,
             assignments=[S.SyncGroupRequestAssignment(member_id=m, assignment=a) for m, a in assignments.items()])


def _commit(group: str, topic: str, partition: int, offset: int) -> OffsetCommitRequest:
    C = OffsetCommitRequest
    return C(group_id=group, generation_id=-1, member_id="", retention_time_ms=-1, topics=[
        C.OffsetCommitRequestTopic(name=topic, partitions=[C.OffsetCommitRequestPartition(
            partition_index=partition, committed_offset=offset, committed_metadata=None)])])


async def _coordinator(env, nursery, bootstrap: str, group: str) -> tuple[str, int]:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    conn = await BrokerConnection.open(env, nursery, host, int(port))
    try:
        with trio.fail_after(60):
            while True:
                resp = await conn.request(FindCoordinatorRequest(key=group, key_type=0))
                if resp.error_code == ErrorCode.NONE:
                    return resp.host, resp.port
                await trio.sleep(0.1)
    finally:
        await conn.aclose()


async def _until_ok(call, what: str, timeout: float = 60.0):
    """Retry `call()` while the coordinator is moving or loading."""
    retriable = {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                 ErrorCode.NOT_COORDINATOR, ErrorCode.REBALANCE_IN_PROGRESS}
    with trio.fail_after(timeout):
        while True:
            resp = await call()
            if resp.error_code not in retriable:
                if resp.error_code not in (ErrorCode.NONE, ErrorCode.MEMBER_ID_REQUIRED):
                    raise RuntimeError(f"{what}: {ErrorCode(resp.error_code).name}")
                return resp
            await trio.sleep(0.05)


async def rebalance_rounds(env, bootstrap: str, rounds: int) -> list[float]:
    group = "bench-rebalance"
    async with trio.open_nursery() as nursery:
        host, port = await _coordinator(env, nursery, bootstrap, group)
        conns = [await BrokerConnection.open(env, nursery, host, port) for _ in range(MEMBERS)]
        ids = []
        for conn in conns:  # KIP-394: the first JoinGroup only hands out a member id
            first = await _until_ok(lambda c=conn: c.request(_join(group, "", b"0")), "join")
            ids.append(first.member_id)
        times = []
        for round_ in range(rounds + 1):  # round 0 forms the group; it is not timed
            metadata = b"round-%d" % round_
            joined: dict[str, object] = {}
            start = time.perf_counter()

            async def join(conn, member_id):
                joined[member_id] = await conn.request(_join(group, member_id, metadata))

            async with trio.open_nursery() as inner:
                for conn, member_id in zip(conns, ids):
                    inner.start_soon(join, conn, member_id)
            leader = next(iter(joined.values())).leader
            generation = next(iter(joined.values())).generation_id
            if any(r.error_code != ErrorCode.NONE for r in joined.values()):
                raise RuntimeError(f"join round {round_}: {[r.error_code for r in joined.values()]}")
            assignment = {m: b"p%d" % (i % TOPIC_PARTITIONS) for i, m in enumerate(ids)}
            synced = {}

            async def sync(conn, member_id):
                given = assignment if member_id == leader else {}
                synced[member_id] = await conn.request(_sync(group, generation, member_id, given))

            async with trio.open_nursery() as inner:
                for conn, member_id in zip(conns, ids):
                    inner.start_soon(sync, conn, member_id)
            if any(r.error_code != ErrorCode.NONE for r in synced.values()):
                raise RuntimeError(f"sync round {round_}: {[r.error_code for r in synced.values()]}")
            if round_ > 0:
                times.append(time.perf_counter() - start)
        for conn in conns:
            await conn.aclose()
    return times


async def commit_throughput(env, bootstrap: str, seconds: float, connections: int) -> dict:
    latencies: list[float] = []
    async with trio.open_nursery() as nursery:
        deadline = time.perf_counter() + seconds

        async def committer(i: int) -> None:
            group = f"bench-commit-{i}"
            host, port = await _coordinator(env, nursery, bootstrap, group)
            conn = await BrokerConnection.open(env, nursery, host, port)
            await _until_ok(lambda: _commit_error(conn, group, 0), "first commit")
            offset = 1
            while time.perf_counter() < deadline:
                start = time.perf_counter()
                resp = await conn.request(_commit(group, "bench", i % TOPIC_PARTITIONS, offset))
                error = resp.topics[0].partitions[0].error_code
                if error != ErrorCode.NONE:
                    raise RuntimeError(f"commit failed: {ErrorCode(error).name}")
                latencies.append(time.perf_counter() - start)
                offset += 1
            await conn.aclose()

        began = time.perf_counter()
        async with trio.open_nursery() as inner:
            for i in range(connections):
                inner.start_soon(committer, i)
        elapsed = time.perf_counter() - began
    latencies.sort()
    return {"connections": connections, "commits": len(latencies),
            "commits_per_s": round(len(latencies) / elapsed, 1),
            "latency_ms_p50": round(percentile(latencies, 50) * 1000, 2),
            "latency_ms_p99": round(percentile(latencies, 99) * 1000, 2)}


class _Answer:
    def __init__(self, code: int):
        self.error_code = code


async def _commit_error(conn, group: str, offset: int) -> _Answer:
    resp = await conn.request(_commit(group, "bench", 0, offset))
    return _Answer(resp.topics[0].partitions[0].error_code)


async def _wait_for_topic(env, bootstrap: str) -> None:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    async with trio.open_nursery() as nursery:
        conn = await BrokerConnection.open(env, nursery, host, int(port))
        with trio.fail_after(60):
            while True:
                md = await conn.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="bench")],
                                                        allow_auto_topic_creation=True))
                t = md.topics[0]
                if t.error_code == 0 and len(t.partitions) == TOPIC_PARTITIONS and all(
                        p.leader_id >= 0 for p in t.partitions):
                    break
                await trio.sleep(0.2)
        await conn.aclose()


def _wait_for_brokers(bootstrap: str, n: int) -> None:
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})  # quiet while nodes start
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if len(admin.list_topics(timeout=2).brokers) >= n:
                return
        except Exception:  # noqa: BLE001 - still starting
            pass
        time.sleep(0.2)
    raise TimeoutError("brokers did not come up")


def run(nodes: int, seconds: float, rounds: int, connections: int) -> dict:
    rf = min(3, nodes)
    static = {"offsets.topic.num.partitions": "10", "offsets.topic.replication.factor": str(rf),
              # Only the empty group's first rebalance waits (so the 10 members form it together).
              "group.initial.rebalance.delay.ms": "500", "default.replication.factor": str(rf),
              "min.insync.replicas": str(min(2, rf)), "num.partitions": str(TOPIC_PARTITIONS)}
    with tempfile.TemporaryDirectory(prefix="raftkafka-bench-groups-") as base:
        procs = ReplicationProcesses(base, nodes, static=static)
        procs.format()
        for i in procs.ids:
            procs.start(i)
        try:
            _wait_for_brokers(procs.bootstrap, nodes)

            async def main():
                env = RealEnv()
                await _wait_for_topic(env, procs.bootstrap)
                times = await rebalance_rounds(env, procs.bootstrap, rounds)
                commits = await commit_throughput(env, procs.bootstrap, seconds, 1)
                many = await commit_throughput(env, procs.bootstrap, seconds, connections)
                return times, commits, many

            times, commits, many = trio.run(main)
        finally:
            procs.stop_all()
    times.sort()
    return {
        "nodes": nodes, "offsets_rf": rf,
        "rebalance_10_members_ms": {"rounds": len(times), "p50": round(percentile(times, 50) * 1000, 2),
                                    "p99": round(percentile(times, 99) * 1000, 2),
                                    "max": round(times[-1] * 1000, 2)},
        "offset_commit_sequential": commits,
        "offset_commit_concurrent": many,
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--connections", type=int, default=8)
    args = parser.parse_args(argv)
    print(json.dumps(run(args.nodes, args.seconds, args.rounds, args.connections), indent=2))


if __name__ == "__main__":
    main()
