"""The simulated Env handed to node code: one per node incarnation (process lifetime).

- now() / sleep: trio's clock, which is a virtual `SimClock` in a simulation (read
  and slept on directly when it is one: see `SimClock.sleep_until`).
- wall_ms(): sim time seen through the node's `SkewedClock` (offset, drift and
  jumps set by the nemesis); it may run backwards, as a real wall clock can.
- rng / uuid(): a `random.Random` derived from the run seed, the node name and
  the incarnation, so a restarted node does not replay its earlier choices.
- net: the node's view of the `SimNetwork`.
- fs: the node's `MemFileSystem`, which outlives incarnations (it is the disk);
  it is wrapped so a dead incarnation can no longer touch it.

A killed incarnation's tasks are cancelled, but a task that was already woken
runs one more step; `alive` turns false at the kill so that step cannot reach
the network or open new files after the crash.
"""
from __future__ import annotations

import errno
import hashlib
import random
import uuid as _uuid
from typing import Callable

import trio

from storage.env import TrioDeadlines, uuid_from_rng
from storage.memfs import MemFileSystem
from simulations.network import HostNetwork, SimNetwork

__all__ = ["SimEnv", "SkewedClock", "IncarnationFS", "derive_seed"]

# The simulated wall clock starts at 2026-01-01T00:00:00Z.
WALL_EPOCH_MS = 1_767_225_600_000


def derive_seed(seed: int, *names: str) -> int:
    """A 64-bit seed for one component, independent of PYTHONHASHSEED."""
    digest = hashlib.sha256("/".join([str(seed), *names]).encode()).digest()
    return int.from_bytes(digest[:8], "big")


class SkewedClock:
    """A node's wall clock: sim time scaled by (1 + drift), plus an offset that can jump."""

    def __init__(self, offset_ms: float = 0.0, drift: float = 0.0):
        self._anchor_sim = 0.0
        self._anchor_wall_ms = WALL_EPOCH_MS + offset_ms
        self.drift = drift

    def wall_ms(self, now: float) -> int:
        return int(self._anchor_wall_ms + (now - self._anchor_sim) * 1000.0 * (1.0 + self.drift))

    def _reanchor(self, now: float) -> None:
        self._anchor_wall_ms = self._anchor_wall_ms + (now - self._anchor_sim) * 1000.0 * (1.0 + self.drift)
        self._anchor_sim = now

    def jump(self, now: float, delta_ms: float) -> None:
        self._reanchor(now)
        self._anchor_wall_ms += delta_ms

    def set_drift(self, now: float, drift: float) -> None:
        self._reanchor(now)
        self.drift = drift

    def resync(self, now: float) -> None:
        """NTP catches up: no offset, no drift."""
        self._anchor_sim = now
        self._anchor_wall_ms = WALL_EPOCH_MS + now * 1000.0
        self.drift = 0.0


class IncarnationFS:
    """A `FileSystem` that forwards to the node's disk while its incarnation lives."""

    def __init__(self, disk: MemFileSystem, env: "SimEnv"):
        self._disk = disk
        self._env = env

    def _check(self) -> MemFileSystem:
        if not self._env.alive:
            raise OSError(errno.EIO, f"process of {self._env.name} is dead")
        return self._disk

    def open(self, path: str, *, create: bool = False):
        return self._check().open(path, create=create)

    def exists(self, path: str) -> bool:
        return self._check().exists(path)

    def is_dir(self, path: str) -> bool:
        return self._check().is_dir(path)

    def listdir(self, path: str) -> list[str]:
        return self._check().listdir(path)

    def makedirs(self, path: str) -> None:
        self._check().makedirs(path)

    def remove(self, path: str) -> None:
        self._check().remove(path)

    def rmtree(self, path: str) -> None:
        self._check().rmtree(path)

    def rename(self, src: str, dst: str) -> None:
        self._check().rename(src, dst)

    def file_size(self, path: str) -> int:
        return self._check().file_size(path)

    async def sync_dir(self, path: str) -> None:
        await self._check().sync_dir(path)

    def free_bytes(self, path: str) -> int:
        return self._check().free_bytes(path)

    def lock(self, path: str):
        """flock(LOCK_EX | LOCK_NB) as storage.env.RealFileSystem.lock: held while the file
        stays open and this incarnation lives; BlockingIOError if another one holds it."""
        disk = self._check()
        held = disk.flocks.get(path)
        if held is not None and held[0] is not self._env and held[0].alive and not held[1].closed:
            raise BlockingIOError(errno.EWOULDBLOCK, f"{path} is locked by another process")
        f = disk.open(path, create=True)
        disk.flocks[path] = (self._env, f)
        return f

    def boot_id(self) -> str:
        """A power loss (`MemFileSystem.crash`) is a new boot; a process kill is not."""
        return f"{self._env.name}-boot-{self._check().crashes}"


class SimEnv(TrioDeadlines):
    """The `storage.env.Env` of one incarnation of one simulated node."""

    def __init__(
        self,
        name: str,
        *,
        seed: int,
        incarnation: int,
        net: SimNetwork,
        disk: MemFileSystem,
        clock: SkewedClock,
    ):
        self.name = name
        self.incarnation = incarnation
        self.alive = True
        self.rng = random.Random(derive_seed(seed, "node", name, str(incarnation)))
        self.clock = clock
        self.net: HostNetwork = net.view(name, lambda: self.alive)
        self.fs = IncarnationFS(disk, self)
        # Node code reads the time ~450k times per simulated minute: on a SimClock, straight
        # from the clock (one call), not through trio.current_time() (three).
        self._sim_clock = net.clock
        self.now: Callable[[], float] = net.now  # Env.now(): trio's clock, as the run sees it

    def wall_ms(self) -> int:
        return self.clock.wall_ms(self.now())

    async def sleep(self, seconds: float) -> None:
        if self._sim_clock is not None:
            await self._sim_clock.sleep(seconds)  # no cancel scope per sleep
        else:
            await trio.sleep(seconds)

    async def sleep_until(self, deadline: float) -> None:
        if self._sim_clock is not None:
            await self._sim_clock.sleep_until(deadline)
        else:
            await trio.sleep_until(deadline)

    def uuid(self) -> _uuid.UUID:
        return uuid_from_rng(self.rng)
