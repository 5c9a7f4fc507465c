"""The simulated disks' flock (simulations.env.IncarnationFS.lock), which the data dir lock
(metadata.data_dir_lock) relies on in the simulation: held while the file is open and its
incarnation lives, as the OS holds a real flock."""
import random

import pytest

from metadata.data_dir_lock import lock_data_dirs
from simulations.env import IncarnationFS
from storage.memfs import MemFileSystem
from storage.meta_properties import DataDirError


class _Env:
    def __init__(self, name):
        self.name, self.alive = name, True


def test_a_lock_is_held_until_its_process_dies_or_closes_it():
    disk = MemFileSystem()
    first, second = _Env("n1"), _Env("n1")
    held = lock_data_dirs(IncarnationFS(disk, first), ["/data"])
    held.name("1b5a8c2e-0000-4000-8000-000000000001")
    with pytest.raises(DataDirError, match="in use by another process"):
        lock_data_dirs(IncarnationFS(disk, second), ["/data"])
    first.alive = False  # killed: the OS releases its locks
    proof = lock_data_dirs(IncarnationFS(disk, second), ["/data"])
    assert str(proof.previous_incarnation) == "1b5a8c2e-0000-4000-8000-000000000001"
    proof.close()
    third = _Env("n1")
    assert lock_data_dirs(IncarnationFS(disk, third), ["/data"]).files  # closed: free again


def test_a_power_loss_releases_the_lock():
    disk = MemFileSystem()
    lock_data_dirs(IncarnationFS(disk, _Env("n1")), ["/data"])
    disk.crash(random.Random(1))
    assert lock_data_dirs(IncarnationFS(disk, _Env("n1")), ["/data"]).files
