"""MemFileSystem.durable_changes: equal counts mean the same `durable_copy()` (checkers cache on it)."""
from __future__ import annotations

import random

import pytest

from storage.memfs import MemFileSystem


def durable_view(fs: MemFileSystem) -> dict[str, bytes]:
    return fs.durable_copy().snapshot()


async def test_durable_changes_moves_exactly_when_the_durable_image_can():
    fs = MemFileSystem()
    fs.makedirs("/d")
    f = fs.open("/d/a", create=True)
    seen = [(fs.durable_changes, durable_view(fs))]

    def step() -> None:
        seen.append((fs.durable_changes, durable_view(fs)))

    f.append(b"hello")  # page cache only
    step()
    await fs.sync_dir("/d")  # the entry becomes durable (empty)
    step()
    await f.sync()  # the bytes too
    step()
    f.write_at(0, b"J")
    fs.rename("/d/a", "/d/b")  # namespace change not yet synced
    step()
    fs.fail_syncs = True
    with pytest.raises(OSError):
        await f.sync()  # failed writeback: nothing new is durable
    step()
    fs.fail_syncs = False
    fs.rot("/d/a" if fs.exists("/d/a") else "/d/b", 0, 5, random.Random(1))
    step()
    fs.crash(random.Random(2))
    step()
    for (count_a, view_a), (count_b, view_b) in zip(seen, seen[1:]):
        if count_a == count_b:
            assert view_a == view_b
    counts = [count for count, _ in seen]
    assert counts == sorted(counts)
    # write, rename and a failed fsync leave it; sync_dir, fsync, rot and crash move it
    assert [b - a for a, b in zip(counts, counts[1:])] == [0, 1, 1, 0, 0, 1, 1]
