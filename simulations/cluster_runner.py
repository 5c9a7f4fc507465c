"""One full-cluster run: controllers, brokers and clients under faults (workload "cluster").

Phases (reference/simulation.md §6.1.8):
1. format the disks, start every node; setup without faults: the data topics are
   created and written on every partition (`setup_timeout`);
2. safety phase (`duration`): the client processes (producers, assign-mode reader,
   group members, committed-offset reader, admin churn) and the nemesis; the Raft and
   metadata checkers poll every node every `POLL` (or after every task step);
3. liveness phase: every fault healed, every node restarted; within `heal_timeout`
   every partition takes an acknowledged write, the final reads reach every
   partition's end, every node's metadata reaches the controller's, and every
   partition's replicas catch up with their leader;
4. final checks: Raft durable logs, the data checker over the history and final reads,
   replicas byte-identical below their common high watermark.
"""
from __future__ import annotations

import random

import trio

from metadata.authorizer import STANDARD_AUTHORIZER, AuthorizerSettings
from simulations.checkers.authorization import AuthorizationChecker
from simulations.checkers.quotas import QuotaChecker
from simulations.checkers.committed import CommittedRecordsChecker
from simulations.checkers.data import DataChecker
from simulations.checkers.metadata import MetadataChecker
from simulations.checkers.raft import RaftChecker
from simulations.checkers.leader_isr import LeaderIsrChecker
from simulations.checkers.transactions import TransactionChecker
from simulations.checkers.retention import RetentionChecker
from simulations.checkers.roles import RolePoller
from simulations.checkers.sessions import SessionChecker
from simulations.cluster import SimCluster
from simulations.coverage import Coverage
from simulations.determinism import current_sim_clock
from simulations.env import derive_seed
from simulations.history import History
from simulations.fault_schedule import profile_for, schedule_of
from simulations.moments import Moments, moments_enabled
from simulations.nemesis import Nemesis
from simulations.network import SimNetwork
from simulations.trace import Trace
from simulations.workloads.acls import QUESTIONS
from simulations.workloads.quotas import QUOTA_QUESTIONS
from simulations.workloads.cluster import CLIENT_HOST, ClusterWorkload
from simulations.workloads.retention import LOG_TOPICS, RETAINED

__all__ = ["simulate_cluster", "NODE_SETTINGS"]

POLL = 0.02
DURABLE_POLL = 0.5
SETUP_TIMEOUT = 60.0
# Kafka's defaults where a run of tens of seconds can live with them; the broker session,
# ISR lag and group timers are shortened so fencing, ISR changes and rebalances happen.
NODE_SETTINGS = {
    "broker.heartbeat.interval.ms": 500,
    "broker.session.timeout.ms": 3000,
    "replica.lag.time.max.ms": 3000,
    "group.initial.rebalance.delay.ms": 0,
    "offsets.topic.num.partitions": 3,
    "transaction.state.log.num.partitions": 3,
    # Production practice and what the power-loss budget assumes (acks=all survives
    # min.insync.replicas - 1 lost page caches): also for __consumer_offsets, which takes the
    # broker default (Kafka: 1, under which one power loss may drop a committed offset).
    "min.insync.replicas": 2,
    "metadata.log.max.records.between.snapshots": 40,
    # A follower far behind catches up in many fetches (Kafka's 1 MiB takes a run's whole backlog
    # in one): it passes its leader's epoch start while still below the HW, where the ISR rule
    # (join only at the HW) is what keeps it out.
    "replica.fetch.max.bytes": 512,
    # Retention, checkpoints (HW, log start) and the cleaner every second: many passes per run.
    "log.retention.check.interval.ms": 1000,
    "log.cleaner.backoff.ms": 1000,
    # Deny by default, as a secured cluster: the nodes and the workload's clients (plaintext,
    # User:ANONYMOUS) are super users; the ACL churn's principals get only what its ACLs say.
    "authorizer.class.name": STANDARD_AUTHORIZER,
    "super.users": "User:ANONYMOUS",
}
AUTHORIZER = AuthorizerSettings(enabled=True, super_users=frozenset({"User:ANONYMOUS"}))


async def simulate_cluster(options, trace: Trace, state: dict, raft_settings: dict) -> None:
    seed = options.seed

    def rng(name: str) -> random.Random:
        return random.Random(derive_seed(seed, name))

    profile = profile_for(options, rng("profile"))
    state["profile"] = profile.describe()
    trace.record("sim", "start", seed=seed, duration=options.duration, faults=options.faults,
                 controllers=options.controllers, brokers=options.brokers, workload="cluster",
                 kinds=profile.kinds, mean_gap=round(profile.mean_gap, 6))
    net = SimNetwork(rng("network"), trace, default_profile=profile.link)
    checker = RaftChecker(trace, list(range(1, options.controllers + 1)))
    cluster = SimCluster(seed, net, trace, checker, controllers=options.controllers, brokers=options.brokers,
                         mode="cluster", raft_settings=raft_settings,
                         node_settings={**NODE_SETTINGS, **options.node_settings})
    metadata = MetadataChecker(checker)
    cluster.metadata_log = metadata
    authorization = AuthorizationChecker(metadata, AUTHORIZER, QUESTIONS)
    quotas = QuotaChecker(metadata, QUOTA_QUESTIONS)
    net.add_host(CLIENT_HOST)
    history = History(trace)
    workload = ClusterWorkload(seed, net, history, cluster.bootstrap(), brokers=len(cluster.broker_ids),
                               producers=2, churn=True, broker_ids=cluster.broker_ids)
    nemesis = Nemesis(cluster, net, trace, rng("nemesis"), profile,
                      replay=None if options.replay is None else options.replay.events)
    moments = (Moments(nemesis, rng("moments"), min_isr=workload.min_isr, kinds=options.moments)
               if options.replay is None and moments_enabled(options.faults, options.moments) else None)
    coverage = Coverage()
    state["log_watch"].bind(cluster, checker, coverage)
    state["applied_schedule"] = lambda: schedule_of(options, profile, nemesis.schedule).to_dict()
    await cluster.format()

    roles = RolePoller(cluster)
    committed = CommittedRecordsChecker(checker)
    sessions = SessionChecker(checker, metadata)
    leader_isr = LeaderIsrChecker(checker, metadata)
    retention = RetentionChecker(checker)

    def poll() -> None:
        roles.poll()
        observe_metadata(cluster, metadata)
        sessions.observe(cluster)
        for node_id, broker in live_brokers(cluster).items():
            incarnation = cluster.hosts[node_id].incarnation
            authorization.observe(node_id, incarnation, broker)
            quotas.observe(node_id, incarnation, broker)
            committed.observe(node_id, incarnation, broker)
            leader_isr.observe(node_id, broker)
            retention.observe(node_id, broker)

    async with trio.open_nursery() as nursery:
        cluster.bind(nursery)
        for node_id in cluster.node_ids:
            cluster.start(node_id)
        nursery.start_soon(_poll_loop, cluster, poll)
        nursery.start_soon(coverage.poll_loop, cluster)
        instrument = _StepChecker(poll)
        if options.step_checks:
            trio.lowlevel.add_instrument(instrument)
        problem = await workload.setup(trio.current_time() + SETUP_TIMEOUT)
        if problem is not None:
            checker.now = trio.current_time()
            checker.violate("Liveness", problem)
        else:
            safety_end = trio.current_time() + options.duration
            async with trio.open_nursery() as phase:
                phase.start_soon(workload.run, safety_end)
                phase.start_soon(nemesis.run, safety_end)
                if moments is not None:
                    phase.start_soon(moments.run, safety_end)
            nemesis.heal()
            await _liveness(cluster, workload, metadata, checker, trace, options.heal_timeout)
        poll()
        authorization.check_all(live_brokers(cluster))
        quotas.check_all(live_brokers(cluster))
        durable = await cluster.poll_durable()
        checker.check_final(durable)
        data = DataChecker(checker, history, idempotent={"producer0", "setup", "final-producer"})
        data.check(workload.final)
        data.check_replicas(replica_logs(cluster, workload.settings.partitions()))
        TransactionChecker(checker, history).check()
        if workload.log_final:
            retention.check(history, workload.log_final, retained_replicas(cluster))
        coverage.committed_log(checker.committed)
        for answer in coverage.client_errors(history.ops):
            checker.violate("UnknownServerError", answer)
        if options.step_checks:
            trio.lowlevel.remove_instrument(instrument)
        nursery.cancel_scope.cancel()
    trace.record("sim", "end", ops=len(history.ops), violations=len(checker.violations))
    if moments is not None:
        coverage.strikes(moments.counts)
    state["coverage"] = coverage.report(trace)
    state["faults"] = dict(sorted(nemesis.counts.items()))
    state["schedule"] = schedule_of(options, profile, nemesis.schedule).to_dict()
    state["moments"] = moments.describe() if moments is not None else {}
    state["violations"] = [v.to_dict() for v in checker.violations]
    state["sim_seconds"] = round(trio.current_time(), 6)
    counts = history.counts()
    state["workload"] = {"ops": counts, "crashes": cluster.crashes, "committed": len(checker.committed),
                         "images_compared": metadata.compared, "authorization_questions": authorization.asked,
                         "quota_questions": quotas.asked,
                         "elections_checked": committed.elections_checked,
                         "registrations_replaced": sessions.replacements,
                         "records_read": sum(len(r) for r in workload.final.values())}


def observe_metadata(cluster: SimCluster, metadata: MetadataChecker) -> None:
    for node_id, host in sorted(cluster.hosts.items()):
        if not host.up:
            continue
        role = host.broker_role()
        if role is not None:
            loader = role.follower.loader
            metadata.observe(node_id, host.incarnation, "broker", loader.image, loader.replay_errors)
        machine = host.controller_state_machine()
        if machine is not None:
            metadata.observe(node_id, host.incarnation, "controller", machine.image, machine.replay_errors)


def live_brokers(cluster: SimCluster) -> dict:
    """node id -> the running Kafka broker (broker.broker.Broker) of every live broker."""
    out = {}
    for node_id, host in sorted(cluster.hosts.items()):
        kafka = host.kafka()
        if kafka is not None:
            out[node_id] = kafka
    return out


def replica_logs(cluster: SimCluster, partitions) -> dict:
    """tp -> broker -> (high watermark, log bytes from offset 0) on every live broker."""
    out: dict = {}
    for node_id in cluster.broker_ids:
        kafka = cluster.hosts[node_id].kafka()
        if kafka is None:
            continue
        for tp in partitions:
            partition = kafka.replicas.get(*tp)
            if partition is None:
                continue
            data = partition.read(0, 1 << 30, max_offset=None, min_one_batch=True).read()
            out.setdefault(tp, {})[node_id] = (partition.high_watermark, data)
    return out


def retained_replicas(cluster: SimCluster) -> dict[int, tuple[int, int]]:
    """broker -> (log start, bytes) of its replica of the retention workload's retained topic."""
    out = {}
    for node_id in cluster.broker_ids:
        kafka = cluster.hosts[node_id].kafka()
        partition = kafka.replicas.get(RETAINED, 0) if kafka is not None else None
        if partition is not None and not partition.log.closed:
            out[node_id] = (partition.log.log_start_offset, partition.log.size_in_bytes)
    return out


def _replicas_caught_up(cluster: SimCluster, partitions) -> list[str]:
    """Partitions whose replicas are not all live with the leader's log end and HW."""
    lagging = []
    for tp in partitions:
        views = []
        for node_id in cluster.broker_ids:
            kafka = cluster.hosts[node_id].kafka()
            partition = kafka.replicas.get(*tp) if kafka is not None else None
            if partition is not None:
                views.append((partition.log_end_offset, partition.high_watermark, partition.is_leader,
                              len(partition.registration.replicas)))
        leaders = [v for v in views if v[2]]
        if len(leaders) != 1 or len(views) < leaders[0][3] or \
                any(v[0] != leaders[0][0] or v[1] != leaders[0][0] for v in views):
            lagging.append(f"{tp[0]}-{tp[1]}")
    return lagging


async def _liveness(cluster: SimCluster, workload: ClusterWorkload, metadata: MetadataChecker,
                    checker: RaftChecker, trace: Trace, timeout: float) -> None:
    start = trio.current_time()
    deadline = start + timeout
    problems = await workload.converge(deadline)
    if not problems:
        trace.record("sim", "liveness_data", after=round(trio.current_time() - start, 6))
    partitions = workload.settings.partitions() + ([(t, 0) for t in LOG_TOPICS] if workload.log_final else [])
    lagging: list[str] = []
    behind: list[int] = []
    raft_behind: list[int] = []
    raft_target = len(checker.committed)  # fixed, so ongoing appends cannot keep it out of reach
    while trio.current_time() < deadline:
        lagging = _replicas_caught_up(cluster, partitions)
        target = max((h.controller_state_machine().image.offset for h in cluster.hosts.values()
                      if h.controller_state_machine() is not None), default=-1)
        offsets = {n: h.broker_role().follower.image.offset for n, h in sorted(cluster.hosts.items())
                   if h.broker_role() is not None}
        behind = metadata.converged(offsets, target) if len(offsets) == len(cluster.broker_ids) else [-1]
        # Every voter must have applied the whole committed log (so any divergent suffix
        # it held is truncated) before the final durable-log check.
        raft_behind = [n for n in cluster.voters if checker.applied_end.get(n, 0) < raft_target]
        if not lagging and not behind and not raft_behind:
            trace.record("sim", "converged", after=round(trio.current_time() - start, 6))
            break
        await trio.sleep(0.1)
    else:
        if lagging:
            problems.append(f"replicas of {lagging} did not catch up with their leader")
        if behind:
            problems.append(f"brokers {behind} did not reach the controller's metadata")
        if raft_behind:
            problems.append(f"controllers {raft_behind} did not apply the committed metadata log")
    checker.now = trio.current_time()
    for problem in problems:
        checker.violate("Liveness", f"{problem} within {timeout:g}s of healing")


class _StepChecker(trio.abc.Instrument):
    def __init__(self, poll):
        self.poll = poll

    def after_task_step(self, task) -> None:
        self.poll()


async def _poll_loop(cluster: SimCluster, poll) -> None:
    next_durable = 0.0
    clock = current_sim_clock()
    sleep = clock.sleep if clock is not None else trio.sleep  # a timer, not a cancel scope, per poll
    while True:
        await sleep(POLL)
        poll()
        if trio.current_time() >= next_durable:
            next_durable = trio.current_time() + DURABLE_POLL
            await cluster.poll_durable()
