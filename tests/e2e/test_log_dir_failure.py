"""A real node whose log dir stops taking writes halts as a Kafka broker does, and recovers.

The node runs with a file-size limit (RLIMIT_FSIZE, SIGXFSZ ignored), so once the partition's
segment reaches it every write fails with EFBIG — a disk error that works as root too, where
a read-only chmod would not. The produce that hits it is answered KAFKA_STORAGE_ERROR; the
process exits with status 1 and a one-line reason, without the clean-shutdown marker. Started
again without the limit, the node runs the recovery scan and serves every acknowledged record.
"""
from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import threading

import pytest
import trio

from tests.broker import builders as B
from tests.broker.harness import RawClient
from tests.e2e.procs import REPO, Proc, free_base_port, wait_until, write_single_node
from wire.batch_header import iter_batches
from wire.error_codes import ErrorCode as E
from wire.records import SimpleRecord, build_batch, decode_batch

pytestmark = pytest.mark.e2e

FILE_SIZE_LIMIT = 512 << 10
VALUE_SIZE = 24 << 10


class LimitedProc(Proc):
    """A node process whose regular-file writes fail beyond FILE_SIZE_LIMIT bytes."""

    def __init__(self, args: list[str]):
        def limit_file_size():
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of being killed
            resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))

        env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1",
               "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        self.args = args
        self.popen = subprocess.Popen([sys.executable, "-m", "raftkafka", *args], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                      preexec_fn=limit_file_size)
        self.lines = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()


async def _call_until(port: int, request, version: int, accept, timeout: float = 30.0):
    """Send `request` on fresh connections until `accept(response)`; the last response."""
    with trio.fail_after(timeout):
        while True:
            client = await RawClient.connect(port)
            try:
                response = await client.call(request, version)
            finally:
                await client.aclose()
            if accept(response):
                return response
            await trio.sleep(0.2)


async def _produce_until_failure(port: int) -> tuple[dict[int, bytes], object]:
    """Produce acks=1 until a batch fails; the acknowledged records and the failing answer."""
    await _call_until(port, B.create_topic("t"), 4,
                      lambda r: r.topics[0].error_code in (E.NONE, E.TOPIC_ALREADY_EXISTS))
    acked: dict[int, bytes] = {}
    client = await RawClient.connect(port)
    i = 0
    with trio.fail_after(60):
        while True:
            value = b"%06d" % i + b"v" * VALUE_SIZE
            r = B.one_partition(await client.call(B.produce("t", 0, _one_record_batch(value), acks=1), 8))
            if r.error_code in (E.NOT_LEADER_OR_FOLLOWER, E.UNKNOWN_TOPIC_OR_PARTITION, E.LEADER_NOT_AVAILABLE):
                await trio.sleep(0.1)  # the new topic's leader is not there yet
                continue
            if r.error_code != E.NONE:
                return acked, r
            acked[r.base_offset] = value
            i += 1


def _one_record_batch(value: bytes) -> bytes:
    return build_batch([SimpleRecord(None, value)])


async def _fetch_all(port: int, until: int) -> dict[int, bytes]:
    got: dict[int, bytes] = {}
    with trio.fail_after(60):
        while len(got) < until:
            client = await RawClient.connect(port)
            try:
                part = B.one_partition(await client.call(
                    B.fetch([("t", 0, len(got))], max_bytes=8 << 20, partition_max_bytes=8 << 20), 11))
            finally:
                await client.aclose()
            if part.error_code != E.NONE:  # leadership not back yet after the restart
                await trio.sleep(0.2)
                continue
            data = bytes(part.records)
            for pos, _ in iter_batches(data):
                for record in decode_batch(data, pos)[1]:
                    got[record.offset] = record.value
            if not data:
                await trio.sleep(0.1)
    return got


def test_a_write_error_halts_the_node_with_one_line_and_the_restart_recovers(processes, tmp_path):
    base = free_base_port()
    data = tmp_path / "data"
    # The halted incarnation's session must lapse before the next may register (as in Kafka).
    config = write_single_node(str(data), base, ("broker.session.timeout.ms", 2000),
                               ("broker.heartbeat.interval.ms", 300))
    node = LimitedProc(["node", "--config", config])
    processes.procs.append(node)
    node.wait_line("serving Kafka clients")

    acked, failed = trio.run(_produce_until_failure, base)
    assert failed.error_code == E.KAFKA_STORAGE_ERROR, failed
    assert "File too large" in failed.error_message
    assert len(acked) >= 5  # the limit was reached by the partition's segment, not earlier

    assert node.wait(30) == 1
    last = [line for line in node.lines if line.strip()][-1]
    assert last.startswith(f"error: log dir {data} failed: File too large (write {data}/t-0/"), last
    assert last.endswith("; halting"), last
    assert "Traceback" not in node.output()
    assert not (data / ".kafka_cleanshutdown").exists()

    again = processes.node(config)
    again.wait_line("logs recovered after an unclean shutdown")
    again.wait_line("serving Kafka clients")
    got = trio.run(_fetch_all, base, len(acked))
    assert {o: got[o] for o in acked} == acked  # every acknowledged record, at its offset

    again.signal(signal.SIGTERM)
    assert again.wait(60) == 0
    wait_until(lambda: (data / ".kafka_cleanshutdown").exists(), 5, "the clean-shutdown marker")
