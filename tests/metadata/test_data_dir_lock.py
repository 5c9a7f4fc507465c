"""The log dirs' `.lock`: held for the life of the process, naming the incarnation holding it."""
import uuid

import pytest

from metadata.data_dir_lock import lock_data_dirs
from storage.env import RealFileSystem
from storage.memfs import MemFileSystem
from storage.meta_properties import DataDirError


def test_a_held_lock_refuses_another_holder_and_names_the_previous_incarnation(tmp_path):
    fs = RealFileSystem()
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    for d in dirs:
        fs.makedirs(d)
    first = lock_data_dirs(fs, dirs)
    assert first.previous_incarnation is None  # a fresh dir proves nothing
    first.name(uuid.UUID(int=1))
    with pytest.raises(DataDirError, match="in use by another process"):
        lock_data_dirs(fs, dirs)  # flock is per open file: a second holder
    first.name(uuid.UUID(int=3))  # it took another incarnation id after starting
    first.close()  # as the OS does when the process dies
    second = lock_data_dirs(fs, dirs)
    assert second.previous_incarnation == uuid.UUID(int=3)
    second.close()


def test_dirs_naming_different_incarnations_prove_nothing(tmp_path):
    fs = RealFileSystem()
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    for d in (a, b):
        fs.makedirs(d)
    for d, n in ((a, 1), (b, 2)):
        locks = lock_data_dirs(fs, [d])
        locks.name(uuid.UUID(int=n))
        locks.close()
    locks = lock_data_dirs(fs, [a, b])
    assert locks.previous_incarnation is None
    locks.close()


def test_a_file_system_without_locks_proves_nothing():
    assert lock_data_dirs(MemFileSystem(), ["/d"]).previous_incarnation is None
