"""Snapshot files, the quorum-state file and meta.properties / bootstrap voters."""
from __future__ import annotations

import random
import uuid

import pytest

from storage.memfs import MemFileSystem
from storage.meta_properties import (
    DataDirError,
    MetaProperties,
    VoterSpec,
    check_data_dir,
    format_data_dir,
    is_valid_uuid,
    read_bootstrap_voters,
    uuid_to_str,
)
from storage.quorum_state_file import CorruptQuorumStateError, QuorumStateFile, StoredElection
from storage.raft_snapshots import CorruptSnapshotError, SnapshotStore, snapshot_name

DIR = "/data/__cluster_metadata-0"
CLUSTER = uuid_to_str(uuid.UUID(int=1))
DIRID = uuid_to_str(uuid.UUID(int=2))


# ------------------------------------------------------------------ snapshots
def test_snapshot_name_format():
    assert snapshot_name((123, 5)) == "00000000000000000123-0000000005.checkpoint"


async def test_snapshots_written_atomically_and_latest_wins():
    fs = MemFileSystem()
    store = SnapshotStore(fs, DIR)
    assert store.latest() is None
    await store.write((10, 1), b"ten")
    await store.write((20, 2), b"twenty")
    assert store.ids() == [(10, 1), (20, 2)]
    assert store.latest() == ((20, 2), b"twenty")
    fs.crash(random.Random(0))
    assert SnapshotStore(fs, DIR).latest() == ((20, 2), b"twenty")
    await store.delete_older_than((20, 2))
    assert store.ids() == [(20, 2)]


async def test_damaged_snapshot_is_skipped_for_an_older_one():
    fs = MemFileSystem()
    store = SnapshotStore(fs, DIR)
    await store.write((10, 1), b"ten")
    await store.write((20, 2), b"twenty")
    f = fs.open(f"{DIR}/{snapshot_name((20, 2))}")
    f.write_at(f.size() - 1, b"X")
    with pytest.raises(CorruptSnapshotError):
        store.read((20, 2))
    assert store.latest() == ((10, 1), b"ten")
    f.truncate(3)
    with pytest.raises(CorruptSnapshotError):
        store.read((20, 2))


async def test_crash_during_snapshot_write_leaves_no_partial_snapshot():
    fs = MemFileSystem()
    store = SnapshotStore(fs, DIR)
    await store.write((10, 1), b"old")
    # A temp file that never got renamed is not a snapshot, and is cleaned up.
    tmp = fs.open(f"{DIR}/{snapshot_name((30, 3))}.tmp", create=True)
    tmp.append(b"partial")
    assert store.ids() == [(10, 1)]
    await store.delete_older_than((10, 1))
    assert fs.listdir(DIR) == [snapshot_name((10, 1))]


# --------------------------------------------------------------- quorum-state
async def test_quorum_state_roundtrip_and_crash():
    fs = MemFileSystem()
    qs = QuorumStateFile(fs, DIR)
    assert qs.read() is None
    await qs.write(3, None, 2)
    assert qs.read() == StoredElection(3, None, 2)
    await qs.write(4, 1, None)
    fs.crash(random.Random(5))
    assert QuorumStateFile(fs, DIR).read() == StoredElection(4, 1, None)


@pytest.mark.parametrize(
    "content",
    [b"", b"{", b"[]", b'{"leaderEpoch": 1}', b'{"leaderEpoch": "1", "leaderId": -1, "votedId": -1}',
     b'{"leaderEpoch": -3, "leaderId": -1, "votedId": -1}',
     b'{"leaderEpoch": 1, "leaderId": -1, "votedId": -1, "data_version": 9}', b"\xff\xfe"],
)
async def test_damaged_quorum_state_raises_typed_error(content):
    fs = MemFileSystem()
    fs.makedirs(DIR)
    fs.open(f"{DIR}/quorum-state", create=True).append(content)
    with pytest.raises(CorruptQuorumStateError):
        QuorumStateFile(fs, DIR).read()


# ------------------------------------------------------------ meta.properties
def test_uuid_text_form():
    assert len(CLUSTER) == 22 and is_valid_uuid(CLUSTER)
    for bad in ["", "abc", CLUSTER + "A", "!" * 22, 22 * "_/"[:1] + "", None]:
        assert not is_valid_uuid(bad)


VOTERS = [VoterSpec(1, "127.0.0.1", 9093), VoterSpec(2, "127.0.0.1", 9094, DIRID)]


async def test_format_then_check():
    fs = MemFileSystem()
    meta = MetaProperties(CLUSTER, 1, DIRID)
    assert await format_data_dir(fs, "/d1", meta, VOTERS)
    text = fs.snapshot()["/d1/meta.properties"].decode()
    assert f"cluster.id={CLUSTER}\n" in text and "node.id=1\n" in text and "version=1\n" in text
    fs.crash(random.Random(0))
    got_meta, voters = check_data_dir(fs, "/d1", node_id=1)
    assert got_meta == meta and voters == VOTERS


async def test_refuses_unformatted_foreign_and_damaged_dirs():
    fs = MemFileSystem()
    with pytest.raises(DataDirError, match="does not exist"):
        check_data_dir(fs, "/nope", node_id=1)
    fs.makedirs("/empty")
    with pytest.raises(DataDirError, match="not formatted"):
        check_data_dir(fs, "/empty", node_id=1)
    await format_data_dir(fs, "/d1", MetaProperties(CLUSTER, 1, DIRID), VOTERS)
    with pytest.raises(DataDirError, match="belongs to node 1"):
        check_data_dir(fs, "/d1", node_id=2)
    fs.open("/d1/meta.properties").write_at(0, b"garbage line without equals\n")
    with pytest.raises(DataDirError, match="damaged"):
        check_data_dir(fs, "/d1", node_id=1)
    fs.remove("/d1/bootstrap.voters")
    with pytest.raises(DataDirError):
        read_bootstrap_voters(fs, "/d1")


async def test_format_refuses_formatted_or_nonempty_dirs():
    fs = MemFileSystem()
    meta = MetaProperties(CLUSTER, 1, DIRID)
    await format_data_dir(fs, "/d1", meta, VOTERS)
    with pytest.raises(DataDirError, match="already formatted"):
        await format_data_dir(fs, "/d1", meta, VOTERS)
    assert await format_data_dir(fs, "/d1", meta, VOTERS, ignore_formatted=True) is False
    fs.makedirs("/d2")
    fs.open("/d2/something", create=True)
    with pytest.raises(DataDirError, match="not empty"):
        await format_data_dir(fs, "/d2", meta, VOTERS)
    with pytest.raises(DataDirError, match="cluster id"):
        await format_data_dir(fs, "/d3", MetaProperties("not-a-uuid", 1, DIRID), VOTERS)
    with pytest.raises(DataDirError, match="each node id once"):
        await format_data_dir(fs, "/d3", meta, VOTERS + [VoterSpec(1, "h", 1)])
