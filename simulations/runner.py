"""One simulation run = a pure function of (seed, options) → result with a trace hash.

Workloads: "cluster" (the whole cluster with clients: simulations.cluster_runner),
"raft" (alias "append": the controller quorum alone, below) and "membership" (the raft
workload with two spare controllers and voter changes: simulations.workloads.membership).

Phases of the raft workload (reference/simulation.md §6.1.8):
1. format the disks, start every controller;
2. safety phase (`duration` sim seconds): workload + nemesis, the checker
   polling every node's status every `POLL` (or after every task step with
   `step_checks`) and every disk's durable state every `DURABLE_POLL`;
3. liveness phase: every fault is healed and every node restarted; within
   `heal_timeout` a leader must exist, a fresh append must be acknowledged and
   every node must catch up to it;
4. final checks over every node's durable log.

Results are JSON-ready dicts: seed, hash, faults (counts by kind), violations,
sim_seconds, wall_seconds, plus the drawn profile and workload counters.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

import trio

from simulations.checkers.raft import RaftChecker
from simulations.checkers.roles import RolePoller
from simulations.cluster import SimCluster
from simulations.determinism import current_sim_clock, run_deterministic
from simulations.env import SimEnv, SkewedClock, derive_seed
from simulations.fault_schedule import FaultSchedule, profile_for, schedule_of
from simulations.moments import Moments, moments_enabled
from simulations.coverage import INFO_LOGGERS, RAFT_KEYS, Coverage
from simulations.nemesis import Nemesis
from simulations.node_logs import NodeLogWatch, watching_node_logs
from simulations.network import SimNetwork
from simulations.trace import Trace
from simulations.workloads.membership import MembershipWorkload
from simulations.workloads.raft_append import AppendWorkload
from storage.memfs import MemFileSystem

__all__ = ["SimOptions", "run_simulation", "parse_duration"]

POLL = 0.02
MEMBERSHIP_SPARES = 2  # controllers beyond the initial voters, for the membership workload
DURABLE_POLL = 0.5
RAFT_SETTINGS = {
    # Kafka's defaults, except a snapshot every few KB so snapshots and their shipping happen.
    "controller.quorum.election.timeout.ms": 1000,
    "controller.quorum.fetch.timeout.ms": 2000,
    "metadata.log.max.record.bytes.between.snapshots": 4000,
    "metadata.log.segment.bytes": 8192,
}


@dataclass
class SimOptions:
    seed: int
    duration: float = 30.0
    faults: str = "all"
    controllers: int = 3
    heal_timeout: float = 30.0
    full_trace: bool = False
    workload: str = "cluster"  # "cluster" (simulations.cluster_runner) or "raft" (alias "append")
    brokers: int = 3  # broker-only nodes in the cluster workload; 0 = the controllers are combined nodes
    step_checks: bool = False  # in-memory checks after every trio task step (~2x slower), not every POLL
    replay: "FaultSchedule | None" = None  # apply this schedule's faults instead of drawing them
    # Node settings over the workload's own (simulations.cluster_runner.NODE_SETTINGS, or the
    # Raft runs' RAFT_SETTINGS), e.g. to compare broker.session.timeout.ms values on the same seeds.
    node_settings: dict = field(default_factory=dict)
    # The moments to strike (simulations.moments: MOMENT_KINDS, AIMED_KINDS), instead of a
    # subset drawn from the seed: a hunt aimed at one rule's moment (tests/simulations/catalogue.py).
    moments: tuple[str, ...] = ()

    @classmethod
    def replaying(cls, schedule: "FaultSchedule", **kw) -> "SimOptions":
        """The options a schedule was recorded with, replaying it."""
        kw.setdefault("node_settings", dict(schedule.node_settings))
        return cls(seed=schedule.seed, duration=schedule.duration, faults=schedule.faults,
                   controllers=schedule.controllers, workload=schedule.workload, brokers=schedule.brokers,
                   replay=schedule, **kw)


def parse_duration(text: str) -> float:
    text = text.strip().lower()
    for suffix, scale in (("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0)):
        if text.endswith(suffix) and text[: -len(suffix)].replace(".", "", 1).isdigit():
            return float(text[: -len(suffix)]) * scale
    return float(text)


def run_simulation(options: SimOptions) -> dict:
    """Run one seed; never raises for a finding (it is reported in `violations`)."""
    trace = Trace(full=options.full_trace)
    state: dict = {}
    wall0 = time.perf_counter()
    # Node logs would dwarf the run (the trace tells the story): only their unexpected errors
    # (violations) and the lines coverage counts reach the watch, nothing is printed.
    state["log_watch"] = watch = NodeLogWatch(trace)
    try:
        if options.workload not in WORKLOADS:
            raise ValueError(f"unknown workload {options.workload!r} (one of {', '.join(WORKLOADS)})")
        with watching_node_logs(watch, INFO_LOGGERS):
            run_deterministic(_traced, WORKLOADS[options.workload], options, trace, state,
                              seed=derive_seed(options.seed, "scheduler"))
    except Exception as e:  # noqa: BLE001 - a harness crash is reported, with the seed
        state.setdefault("violations", []).append(
            {"invariant": "HarnessError", "message": _describe_error(e), "sim_time": -1})
    result = {
        "seed": options.seed,
        "hash": trace.hash,
        "faults": state.get("faults", {}),
        "violations": state.get("violations", []),
        "sim_seconds": state.get("sim_seconds", 0.0),
        "wall_seconds": round(time.perf_counter() - wall0, 3),
        "events": trace.seq,
        "profile": state.get("profile", {}),
        "workload": state.get("workload", {}),
        # What the faults were, also when the harness failed before the end of the run.
        "schedule": state.get("schedule") or (state["applied_schedule"]() if "applied_schedule" in state else None),
        "moments": state.get("moments", {}),
        "coverage": state.get("coverage", {}),
        "options": {"duration": options.duration, "faults": options.faults, "controllers": options.controllers,
                    "brokers": options.brokers, "workload": options.workload,
                    "heal_timeout": options.heal_timeout},
    }
    result["trace"] = trace
    return result


async def _traced(workload, options: SimOptions, trace: Trace, state: dict) -> None:
    with trace.reading(current_sim_clock()):
        await workload(options, trace, state)


async def _simulate(options: SimOptions, trace: Trace, state: dict, *, spares: int = 0) -> None:
    seed = options.seed

    def rng(name: str) -> random.Random:
        return random.Random(derive_seed(seed, name))

    profile = profile_for(options, rng("profile"))
    state["profile"] = profile.describe()
    trace.record("sim", "start", seed=seed, duration=options.duration, faults=options.faults,
                 controllers=options.controllers, kinds=profile.kinds, mean_gap=round(profile.mean_gap, 6))
    net = SimNetwork(rng("network"), trace, default_profile=profile.link)
    checker = RaftChecker(trace, list(range(1, options.controllers + 1)))
    cluster = SimCluster(seed, net, trace, checker, controllers=options.controllers,
                         raft_settings={**RAFT_SETTINGS, **options.node_settings}, spares=spares)
    net.add_host("client")
    client_env = SimEnv("client", seed=seed, incarnation=1, net=net, disk=MemFileSystem(), clock=SkewedClock())
    workload = AppendWorkload(client_env, cluster, checker, trace, rng("workload"))
    membership = MembershipWorkload(client_env, cluster, trace, rng("membership")) if spares else None
    nemesis = Nemesis(cluster, net, trace, rng("nemesis"), profile,
                      replay=None if options.replay is None else options.replay.events)
    moments = (Moments(nemesis, rng("moments"), kinds=options.moments)
               if options.replay is None and moments_enabled(options.faults, options.moments) else None)
    coverage = Coverage(RAFT_KEYS)
    state["log_watch"].bind(cluster, checker, coverage)
    state["applied_schedule"] = lambda: schedule_of(options, profile, nemesis.schedule).to_dict()
    await cluster.format()

    async with trio.open_nursery() as nursery:
        cluster.bind(nursery)
        for node_id in cluster.voters:
            cluster.start(node_id)
        roles = RolePoller(cluster)
        nursery.start_soon(_poll_loop, cluster, roles)
        instrument = _StepChecker(roles)
        if options.step_checks:
            trio.lowlevel.add_instrument(instrument)
        safety_end = trio.current_time() + options.duration
        async with trio.open_nursery() as phase:
            phase.start_soon(workload.run, safety_end)
            phase.start_soon(nemesis.run, safety_end)
            if membership is not None:
                phase.start_soon(membership.run, safety_end)
            if moments is not None:
                phase.start_soon(moments.run, safety_end)
        nemesis.heal()
        await _liveness(cluster, workload, checker, trace, options.heal_timeout)
        durable = await cluster.poll_durable()
        checker.check_final(durable)
        if options.step_checks:
            trio.lowlevel.remove_instrument(instrument)
        nursery.cancel_scope.cancel()
    trace.record("sim", "end", acked=workload.acked, violations=len(checker.violations))
    state["coverage"] = coverage.report(trace)
    state["faults"] = dict(sorted(nemesis.counts.items()))
    state["schedule"] = schedule_of(options, profile, nemesis.schedule).to_dict()
    state["moments"] = moments.describe() if moments is not None else {}
    state["violations"] = [v.to_dict() for v in checker.violations]
    state["sim_seconds"] = round(trio.current_time(), 6)
    state["workload"] = {"sent": workload.sent, "acked": workload.acked, "failed": workload.failed,
                         "indeterminate": workload.indeterminate, "crashes": cluster.crashes,
                         "committed": len(checker.committed)}
    if membership is not None:
        state["workload"]["voter_changes"] = dict(membership.counts)


async def _simulate_cluster(options: SimOptions, trace: Trace, state: dict) -> None:
    from simulations.cluster_runner import simulate_cluster

    await simulate_cluster(options, trace, state, RAFT_SETTINGS)


async def _simulate_membership(options: SimOptions, trace: Trace, state: dict) -> None:
    await _simulate(options, trace, state, spares=MEMBERSHIP_SPARES)


WORKLOADS = {"cluster": _simulate_cluster, "raft": _simulate, "append": _simulate, "membership": _simulate_membership}


class _StepChecker(trio.abc.Instrument):
    """Runs the cheap in-memory checks after every task step (Kafka's per-event invariants)."""

    def __init__(self, roles: RolePoller):
        self.roles = roles

    def after_task_step(self, task) -> None:
        self.roles.poll()


async def _poll_loop(cluster: SimCluster, roles: RolePoller) -> None:
    next_durable = 0.0
    clock = current_sim_clock()
    sleep = clock.sleep if clock is not None else trio.sleep  # a timer, not a cancel scope, per poll
    while True:
        await sleep(POLL)
        roles.poll()
        if trio.current_time() >= next_durable:
            next_durable = trio.current_time() + DURABLE_POLL
            await cluster.poll_durable()


async def _liveness(cluster: SimCluster, workload: AppendWorkload, checker: RaftChecker, trace: Trace,
                    timeout: float) -> None:
    """After healing: an append commits and every node catches up to it, within `timeout`."""
    start = trio.current_time()
    deadline = start + timeout
    offset = await workload.append_until_acked(deadline)
    if offset is None:
        checker.now = trio.current_time()
        checker.violate("Liveness", f"no append was acknowledged within {timeout:g}s of healing")
        return
    trace.record("sim", "liveness_ack", offset=offset, after=round(trio.current_time() - start, 6))
    while trio.current_time() < deadline:
        ends = [checker.applied_end.get(n, 0) for n in cluster.voters]
        if min(ends) > offset:
            trace.record("sim", "converged", after=round(trio.current_time() - start, 6))
            _check_voter_sets_agree(cluster, checker)
            return
        await trio.sleep(0.05)
    checker.now = trio.current_time()
    lagging = [n for n in cluster.voters if checker.applied_end.get(n, 0) <= offset]
    checker.violate("Liveness", f"nodes {lagging} did not apply offset {offset} within {timeout:g}s of healing")


def _check_voter_sets_agree(cluster: SimCluster, checker: RaftChecker) -> None:
    """Once healed and caught up, every controller uses the same voter set (KIP-853)."""
    sets = {}
    for node_id, host in sorted(cluster.hosts.items()):
        if host.up and host.node is not None and host.node.driver is not None:
            sets[node_id] = tuple(host.node.driver.core.voters)
    if len(set(sets.values())) > 1:
        checker.now = trio.current_time()
        checker.violate("VoterSetAgreement", f"after healing the controllers disagree on the voters: {sets}")


def _describe_error(e: BaseException) -> str:
    """The innermost exceptions of a (possibly grouped) error, with where they were raised."""
    import traceback

    if isinstance(e, BaseExceptionGroup):
        return "; ".join(_describe_error(sub) for sub in e.exceptions)
    where = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
    at = f" at {where.filename.rsplit('/', 2)[-2:]}:{where.lineno}" if where else ""
    return f"{type(e).__name__}: {e}{at}"
