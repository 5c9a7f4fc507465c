"""The fault schedule: drawn from the seed, FoundationDB/TigerBeetle "swarm" style.

The seed first draws a *profile* (which fault kinds are on, how often faults
come, link latency and loss), then the nemesis injects faults of those kinds
at random times until the safety phase ends. Each fault undoes itself after a
random duration (restart, heal, unclog, disk back to normal), and `heal()`
ends them all at the start of the liveness phase.

Fault kinds (--faults selects groups): network: partition (random halves,
isolate the leader, isolate one node), oneway, clog, swizzle, reset;
crash: kill, kill_leader, power_loss (a kill that loses the page cache: on nodes with
the broker role at most BROKER_POWER_LOSS_BUDGET per run, as Kafka's acks=all without fsync
survives at most min.insync.replicas - 1 such losses); disk: slow_fsync, disk_full,
read_corruption, bitrot, fsync_error; clock: clock_jump; process: pause.

The storage and process kinds (`LATE_KINDS`) run on a schedule of their own, drawn from
their own random stream: adding them left the other kinds' draws (profile and schedule) of
every seed as they were. A seed whose profile enables none of them runs exactly as before;
one that does gets the same older faults at the same times, plus the new ones.

- read_corruption: for 0.5-5 s, each segment read a broker serves (sendfile) comes back with
  one bit flipped with probability 5-50 %, inside a batch's CRC-checked bytes.
- bitrot: bits flip at rest in one batch of a broker's newest segment; the broker is killed at
  once (shares the power-loss budget). Where and why: simulations/storage_faults.py.
- fsync_error: for 0.1-2 s every fsync of a node fails with EIO, the writeback lost.
- pause: a node freezes for 1-10 s (SIGSTOP, a GC pause), then resumes with its stale state:
  a leader comes back as a zombie (see SimCluster.pause for what is frozen).
"""
from __future__ import annotations

import errno
import random
from dataclasses import dataclass, field

import trio

from simulations.cluster import SimCluster
from simulations.network import LinkProfile, SimNetwork
from simulations.storage_faults import READ_CORRUPTION_SCOPE, crc_covered_bit, rot_region
from simulations.trace import Trace
from storage.memfs import ReadCorruption

__all__ = ["FaultProfile", "Nemesis", "FAULT_GROUPS", "draw_profile", "BROKER_POWER_LOSS_BUDGET"]

BROKER_POWER_LOSS_BUDGET = 1

FAULT_GROUPS = {
    "network": ["partition", "oneway", "clog", "swizzle", "reset"],
    "crash": ["kill", "kill_leader", "power_loss"],
    "disk": ["slow_fsync", "disk_full", "read_corruption", "bitrot", "fsync_error"],
    "clock": ["clock_jump"],
    "process": ["pause"],
}

# Kinds on their own schedule and random stream (see the module docstring).
LATE_KINDS = ("read_corruption", "bitrot", "fsync_error", "pause")
# Raft mode has no broker data: corruption could land only on the Raft log and snapshots,
# which no Raft voter survives (see simulations/storage_faults.py).
RAFT_MODE_KINDS = ("fsync_error", "pause")


def fault_kinds(selection: str) -> list[str]:
    """'all', 'none', or a comma list of groups and/or kinds."""
    if selection == "none":
        return []
    if selection == "all":
        return [k for g in FAULT_GROUPS.values() for k in g]
    kinds: list[str] = []
    for part in [p.strip() for p in selection.split(",") if p.strip()]:
        group = FAULT_GROUPS.get(part)
        if group is None and part not in [k for g in FAULT_GROUPS.values() for k in g]:
            raise ValueError(f"unknown fault group or kind {part!r} (groups: all, none, {', '.join(FAULT_GROUPS)})")
        for k in group or [part]:
            if k not in kinds:
                kinds.append(k)
    return kinds


@dataclass
class FaultProfile:
    kinds: list[str]
    mean_gap: float  # seconds between faults
    link: LinkProfile = field(default_factory=LinkProfile)
    late_mean_gap: float = 3.0  # seconds between faults of LATE_KINDS
    late_seed: int = 0  # their random stream

    def describe(self) -> dict:
        return {"kinds": list(self.kinds), "mean_gap": round(self.mean_gap, 3),
                "late_mean_gap": round(self.late_mean_gap, 3),
                "link_min_ms": round(self.link.min_latency * 1000, 3),
                "link_mean_extra_ms": round(self.link.mean_extra * 1000, 3), "link_loss": round(self.link.loss, 4)}


def draw_profile(rng: random.Random, selection: str) -> FaultProfile:
    selected = fault_kinds(selection)
    allowed = [k for k in selected if k not in LATE_KINDS]
    # Swarm testing: each run enables a random non-empty subset of the allowed kinds.
    kinds = [k for k in allowed if rng.random() < 0.7] or ([rng.choice(allowed)] if allowed else [])
    link = LinkProfile(
        min_latency=rng.uniform(0.0001, 0.002),
        mean_extra=rng.uniform(0.0001, 0.005),
        tail_probability=rng.choice([0.0, 0.001, 0.01]),
        tail_max=0.1,
        loss=rng.choice([0.0, 0.0, 0.01, 0.05]) if "network" in selection or selection == "all" else 0.0,
    )
    mean_gap = rng.uniform(0.3, 3.0)
    # Drawn after everything above, so the draws above do not depend on whether these kinds exist.
    late = [k for k in selected if k in LATE_KINDS]
    late_kinds = [k for k in late if rng.random() < 0.5] or ([rng.choice(late)] if late and not kinds else [])
    return FaultProfile(kinds=kinds + late_kinds, mean_gap=mean_gap, link=link,
                        late_mean_gap=rng.uniform(1.0, 5.0), late_seed=rng.getrandbits(64))


class Nemesis:
    def __init__(self, cluster: SimCluster, net: SimNetwork, trace: Trace, rng: random.Random, profile: FaultProfile):
        self.cluster = cluster
        self.net = net
        self.trace = trace
        self.rng = rng
        self.profile = profile
        self.counts: dict[str, int] = {}
        self._restart_at: dict[int, float] = {}
        # Power losses and bit rot both lose acknowledged records on one broker: one budget.
        self.broker_power_losses = 0
        self.classic_kinds = [k for k in profile.kinds if k not in LATE_KINDS]
        self.late_kinds = [k for k in profile.kinds if k in LATE_KINDS
                           and (cluster.mode == "cluster" or k in RAFT_MODE_KINDS)]
        self.late_rng = random.Random(profile.late_seed)

    def _count(self, kind: str, **fields) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        self.trace.record("nemesis", kind, **fields)

    async def run(self, until: float) -> None:
        """Inject faults until sim time `until`; faults still pending undo themselves no more."""
        async with trio.open_nursery() as nursery:
            if self.late_kinds:
                nursery.start_soon(self._run_late, until, nursery)
            while True:
                with trio.move_on_at(until):
                    await trio.sleep(self.rng.expovariate(1.0 / self.profile.mean_gap))
                now = trio.current_time()
                if now >= until:
                    break
                self._revive_due(now)
                if self.classic_kinds:
                    self._inject(self.rng.choice(self.classic_kinds), now, nursery)
            nursery.cancel_scope.cancel()  # heal() ends the faults

    async def _run_late(self, until: float, nursery: trio.Nursery) -> None:
        rng = self.late_rng
        while True:
            with trio.move_on_at(until):
                await trio.sleep(rng.expovariate(1.0 / self.profile.late_mean_gap))
            now = trio.current_time()
            if now >= until:
                return
            self._inject_late(rng.choice(self.late_kinds), now, nursery)

    def _duration(self, lo: float = 0.2, hi: float = 6.0) -> float:
        return self.rng.uniform(lo, hi)

    def _inject(self, kind: str, now: float, nursery: trio.Nursery) -> None:
        names = [h.name for _, h in sorted(self.cluster.hosts.items())]
        ids = self.cluster.node_ids
        if kind == "partition":
            mode = self.rng.choice(["halves", "isolate_leader", "isolate_one"])
            if mode == "isolate_leader" and self.cluster.leader() is not None:
                alone = [self.cluster.hosts[self.cluster.leader()].name]
            elif mode == "halves":
                shuffled = self.rng.sample(names, len(names))
                alone = shuffled[: self.rng.randint(1, len(names) - 1)]
            else:
                alone = [self.rng.choice(names)]
            rest = [n for n in names if n not in alone] + ["client"]
            self.net.partition([sorted(alone), rest])
            self._count("partition", mode=mode, side=sorted(alone))
            nursery.start_soon(self._later, self._duration(), self._heal_partition, sorted(alone), rest)
        elif kind == "oneway":
            src, dst = self.rng.sample(names, 2)
            self.net.set_blocked(src, dst, True)
            self._count("oneway", src=src, dst=dst)
            nursery.start_soon(self._later, self._duration(), self.net.set_blocked, src, dst, False)
        elif kind == "clog":
            src, dst = self.rng.sample(names, 2)
            self.net.clog(src, dst, now + self._duration(0.05, 3.0))
            self._count("clog", src=src, dst=dst)
        elif kind == "swizzle":
            # FoundationDB's swizzle-clog: clog a random subset one by one, release in random order.
            victims = self.rng.sample(names, self.rng.randint(1, len(names)))
            self._count("swizzle", nodes=victims)
            nursery.start_soon(self._swizzle, victims)
        elif kind == "reset":
            a, b = self.rng.sample(names + ["client"], 2)
            self._count("reset", a=a, b=b, connections=self.net.reset_between(a, b))
        elif kind in ("kill", "kill_leader"):
            target = self.cluster.leader() if kind == "kill_leader" else self.rng.choice(ids)
            if target is None or not self.cluster.hosts[target].up:
                return
            self.cluster.kill(target)
            self._count(kind, node=self.cluster.hosts[target].name)
            self._restart_at[target] = now + self._duration(0.1, 5.0)
        elif kind == "power_loss":
            target = self.rng.choice(ids)
            host = self.cluster.hosts[target]
            if not host.up:
                return
            if not self.cluster.loses_page_cache(target):
                if self.broker_power_losses >= BROKER_POWER_LOSS_BUDGET:
                    return
                self.broker_power_losses += 1
            self.cluster.kill(target, power_loss=True)
            self._count(kind, node=host.name)
            self._restart_at[target] = now + self._duration(0.1, 5.0)
        elif kind == "slow_fsync":
            target = self.cluster.hosts[self.rng.choice(ids)]
            target.disk.sync_delay = self.rng.uniform(0.005, 0.3)
            self._count("slow_fsync", node=target.name, delay_ms=round(target.disk.sync_delay * 1000, 3))
            nursery.start_soon(self._later, self._duration(), self._disk_ok, target.node_id)
        elif kind == "disk_full":
            target = self.cluster.hosts[self.rng.choice(ids)]
            if not target.up:
                return
            target.disk.fail_writes = True
            target.disk_fault = True
            target.injected_errnos.add(errno.ENOSPC)
            self._count("disk_full", node=target.name)
            nursery.start_soon(self._later, self._duration(0.1, 2.0), self._disk_ok, target.node_id)
        elif kind == "clock_jump":
            target = self.cluster.hosts[self.rng.choice(ids)]
            delta_ms = self.rng.choice([-1, 1]) * self.rng.uniform(10, 120_000)
            target.clock.jump(now, delta_ms)
            self._count("clock_jump", node=target.name, delta_ms=round(delta_ms))

    def _inject_late(self, kind: str, now: float, nursery: trio.Nursery) -> None:
        rng = self.late_rng
        cluster = self.cluster
        up = [i for i in cluster.node_ids if cluster.hosts[i].up]
        if not up:
            return
        if kind == "read_corruption":
            # Only bytes a broker serves from its segment files over the network (sendfile)
            # are damaged: every receiver checks the RecordBatch CRC-32C (see storage_faults).
            brokers = [i for i in up if cluster.hosts[i].is_broker]
            if not brokers:
                return
            host = cluster.hosts[rng.choice(brokers)]
            corruption = ReadCorruption(random.Random(rng.getrandbits(64)), rng.uniform(0.05, 0.5),
                                        applies_to=READ_CORRUPTION_SCOPE, sends_only=True,
                                        choose_bit=crc_covered_bit)
            host.disk.read_corruption = corruption
            self._count("read_corruption", node=host.name, probability=round(corruption.probability, 3))
            nursery.start_soon(self._later, rng.uniform(0.5, 5.0), self._end_read_corruption, host, corruption)
        elif kind == "bitrot":
            # At rest on one broker, which then dies, so its restart must find the damage (a
            # process kill: the restart is on the same boot, its page cache "survives" damaged).
            if self.broker_power_losses >= BROKER_POWER_LOSS_BUDGET:
                return
            brokers = [i for i in up if cluster.hosts[i].is_broker]
            if not brokers:
                return
            target = rng.choice(brokers)
            host = cluster.hosts[target]
            region = rot_region(host.disk, rng)
            if region is None:
                return
            path, offset, length = region
            bits = host.disk.rot(path, offset, length, rng, bits=rng.randint(1, 3))
            self.broker_power_losses += 1
            cluster.kill(target, reason="bitrot", power_loss=False)
            self._count("bitrot", node=host.name, path=path, bits=bits)
            self._restart_at[target] = now + rng.uniform(0.1, 5.0)
        elif kind == "fsync_error":
            # Not on a combined broker+controller node: it dies of the EIO and, being a broker,
            # restarts from its page cache, where the Raft entries whose fsync failed still look
            # written; it would count them toward the commit again, yet a power loss takes them
            # (fsyncgate). KRaft reads its log through the page cache too; only O_DIRECT, as
            # TigerBeetle does, would make this survivable. Controller-only nodes restart from
            # the disk, brokers only ever acknowledge from the page cache.
            candidates = [i for i in up if not (cluster.hosts[i].is_broker and cluster.hosts[i].is_controller)]
            if not candidates:
                return
            host = cluster.hosts[rng.choice(candidates)]
            host.disk.fail_syncs = True
            host.disk_fault = True
            host.injected_errnos.add(errno.EIO)
            self._count("fsync_error", node=host.name)
            nursery.start_soon(self._later, rng.uniform(0.1, 2.0), self._end_fsync_error, host)
        elif kind == "pause":
            target = rng.choice(up)
            seconds = rng.uniform(1.0, 10.0)
            cluster.pause(target, now + seconds)
            self._count("pause", node=cluster.hosts[target].name, seconds=round(seconds, 3))

    def _end_read_corruption(self, host, corruption: ReadCorruption) -> None:
        if host.disk.read_corruption is corruption:
            host.disk.read_corruption = None
        self.trace.record("nemesis", "read_corruption_end", node=host.name, flips=corruption.flips)

    def _end_fsync_error(self, host) -> None:
        host.disk.fail_syncs = False
        host.disk_fault = host.disk.fail_writes  # a disk_full may still be on

    async def _later(self, delay: float, fn, *args) -> None:
        await trio.sleep(delay)
        fn(*args)

    def _heal_partition(self, side: list[str], rest: list[str]) -> None:
        for a in side:
            for b in rest:
                self.net.set_blocked(a, b, False)
                self.net.set_blocked(b, a, False)

    async def _swizzle(self, victims: list[str]) -> None:
        peers = [h.name for _, h in sorted(self.cluster.hosts.items())] + ["client"]
        for v in victims:
            await trio.sleep(self.rng.uniform(0.0, 0.5))
            for p in peers:
                if p != v:
                    self.net.clog(v, p, trio.current_time() + 30.0)
        for v in self.rng.sample(victims, len(victims)):
            await trio.sleep(self.rng.uniform(0.1, 2.0))
            self._unclog(v, peers)

    def _unclog(self, host: str, peers: list[str]) -> None:
        for p in peers:
            if p != host:
                link = self.net.link(host, p)
                link.clogged_until = 0.0
                link.wake_all()

    def _disk_ok(self, node_id: int) -> None:
        """The end of a slow_fsync or disk_full (an fsync_error may outlast them)."""
        host = self.cluster.hosts[node_id]
        host.disk.sync_delay = 0.0
        host.disk.fail_writes = False
        host.disk_fault = host.disk.fail_syncs

    def _disk_healthy(self, node_id: int) -> None:
        """Every disk fault ends."""
        host = self.cluster.hosts[node_id]
        host.disk.sync_delay = 0.0
        host.disk.fail_writes = False
        host.disk.fail_syncs = False
        host.disk.read_corruption = None
        host.disk_fault = False

    def _revive_due(self, now: float) -> None:
        for node_id, host in sorted(self.cluster.hosts.items()):
            if host.up:
                continue
            due = self._restart_at.setdefault(node_id, now + self._duration(0.1, 3.0))
            if now >= due:
                del self._restart_at[node_id]
                self.cluster.start(node_id)

    def heal(self) -> None:
        """End every fault: the liveness phase starts from a healthy world."""
        self.net.heal()
        self.cluster.resume_all()
        self.cluster.restart_after_disk_error = True
        for node_id, host in sorted(self.cluster.hosts.items()):
            self._disk_healthy(node_id)
            host.clock.resync(trio.current_time())
            if not host.up:
                self.cluster.start(node_id)
        self._restart_at.clear()
        self.trace.record("nemesis", "heal")
