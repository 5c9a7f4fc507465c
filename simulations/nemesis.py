"""The fault schedule: drawn from the seed, FoundationDB/TigerBeetle "swarm" style.

The seed first draws a *profile* (which fault kinds are on, how often faults
come, link latency and loss), then the nemesis injects faults of those kinds
at random times until the safety phase ends. Each fault undoes itself after a
random duration (restart, heal, unclog, disk back to normal), and `heal()`
ends them all at the start of the liveness phase.

Fault kinds (--faults selects groups): network: partition (random halves,
isolate the leader, isolate one node), oneway, clog, swizzle, reset, replay;
crash: kill, kill_leader, power_loss (a kill that loses the page cache: on nodes with
the broker role at most BROKER_POWER_LOSS_BUDGET per run, as Kafka's acks=all without fsync
survives at most min.insync.replicas - 1 such losses), torn_write, wipe; disk: slow_fsync,
disk_full, read_corruption, bitrot, fsync_error, misdirected_write; clock: clock_jump;
process: pause, stop.

The storage and process kinds (`LATE_KINDS`) run on a schedule of their own, drawn from
their own random stream, so the other kinds' draws (profile and schedule) of a seed do not
depend on them: a seed whose profile enables none of them runs as it would without them; one
that does gets the same other faults at the same times, plus these.

What was applied is kept as data (`Nemesis.schedule`, simulations/fault_schedule.py), and a
saved schedule can be replayed instead of drawing.

- read_corruption: for 0.5-5 s, each segment read a broker serves (sendfile) comes back with
  one bit flipped with probability 5-50 %, inside a batch's CRC-checked bytes.
- bitrot: bits flip at rest in one batch of a broker's newest segment; the broker is killed at
  once (shares the power-loss budget). Where and why: simulations/storage_faults.py.
- fsync_error: for 0.1-2 s every fsync of a node fails with EIO, the writeback lost.
- torn_write: a power loss during which the unsynced bytes reached the disk sector by sector,
  in no order (simulations/storage_faults.py); on a broker it spends the power-loss budget.
- wipe: a power loss that takes the whole disk; the node is formatted again (a new directory
  id) and restarted. A broker re-replicates (power-loss budget); a voter comes back as an
  observer (KIP-853: raftkafka.node.assembly.replaced_voter), at most VOTER_WIPE_BUDGET per run.
- misdirected_write: one batch of a broker's newest segment landed at another place of that
  segment, then the broker dies (as bitrot, with its budget).
- replay: the requests an ended connection carried are sent again on a new connection from
  the same host, those whose duplication the design survives (simulations/replay.py).
- pause: a node freezes for 1-10 s (SIGSTOP, a GC pause), then resumes with its stale state:
  a leader comes back as a zombie (see SimCluster.pause for what is frozen).
- stop: SIGTERM, a graceful stop (SimCluster.stop: Kafka's controlled shutdown moves the
  broker's leaderships away first), restarted 0.1-5 s after it stopped.
- stop_together: a set of nodes stopped as `stop` at once, all restarted only once the last
  is down; each must be down within a broker session (ControlledShutdownStalled). Never
  drawn: simulations.moments strikes it, and a replayed schedule repeats it.
- duplicate: a second process of a running broker-only node on the same disk with other ports
  (SimCluster.start_duplicate); the data dir lock must refuse it. Drawn after every other
  draw of the profile, so seeds without it run as before.
"""
from __future__ import annotations

import errno
import random
from dataclasses import dataclass, field

import trio

from simulations.cluster import BROKER_PORT, SimCluster
from simulations.network import LinkProfile, SimNetwork
from simulations.replay import replay, replayable_bytes
from simulations.storage_faults import READ_CORRUPTION_SCOPE, crc_covered_bit, misdirect_region, rot_region
from simulations.trace import Trace
from storage.memfs import ReadCorruption

__all__ = ["FaultProfile", "Nemesis", "FAULT_GROUPS", "draw_profile", "BROKER_POWER_LOSS_BUDGET"]

BROKER_POWER_LOSS_BUDGET = 1

FAULT_GROUPS = {
    "network": ["partition", "oneway", "clog", "swizzle", "reset", "replay"],
    "crash": ["kill", "kill_leader", "power_loss", "torn_write", "wipe"],
    "disk": ["slow_fsync", "disk_full", "read_corruption", "bitrot", "fsync_error", "misdirected_write"],
    "clock": ["clock_jump"],
    "process": ["pause", "stop", "duplicate"],
}

# Kinds on their own schedule and random stream (see the module docstring).
LATE_KINDS = ("read_corruption", "bitrot", "fsync_error", "pause", "stop", "torn_write", "wipe",
              "misdirected_write", "replay", "duplicate")
# Raft mode has no broker data: corruption could land only on the Raft log and snapshots,
# which no Raft voter survives (see simulations/storage_faults.py).
RAFT_MODE_KINDS = ("fsync_error", "pause", "torn_write", "wipe", "replay")
# Voters whose disk may be wiped in one run: a wiped voter comes back as an observer (its new
# directory id is not the voter's) and no membership change replaces it, so a second one
# would leave the quorum without a majority for good (Kafka's too, without remove/add-controller).
VOTER_WIPE_BUDGET = 1


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
    late = [k for k in selected if k in LATE_KINDS and k != "duplicate"]
    late_kinds = [k for k in late if rng.random() < 0.5] or ([rng.choice(late)] if late and not kinds else [])
    late_mean_gap, late_seed = rng.uniform(1.0, 5.0), rng.getrandbits(64)
    if "duplicate" in selected and (rng.random() < 0.5 or not kinds + late_kinds):
        late_kinds.append("duplicate")
    return FaultProfile(kinds=kinds + late_kinds, mean_gap=mean_gap, link=link,
                        late_mean_gap=late_mean_gap, late_seed=late_seed)


class Nemesis:
    """Draws faults from its random streams and applies them; with `replay`, applies a recorded
    schedule instead (`schedule` is what was applied, in order: simulations/fault_schedule.py).

    Each fault is drawn (`_draw`, `_draw_late`: which node, how long, ... as one event dict)
    and then applied (`_apply`): a replay applies the same events at the same times after the
    start of the fault phase, whatever the cluster's state, so a regression keeps the faults
    that made it fail even when the trace changes. A replay restarts nodes at the recorded
    restarts only (and at the heal); a fault that cannot apply then (a kill of a node that is
    down, bit rot in a file that is gone) is skipped."""

    def __init__(self, cluster: SimCluster, net: SimNetwork, trace: Trace, rng: random.Random, profile: FaultProfile,
                 replay: list[dict] | None = None):
        self.cluster = cluster
        self.net = net
        self.trace = trace
        self.rng = rng
        self.profile = profile
        self.counts: dict[str, int] = {}
        self._restart_at: dict[int, float] = {}
        # Power losses, bit rot, misdirected writes and wipes all lose acknowledged records on one
        # broker: one budget.
        self.broker_power_losses = 0
        self.voter_wipes = 0
        self.classic_kinds = [k for k in profile.kinds if k not in LATE_KINDS]
        self.late_kinds = [k for k in profile.kinds if k in LATE_KINDS
                           and (cluster.mode == "cluster" or k in RAFT_MODE_KINDS)]
        self.late_rng = random.Random(profile.late_seed)
        self.replay = replay
        self.schedule: list[dict] = []  # the events applied; "at" is seconds into the fault phase
        self._start = 0.0

    def _count(self, kind: str, **fields) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        self.trace.record("nemesis", kind, **fields)

    async def run(self, until: float) -> None:
        """Inject faults until sim time `until`; faults still pending undo themselves no more."""
        self._start = trio.current_time()
        async with trio.open_nursery() as nursery:
            if self.replay is not None:
                await self._run_replay(until, nursery)
            else:
                if self.late_kinds:
                    nursery.start_soon(self._run_late, until, nursery)
                await self._run_classic(until, nursery)
            nursery.cancel_scope.cancel()  # heal() ends the faults

    async def _run_classic(self, until: float, nursery: trio.Nursery) -> None:
        while True:
            with trio.move_on_at(until):
                await trio.sleep(self.rng.expovariate(1.0 / self.profile.mean_gap))
            now = trio.current_time()
            if now >= until:
                return
            self._revive_due(now)
            if self.classic_kinds:
                self._apply(self._draw(self.rng.choice(self.classic_kinds), now), now, nursery)

    async def _run_late(self, until: float, nursery: trio.Nursery) -> None:
        rng = self.late_rng
        while True:
            with trio.move_on_at(until):
                await trio.sleep(rng.expovariate(1.0 / self.profile.late_mean_gap))
            now = trio.current_time()
            if now >= until:
                return
            self._apply(self._draw_late(rng.choice(self.late_kinds), now), now, nursery)

    async def _run_replay(self, until: float, nursery: trio.Nursery) -> None:
        for event in sorted(self.replay, key=lambda e: e["at"]):
            with trio.move_on_at(until):
                await trio.sleep_until(self._start + event["at"])
            now = trio.current_time()
            if now >= until:
                return
            self._apply(dict(event), now, nursery)
        # The faults under way (a partition to heal, nodes still stopping) keep their recorded
        # course: `run` cancels them when this returns, as the drawn loops return at `until`.
        await trio.sleep_until(until)

    def _duration(self, lo: float = 0.2, hi: float = 6.0) -> float:
        return self.rng.uniform(lo, hi)

    # ------------------------------------------------------------------ draws

    def _draw(self, kind: str, now: float) -> dict | None:
        """One fault of a classic kind, drawn from `rng` and the cluster's state (None: none now)."""
        rng = self.rng
        names = [h.name for _, h in sorted(self.cluster.hosts.items())]
        ids = self.cluster.node_ids
        if kind == "partition":
            mode = rng.choice(["halves", "isolate_leader", "isolate_one"])
            if mode == "isolate_leader" and self.cluster.leader() is not None:
                alone = [self.cluster.hosts[self.cluster.leader()].name]
            elif mode == "halves":
                shuffled = rng.sample(names, len(names))
                alone = shuffled[: rng.randint(1, len(names) - 1)]
            else:
                alone = [rng.choice(names)]
            return {"kind": kind, "mode": mode, "side": sorted(alone), "seconds": self._duration()}
        if kind in ("oneway", "clog"):
            src, dst = rng.sample(names, 2)
            seconds = self._duration() if kind == "oneway" else self._duration(0.05, 3.0)
            return {"kind": kind, "src": src, "dst": dst, "seconds": seconds}
        if kind == "swizzle":
            # FoundationDB's swizzle-clog: clog a random subset one by one, release in random order
            # (those draws are made as the swizzle goes, and added to the event).
            return {"kind": kind, "nodes": rng.sample(names, rng.randint(1, len(names)))}
        if kind == "reset":
            a, b = rng.sample(names + ["client"], 2)
            return {"kind": kind, "a": a, "b": b}
        if kind in ("kill", "kill_leader", "power_loss"):
            target = self.cluster.leader() if kind == "kill_leader" else rng.choice(ids)
            if target is None or not self.cluster.hosts[target].up or not self._power_loss_allowed(kind, target):
                return None
            return {"kind": kind, "node": target, "restart_after": self._duration(0.1, 5.0)}
        if kind == "slow_fsync":
            target = rng.choice(ids)
            return {"kind": kind, "node": target, "delay": rng.uniform(0.005, 0.3), "seconds": self._duration()}
        if kind == "disk_full":
            target = rng.choice(ids)
            if not self.cluster.hosts[target].up:
                return None
            return {"kind": kind, "node": target, "seconds": self._duration(0.1, 2.0)}
        if kind == "clock_jump":
            target = rng.choice(ids)
            return {"kind": kind, "node": target, "delta_ms": rng.choice([-1, 1]) * rng.uniform(10, 120_000)}
        raise ValueError(f"unknown fault kind {kind!r}")

    def _draw_late(self, kind: str, now: float) -> dict | None:
        """One fault of a LATE_KINDS kind, drawn from `late_rng`."""
        rng = self.late_rng
        cluster = self.cluster
        up = [i for i in cluster.node_ids if cluster.hosts[i].up]
        if not up:
            return None
        brokers = [i for i in up if cluster.hosts[i].is_broker]
        if kind == "read_corruption":
            # Only bytes a broker serves from its segment files over the network (sendfile)
            # are damaged: every receiver checks the RecordBatch CRC-32C (see storage_faults).
            if not brokers:
                return None
            target = rng.choice(brokers)
            seed, probability = rng.getrandbits(64), rng.uniform(0.05, 0.5)
            return {"kind": kind, "node": target, "seed": seed, "probability": probability,
                    "seconds": rng.uniform(0.5, 5.0)}
        if kind == "bitrot":
            # At rest on one broker, which then dies, so its restart must find the damage (a
            # process kill: the restart is on the same boot, its page cache "survives" damaged).
            if self.broker_power_losses >= BROKER_POWER_LOSS_BUDGET or not brokers:
                return None
            target = rng.choice(brokers)
            disk = cluster.hosts[target].disk
            region = rot_region(disk, rng)
            if region is None:
                return None
            path, offset, length = region
            bits = disk.rot(path, offset, length, rng, bits=rng.randint(1, 3))
            return {"kind": kind, "node": target, "path": path, "bits": bits, "rotted": True,
                    "restart_after": rng.uniform(0.1, 5.0)}
        if kind == "fsync_error":
            # Not on a combined broker+controller node: it dies of the EIO and, being a broker,
            # restarts from its page cache, where the Raft entries whose fsync failed still look
            # written; it would count them toward the commit again, yet a power loss takes them
            # (fsyncgate). KRaft reads its log through the page cache too; only O_DIRECT, as
            # TigerBeetle does, would make this survivable. Controller-only nodes restart from
            # the disk, brokers only ever acknowledge from the page cache.
            candidates = [i for i in up if not (cluster.hosts[i].is_broker and cluster.hosts[i].is_controller)]
            if not candidates:
                return None
            return {"kind": kind, "node": rng.choice(candidates), "seconds": rng.uniform(0.1, 2.0)}
        if kind == "pause":
            target = rng.choice(up)
            return {"kind": kind, "node": target, "seconds": rng.uniform(1.0, 10.0)}
        if kind == "stop":
            return {"kind": kind, "node": rng.choice(up), "restart_after": rng.uniform(0.1, 5.0)}
        if kind == "duplicate":
            # Broker-only nodes: on a controller the duplicate that a broken lock let through
            # would first double the Raft voter, hiding what the registration checker shows.
            candidates = [i for i in brokers if not cluster.hosts[i].is_controller]
            if not candidates:
                return None
            return {"kind": kind, "node": rng.choice(candidates), "seconds": rng.uniform(1.0, 4.0)}
        if kind == "replay":
            conns = [c for c in self.net.recorded_connections() if c.sent]
            if not conns:
                return None
            conn = rng.choice(conns)
            return {"kind": kind, "conn": conn.id, "src": conn.client, "dst": conn.server, "port": conn.port}
        if kind in ("torn_write", "wipe"):
            target = rng.choice(up)
            if not self._loss_allowed(kind, target):
                return None
            return {"kind": kind, "node": target, "restart_after": rng.uniform(0.1, 5.0)}
        if kind == "misdirected_write":
            if self.broker_power_losses >= BROKER_POWER_LOSS_BUDGET or not brokers:
                return None
            target = rng.choice(brokers)
            disk = cluster.hosts[target].disk
            region = misdirect_region(disk, rng)
            if region is None or not disk.misdirect(*region):
                return None
            path, offset, length, wrong = region
            return {"kind": kind, "node": target, "path": path, "offset": offset, "length": length,
                    "wrong_offset": wrong, "misdirected": True, "restart_after": rng.uniform(0.1, 5.0)}
        raise ValueError(f"unknown fault kind {kind!r}")

    def _loss_allowed(self, kind: str, target: int) -> bool:
        """A torn power loss or a wipe of a broker loses acknowledged records (the broker
        budget); a wipe of a voter spends the voter-wipe budget."""
        host = self.cluster.hosts[target]
        if host.is_broker and not self.cluster.loses_page_cache(target) and \
                self.broker_power_losses >= BROKER_POWER_LOSS_BUDGET:
            return False
        return kind != "wipe" or not host.is_controller or self.voter_wipes < VOTER_WIPE_BUDGET

    def _power_loss_allowed(self, kind: str, target: int) -> bool:
        """A power loss of a broker (which loses acknowledged records) spends the budget."""
        if kind != "power_loss" or self.cluster.loses_page_cache(target):
            return True
        return self.broker_power_losses < BROKER_POWER_LOSS_BUDGET

    # ------------------------------------------------------------------ apply

    def _apply(self, event: dict | None, now: float, nursery: trio.Nursery) -> None:
        """Apply one drawn or replayed fault and add it to `schedule` (a replayed fault that
        cannot apply to the cluster as it is now, e.g. a kill of a node that is down, is skipped)."""
        if event is None:
            return
        kind = event["kind"]
        cluster, hosts = self.cluster, self.cluster.hosts
        host = hosts.get(event["node"]) if "node" in event else None
        if host is not None and not host.up and kind not in ("slow_fsync", "clock_jump", "restart"):
            return
        if kind == "partition":
            names = [h.name for _, h in sorted(hosts.items())]
            alone = event["side"]
            rest = [n for n in names if n not in alone] + ["client"]
            self.net.partition([alone, rest])
            self._count("partition", mode=event["mode"], side=alone)
            nursery.start_soon(self._later, event["seconds"], self._heal_partition, alone, rest)
        elif kind == "oneway":
            self.net.set_blocked(event["src"], event["dst"], True)
            self._count("oneway", src=event["src"], dst=event["dst"])
            nursery.start_soon(self._later, event["seconds"], self.net.set_blocked, event["src"], event["dst"], False)
        elif kind == "clog":
            self.net.clog(event["src"], event["dst"], now + event["seconds"])
            self._count("clog", src=event["src"], dst=event["dst"])
        elif kind == "swizzle":
            self._count("swizzle", nodes=event["nodes"])
            nursery.start_soon(self._swizzle, event)
        elif kind == "reset":
            self._count("reset", a=event["a"], b=event["b"], connections=self.net.reset_between(event["a"], event["b"]))
        elif kind in ("kill", "kill_leader", "power_loss"):
            if not self._power_loss_allowed(kind, host.node_id):
                return
            if kind == "power_loss" and not cluster.loses_page_cache(host.node_id):
                self.broker_power_losses += 1
            cluster.kill(host.node_id, power_loss=True if kind == "power_loss" else None)
            self._count(kind, node=host.name)
            self._restart_at[host.node_id] = now + event["restart_after"]
        elif kind == "restart":
            if host.up:
                return
            self._restart_at.pop(host.node_id, None)
            cluster.start(host.node_id)
        elif kind == "slow_fsync":
            host.disk.sync_delay = event["delay"]
            self._count("slow_fsync", node=host.name, delay_ms=round(event["delay"] * 1000, 3))
            nursery.start_soon(self._later, event["seconds"], self._disk_ok, host.node_id)
        elif kind == "disk_full":
            host.disk.fail_writes = True
            host.disk_fault = True
            host.injected_errnos.add(errno.ENOSPC)
            self._count("disk_full", node=host.name)
            nursery.start_soon(self._later, event["seconds"], self._disk_ok, host.node_id)
        elif kind == "clock_jump":
            host.clock.jump(now, event["delta_ms"])
            self._count("clock_jump", node=host.name, delta_ms=round(event["delta_ms"]))
        elif kind == "read_corruption":
            corruption = ReadCorruption(random.Random(event["seed"]), event["probability"],
                                        applies_to=READ_CORRUPTION_SCOPE, sends_only=True,
                                        choose_bit=crc_covered_bit)
            host.disk.read_corruption = corruption
            self._count("read_corruption", node=host.name, probability=round(corruption.probability, 3))
            nursery.start_soon(self._later, event["seconds"], self._end_read_corruption, host, corruption)
        elif kind == "bitrot":
            if not event.pop("rotted", False):  # replayed: the same bits, if that file still has them
                if self.broker_power_losses >= BROKER_POWER_LOSS_BUDGET or not host.disk.flip_bits(
                        event["path"], event["bits"]):
                    return
            self.broker_power_losses += 1
            cluster.kill(host.node_id, reason="bitrot", power_loss=False)
            self._count("bitrot", node=host.name, path=event["path"], bits=event["bits"])
            self._restart_at[host.node_id] = now + event["restart_after"]
        elif kind == "fsync_error":
            host.disk.fail_syncs = True
            host.disk_fault = True
            host.injected_errnos.add(errno.EIO)
            self._count("fsync_error", node=host.name)
            nursery.start_soon(self._later, event["seconds"], self._end_fsync_error, host)
        elif kind == "replay":
            conn, data = self._replayable(event)
            if not data:
                return  # replayed schedule: no such connection among the last ended ones now
            self._count("replay", conn=conn.id, src=conn.client, dst=conn.server, port=conn.port, nbytes=len(data))
            nursery.start_soon(replay, self.net, event["src"], event["dst"], event["port"], data)
        elif kind in ("torn_write", "wipe"):
            if not self._loss_allowed(kind, host.node_id):
                return
            if host.is_broker and not cluster.loses_page_cache(host.node_id):
                self.broker_power_losses += 1
            cluster.kill(host.node_id, reason=kind, power_loss=True, sectors=kind == "torn_write")
            if kind == "wipe":
                self.voter_wipes += host.is_controller
                cluster.wipe(host.node_id)
            self._count(kind, node=host.name)
            self._restart_at[host.node_id] = now + event["restart_after"]
        elif kind == "misdirected_write":
            if not event.pop("misdirected", False):  # replayed: the same write, if that file still allows it
                if self.broker_power_losses >= BROKER_POWER_LOSS_BUDGET or not host.disk.misdirect(
                        event["path"], event["offset"], event["length"], event["wrong_offset"]):
                    return
            self.broker_power_losses += 1
            cluster.kill(host.node_id, reason=kind, power_loss=False)
            self._count(kind, node=host.name, path=event["path"], offset=event["offset"],
                        wrong_offset=event["wrong_offset"])
            self._restart_at[host.node_id] = now + event["restart_after"]
        elif kind == "pause":
            cluster.pause(host.node_id, now + event["seconds"])
            self._count("pause", node=host.name, seconds=round(event["seconds"], 3))
        elif kind == "stop":
            if host.stop_scope is not None:
                return  # already stopping
            self._count("stop", node=host.name)
            nursery.start_soon(self._stop, host.node_id, event["restart_after"])
        elif kind == "stop_together":  # struck by simulations.moments, never drawn
            nodes = event["nodes"]
            if not all(hosts[n].up and hosts[n].stop_scope is None for n in nodes):
                return  # replayed: not every node is up as it was
            self._count("stop_together", nodes=[hosts[n].name for n in nodes])
            nursery.start_soon(self._stop_together, nodes, event["restart_after"])
        elif kind == "duplicate":
            if host.duplicates:
                return  # one at a time
            cluster.start_duplicate(host.node_id, event["seconds"])
            self._count("duplicate", node=host.name)
        else:
            raise ValueError(f"unknown fault kind {kind!r}")
        event["at"] = now - self._start
        self.schedule.append(event)

    def _replayable(self, event: dict):
        """The connection a replay fault resends, with its bytes. A replayed schedule applies the
        same faults at the same times, but the run is not the drawing run bit for bit (that one
        also woke its nemesis when it drew nothing, and its trace hash differs), so connections
        may be numbered differently: the event's connection if it still joins the same hosts,
        else the latest one between them."""
        ends = (event["src"], event["dst"], event["port"])
        conns = [c for c in self.net.recorded_connections() if (c.client, c.server, c.port) == ends
                 and (self.replay is not None or c.id == event["conn"])]
        for conn in sorted(conns, key=lambda c: (c.id != event["conn"], -c.id)):
            data = replayable_bytes(conn, BROKER_PORT)
            if data:
                return conn, data
        return None, b""

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

    async def _swizzle(self, event: dict) -> None:
        """Clog each victim after a delay, then release them one by one in an order. A drawn
        swizzle draws the delays and the order as it goes and adds them to its event; a replayed
        one follows them (as far as they got before the fault phase ended)."""
        peers = [h.name for _, h in sorted(self.cluster.hosts.items())] + ["client"]
        victims = event["nodes"]
        drawn = "clog_delays" not in event
        if drawn:
            event["clog_delays"], event["release"] = [], []
        for i, v in enumerate(victims):
            if drawn:
                event["clog_delays"].append(self.rng.uniform(0.0, 0.5))
            elif i >= len(event["clog_delays"]):
                return
            await trio.sleep(event["clog_delays"][i])
            for p in peers:
                if p != v:
                    self.net.clog(v, p, trio.current_time() + 30.0)
        order = self.rng.sample(victims, len(victims)) if drawn else [v for v, _ in event["release"]]
        for i, v in enumerate(order):
            if drawn:
                event["release"].append([v, self.rng.uniform(0.1, 2.0)])
            await trio.sleep(event["release"][i][1])
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

    async def _stop(self, node_id: int, restart_after: float) -> None:
        await self.cluster.stop(node_id)
        self._restart_at[node_id] = trio.current_time() + restart_after

    async def _stop_together(self, node_ids: list[int], restart_after: float) -> None:
        """Stop the nodes at once (each its controlled shutdown, as `dev`'s Ctrl-C stops a
        cluster) and restart them once the last is down: a node back earlier would give a broker
        still waiting the quorum it waits for. Each must be down within a broker session: with
        a controller to answer, moving its leaderships takes a few heartbeats; a broker still
        stopping after a session gets out only when its lease runs out, if ever."""
        down: set[int] = set()

        async def stop(node_id: int) -> None:
            await self.cluster.stop(node_id)  # returns once the node is down
            down.add(node_id)

        async def watch() -> None:
            session = self.cluster.broker_session_timeout
            await trio.sleep(session)
            for node_id in node_ids:
                if node_id not in down:
                    self.cluster.checker.violate(
                        "ControlledShutdownStalled", f"{self.cluster.hosts[node_id].name}, stopped with every other "
                                                     f"node, was still in its controlled shutdown after {session:.1f} s")

        for node_id in node_ids:
            self._restart_at[node_id] = float("inf")  # not revived (`_revive_due`) while the others stop
        async with trio.open_nursery() as watching:
            watching.start_soon(watch)
            async with trio.open_nursery() as stopping:
                for node_id in node_ids:
                    stopping.start_soon(stop, node_id)
            watching.cancel_scope.cancel()
        for node_id in node_ids:
            self._restart_at[node_id] = trio.current_time() + restart_after

    def _revive_due(self, now: float) -> None:
        for node_id, host in sorted(self.cluster.hosts.items()):
            if host.up:
                continue
            due = self._restart_at.setdefault(node_id, now + self._duration(0.1, 3.0))
            if now >= due:
                self._apply({"kind": "restart", "node": node_id}, now, None)

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
