"""A damaged metadata snapshot is refused or fetched again, never replaced by an empty state."""
from __future__ import annotations

import pytest

from raft.entry import Entry
from raft.log import NO_SNAPSHOT
from raft.node_storage import NodeStorage
from storage.env import RealFileSystem
from storage.meta_properties import DataDirError
from storage.raft_snapshots import snapshot_name


async def _trimmed_log(tmp_path, *, trim: bool) -> tuple[RealFileSystem, str]:
    """Offsets 0..59 in small segments, snapshots at 20 and 40; with `trim`, the log is cut
    up to the snapshot at 40, as the driver does once that snapshot is written."""
    fs = RealFileSystem()
    storage = NodeStorage(fs, str(tmp_path), segment_bytes=200)
    await storage.load()
    await storage.append([Entry(o, 1, b"record-%03d" % o) for o in range(60)])
    await storage.write_snapshot((20, 1), b"state at 20")
    await storage.write_snapshot((40, 1), b"state at 40")
    if trim:
        await storage.log.delete_before(40)
    storage.close()
    return fs, str(tmp_path / "__cluster_metadata-0" / snapshot_name((40, 1)))


def _flip_last_byte(path: str) -> bytes:
    with open(path, "r+b") as f:
        f.seek(-1, 2)
        last = f.read(1)
        f.seek(-1, 2)
        f.write(bytes([last[0] ^ 0x01]))
    with open(path, "rb") as f:
        return f.read()


async def test_a_voter_refuses_to_start_from_a_damaged_snapshot_the_log_no_longer_covers(tmp_path):
    fs, path = await _trimmed_log(tmp_path, trim=True)
    damaged = _flip_last_byte(path)
    storage = NodeStorage(fs, str(tmp_path), segment_bytes=200)
    with pytest.raises(DataDirError) as refused:
        await storage.load()
    storage.close()
    assert path in str(refused.value) and "damaged" in str(refused.value) and "\n" not in str(refused.value)
    with open(path, "rb") as f:
        assert f.read() == damaged  # left for the operator


async def test_an_observer_starts_empty_and_fetches_the_metadata_again(tmp_path):
    fs, path = await _trimmed_log(tmp_path, trim=True)
    _flip_last_byte(path)
    storage = NodeStorage(fs, str(tmp_path), segment_bytes=200)
    _, raft_log = await storage.load(refetch_damaged=True)
    assert (raft_log.start_offset, raft_log.end_offset, raft_log.snapshot_id) == (0, 0, NO_SNAPSHOT)
    assert storage.snapshots.ids() == []
    storage.close()


async def test_a_damaged_snapshot_the_log_still_covers_is_removed_and_the_older_one_used(tmp_path):
    fs, path = await _trimmed_log(tmp_path, trim=False)
    _flip_last_byte(path)
    storage = NodeStorage(fs, str(tmp_path), segment_bytes=200)
    _, raft_log = await storage.load()
    assert raft_log.snapshot_id == (20, 1) and raft_log.snapshot == b"state at 20"
    assert raft_log.end_offset == 60 and raft_log.entry(20).payload == b"record-020"
    assert storage.snapshots.ids() == [(20, 1)]
    storage.close()
