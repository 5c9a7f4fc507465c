"""Three real `python -m raftkafka node --roles controller` processes on loopback.

Appends commit; kill -9 of the leader → a new leader commits and nothing
committed is lost; the old leader, restarted far behind (the others have
snapshotted and cleaned their logs), catches up through a snapshot. Finally
every node's data dir is read back to prove each acknowledged entry is there.
"""
from __future__ import annotations

import os

import msgpack
import pytest
import trio

from raft.node_storage import NodeStorage
from raftkafka.bench.raft_quorum import LocalCluster
from storage.env import RealFileSystem

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SETTINGS = {
    # Small snapshots and segments so that log cleaning happens within the test.
    "metadata.log.max.record.bytes.between.snapshots": "4000",
    "metadata.log.segment.bytes": "4096",
}


async def committed_sequence(data_dir: str) -> list[bytes]:
    """Snapshot payloads + the non-control entries after it, as stored on disk."""
    storage = NodeStorage(RealFileSystem(), data_dir)
    try:
        _, log = await storage.load()
    finally:
        storage.close()
    payloads = list(msgpack.unpackb(log.snapshot)["payloads"]) if log.snapshot else []
    snap_end = log.snapshot_id[0]
    payloads += [e.payload for e in log.entries if e.offset >= snap_end and not e.control]
    return payloads


def is_subsequence(needle: list[bytes], hay: list[bytes]) -> bool:
    it = iter(hay)
    return all(any(x == y for y in it) for x in needle)


async def test_failover_catch_up_and_no_committed_entry_lost(tmp_path):
    acked: list[bytes] = []
    with LocalCluster(3, base_dir=str(tmp_path), settings=SETTINGS) as cluster:
        try:
            cluster.format()
            cluster.start_all()
            first = await cluster.describe(timeout=30)
            assert first.leader_id in (1, 2, 3)

            async def append_batch(tag: str, i: int, nodes=None):
                batch = [f"{tag}-{i}-{j}".encode() * 4 for j in range(5)]
                reply = await cluster.append(batch, nodes=nodes, timeout=30)
                assert reply.last_offset >= 0
                acked.extend(batch)

            for i in range(30):
                await append_batch("a", i)

            # kill -9 the leader: a new one must take over and commit.
            old = first.leader_id
            survivors = [n for n in (1, 2, 3) if n != old]
            cluster.kill(old)
            with trio.fail_after(30):
                await append_batch("b", 0, nodes=survivors)
            second = await cluster.describe(nodes=survivors)
            assert second.leader_id in survivors and second.epoch > first.epoch

            # Enough new data that the survivors snapshot and clean their logs.
            for i in range(1, 80):
                await append_batch("b", i, nodes=survivors)

            # The old leader comes back far behind and catches up.
            cluster.start(old)
            with trio.fail_after(40):
                while True:
                    view = await cluster.describe(nodes=survivors)
                    ends = {r.replica_id: r.log_end_offset for r in view.voters}
                    if ends[old] >= view.high_watermark > 0:
                        break
                    await trio.sleep(0.2)
            await append_batch("c", 0)
        finally:
            cluster.stop()
        old_log = open(cluster.log_path(old), encoding="utf-8", errors="replace").read()
        assert "installed snapshot" in old_log, "the restarted leader should have caught up via a snapshot"
        assert "Traceback" not in old_log

        sequences = {n: await committed_sequence(cluster.data_dir(n)) for n in (1, 2, 3)}
    for n, seq in sequences.items():
        # Every acknowledged entry is on every node, in the order it was acknowledged.
        assert is_subsequence(acked, seq), f"node {n} lost committed entries"
    # Committed prefixes agree across nodes.
    shortest = min(len(s) for s in sequences.values())
    assert len({tuple(s[:shortest]) for s in sequences.values()}) == 1
    assert os.path.exists(cluster.data_dir(old))
