"""Benchmark of the Raft metadata quorum: 3 controller processes on loopback.

    python -m raftkafka.bench.raft_quorum [--seconds 5] [--json]

Measures, through the diagnostic append RPC (raft.codec.DiagAppendRequest):
  1. committed records/s with batching (pipelined appends of 100-byte records);
  2. commit latency p50/p99 at 1,000 records/s (one record per append);
  3. failover: kill -9 of the leader → the next committed record (default timeouts).

`LocalCluster` (real `python -m raftkafka node` processes) is shared with the
multi-process tests.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import trio

from raft.codec import DiagAppendRequest, DiagAppendResponse
from raft.messages import DescribeQuorumRequest, DescribeQuorumResponse
from raft.node_client import ConnectionLost, RpcClient, open_client
from storage.env import RealEnv
from wire.error_codes import ErrorCode

__all__ = ["LocalCluster", "free_ports"]


def free_ports(n: int) -> list[int]:
    """n distinct free ports below the ephemeral range (32768+ on Linux), where a client
    socket's local port can never take one between this check and the node's bind."""
    rng = random.Random()
    ports: list[int] = []
    while len(ports) < n:
        port = rng.randrange(20000, 32768)
        if port in ports:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        ports.append(port)
    return ports


class LocalCluster:
    """Formats and runs N controllers as child processes; always `stop()` it (use `with`)."""

    def __init__(self, n: int = 3, *, base_dir: str | None = None, settings: dict[str, str] | None = None):
        self.n = n
        self.own_dir = base_dir is None
        self.base_dir = base_dir or tempfile.mkdtemp(prefix="raftkafka-quorum-")
        self.ports = dict(zip(range(1, n + 1), free_ports(n)))
        # Raft only: committed entries are opaque diagnostics, not metadata records.
        self.settings = {"controller.state.machine": "recording", **(settings or {})}
        self.procs: dict[int, subprocess.Popen] = {}
        self.env = RealEnv()
        self.cluster_id = ""

    def data_dir(self, node_id: int) -> str:
        return os.path.join(self.base_dir, f"node{node_id}")

    def log_path(self, node_id: int) -> str:
        return os.path.join(self.base_dir, f"node{node_id}.log")

    @property
    def voters(self) -> str:
        return ",".join(f"{i}@127.0.0.1:{p}" for i, p in sorted(self.ports.items()))

    def _cli(self, *args: str, **kw) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "raftkafka", *args], capture_output=True, text=True, **kw)

    def format(self) -> None:
        self.cluster_id = self._cli("format", "--random-uuid", check=True).stdout.strip()
        for i in sorted(self.ports):
            self._cli("format", "--cluster-id", self.cluster_id, "--node-id", str(i), "--log-dir",
                      self.data_dir(i), "--initial-voters", self.voters, check=True)

    def start(self, node_id: int) -> None:
        args = [sys.executable, "-m", "raftkafka", "node", "--roles", "controller", "--node-id", str(node_id),
                "--log-dir", self.data_dir(node_id), "--listeners", f"CONTROLLER://127.0.0.1:{self.ports[node_id]}"]
        for name, value in sorted(self.settings.items()):
            args += ["--set", f"{name}={value}"]
        log = open(self.log_path(node_id), "ab")
        self.procs[node_id] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        log.close()

    def start_all(self) -> None:
        for i in sorted(self.ports):
            self.start(i)

    def kill(self, node_id: int) -> None:
        proc = self.procs.pop(node_id, None)
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for node_id, proc in list(self.procs.items()):
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        self.procs.clear()

    def cleanup(self) -> None:
        self.stop()
        if self.own_dir:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def __enter__(self) -> "LocalCluster":
        return self

    def __exit__(self, *exc) -> None:
        self.cleanup()

    # ------------------------------------------------------------ async calls
    async def call(self, node_id: int, request, timeout: float = 5.0):
        async with open_client(self.env, "127.0.0.1", self.ports[node_id], connect_timeout=timeout) as client:
            return await client.call(request, timeout=timeout)

    async def describe(self, *, timeout: float = 20.0, nodes=None) -> DescribeQuorumResponse:
        """The leader's view, asking the given (default: running) nodes until one answers."""
        with trio.fail_after(timeout):
            while True:
                for i in sorted(nodes or self.procs):
                    try:
                        reply = await self.call(i, DescribeQuorumRequest(self.cluster_id), timeout=2.0)
                    except (OSError, ConnectionLost, trio.TooSlowError):
                        continue
                    if isinstance(reply, DescribeQuorumResponse) and reply.error == ErrorCode.NONE:
                        return reply
                await trio.sleep(0.1)

    async def append(self, payloads: list[bytes], *, timeout: float = 20.0, nodes=None) -> DiagAppendResponse:
        """Append through any running node (followers forward), retrying until committed."""
        with trio.fail_after(timeout):
            while True:
                for i in sorted(nodes or self.procs):
                    try:
                        reply = await self.call(i, DiagAppendRequest(self.cluster_id, payloads), timeout=3.0)
                    except (OSError, ConnectionLost, trio.TooSlowError):
                        continue
                    if isinstance(reply, DiagAppendResponse) and reply.error == ErrorCode.NONE:
                        return reply
                await trio.sleep(0.05)


# ---------------------------------------------------------------- benchmark
async def _throughput(cluster: LocalCluster, leader: int, seconds: float, batch: int, pipelines: int) -> float:
    payload = b"r" * 100
    committed = 0
    deadline = trio.current_time() + seconds

    async def worker(client: RpcClient):
        nonlocal committed
        while trio.current_time() < deadline:
            reply = await client.call(DiagAppendRequest(cluster.cluster_id, [payload] * batch), timeout=10)
            if reply.error == ErrorCode.NONE:
                committed += batch

    start = trio.current_time()
    async with open_client(cluster.env, "127.0.0.1", cluster.ports[leader]) as client:
        async with trio.open_nursery() as nursery:
            for _ in range(pipelines):
                nursery.start_soon(worker, client)
    return committed / (trio.current_time() - start)


async def _latency(cluster: LocalCluster, leader: int, seconds: float, rate: int) -> list[float]:
    latencies: list[float] = []
    async with open_client(cluster.env, "127.0.0.1", cluster.ports[leader]) as client:
        async def one(i: int):
            t0 = trio.current_time()
            reply = await client.call(DiagAppendRequest(cluster.cluster_id, [b"l%09d" % i]), timeout=10)
            if reply.error == ErrorCode.NONE:
                latencies.append(trio.current_time() - t0)

        async with trio.open_nursery() as nursery:
            start = trio.current_time()
            for i in range(int(seconds * rate)):
                await trio.sleep_until(start + i / rate)
                nursery.start_soon(one, i)
    return sorted(latencies)


async def _failover(cluster: LocalCluster, rounds: int) -> list[float]:
    """kill -9 the leader, time the next commit, restart it and let it catch up; repeat."""
    times = []
    for _ in range(rounds):
        view = await cluster.describe(timeout=30)
        leader = view.leader_id
        others = [i for i in sorted(cluster.procs) if i != leader]
        t0 = time.monotonic()
        cluster.kill(leader)
        await cluster.append([b"after-failover"], nodes=others, timeout=30)
        times.append(time.monotonic() - t0)
        cluster.start(leader)
        with trio.fail_after(30):
            while True:
                view = await cluster.describe(nodes=others)
                ends = {r.replica_id: r.log_end_offset for r in view.voters}
                if ends[leader] >= view.high_watermark:
                    break
                await trio.sleep(0.1)
    return times


def percentile(sorted_values: list[float], p: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(p / 100 * len(sorted_values)))]


async def run_bench(seconds: float, rounds: int = 3) -> dict:
    with LocalCluster(3) as cluster:
        cluster.format()
        cluster.start_all()
        leader = (await cluster.describe(timeout=30)).leader_id
        await cluster.append([b"warm-up"] * 10)
        rps = await _throughput(cluster, leader, seconds, batch=100, pipelines=16)
        lat = await _latency(cluster, leader, seconds, rate=1000)
        failovers = await _failover(cluster, rounds)
    return {
        "committed_records_per_s": round(rps),
        "commit_latency_ms_p50_at_1k": round(percentile(lat, 50) * 1000, 2),
        "commit_latency_ms_p99_at_1k": round(percentile(lat, 99) * 1000, 2),
        "latency_samples": len(lat),
        "failover_s": [round(t, 3) for t in failovers],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m raftkafka.bench.raft_quorum", description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="duration of each measurement")
    parser.add_argument("--failovers", type=int, default=3, help="kill -9 rounds for the failover figure")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = trio.run(run_bench, args.seconds, args.failovers)
    if args.json:
        print(json.dumps(result))
        return
    print(f"committed records/s (batches of 100 x 100 B): {result['committed_records_per_s']:,}")
    print(f"commit latency at 1k records/s: p50 {result['commit_latency_ms_p50_at_1k']} ms, "
          f"p99 {result['commit_latency_ms_p99_at_1k']} ms ({result['latency_samples']} samples)")
    times = result["failover_s"]
    print(f"failover (kill -9 leader -> next commit): {', '.join(f'{t:.2f}' for t in times)} s "
          f"(median {sorted(times)[len(times) // 2]:.2f} s)")


if __name__ == "__main__":
    main()
