"""Faults aimed at the moments that matter, next to the nemesis's random ones.

Random kills rarely land in the few milliseconds in which a replication rule is all
that stands between the cluster and a lost write: an ISR change in flight, a leader
just elected, a producer id just handed out, a snapshot just written. `Moments`
watches the nodes for those moments and strikes right after one:

- isr_expand: a leader proposed adding a follower to the ISR: the leader's link to
  that follower is cut (the fetch answer that would bring it up to date is held),
  and the leader is killed or powered off soon after, once the controller may have
  committed the change, half the time with the other ISR members killed too (the
  newcomer is left to lead); not held back by the other moments' strikes. On a data
  partition whose committed ISR is at min.insync.replicas, the leader's connections to the
  newcomer also reset, the leader dies 0.3-1.5 s later with the other members, and the
  controllers' answers to it are held for most of that time (isr_expand_hold), so the change
  is committed while the leader still has it in flight. Such expansions are rare under
  faults, so every few seconds a follower of a data partition whose ISR is full dies and
  restarts at once (isr_expand_bounce);
- isr_shrink: a leader proposed dropping members: it dies within ~50 ms, while the
  change may still be in flight;
- leader_change: a broker just became leader of a partition (data or
  __consumer_offsets): its answers to its followers are held and it dies within ~300 ms,
  before they have caught up;
- producer_id: a broker just handed out a producer id: it dies soon after;
- snapshot: a node just wrote a Raft snapshot (and may be cleaning its log): it dies;
- min_isr: a partition's ISR is down to min.insync.replicas: one of its members loses power;
- pause_leader: a partition leader freezes for longer than its broker session timeout,
  so it is fenced and comes back a zombie;
- metadata_lag: a broker loses its links to the controllers (only those) for 0.5-5 s, so its
  metadata lags while it still reaches the other brokers and the clients, and the leader of a
  partition it follows is killed and restarted meanwhile: the partition's leader epoch moves
  on (maybe back to the same broker) while the lagging follower still fetches in the old one;
- stale_isr: a leader proposed an ISR change: its requests to the controllers are held for
  1.2-2.5 s while another ISR member loses power and restarts at once, so the controller
  changes the ISR under the proposal; when it has landed the leader and the other members die
  (not held back by the other moments' strikes: ISR changes follow the restarts they cause);
- voter_link_reset: once the Raft leader has led for a broker session less the voters' fetch
  timeout (not held back by the other moments' strikes), the connections between it and one
  voter reset; once the voter has heard from its leader again, the other voters are cut off
  from the leader and from the brokers (which still reach the old leader) for 2.5-3.5 s, so a
  successor may be elected that the brokers do not hear of for a while
  (voter_link_reset_successor counts those elected);
- coordinator_clock: a transaction coordinator just appended a transaction's
  CompleteCommit/CompleteAbort record: its wall clock steps 45-120 s forward and its
  answers to the other brokers are held for 5.5-8 s, longer than its commit timeout, so the
  record is not written and is retried; the clock steps back as soon as a retry waits (a
  coordinator timing its retry by the wall clock then holds it for as long as the step, and
  InitProducerId answers CONCURRENT_TRANSACTIONS meanwhile). Not held back by the other
  strikes, nor holding them back.

Aimed strikes (AIMED_KINDS), struck only in runs that name them (SimOptions.moments, as the
mutation catalogue's rows do), never drawn:

- deposed_leader: a data partition leader whose ISR is full loses its links to the
  controllers (only those) for a broker session and 0.3-1.5 s more: it is fenced and a
  successor elected while it still takes produce requests that no follower fetches; when the
  cut ends it follows the successor and truncates them;
- controller_restart: the Raft leader dies and restarts at once, and is made to lead again
  (the other voters cut off from each other, then the one elected cut off from both:
  controller_restart_cut); once it has led for as long as voter_link_reset waits, that
  strike follows.
- replica_removal: the active controller was asked for a reassignment that removes a live
  follower from a data partition: before the change commits, that follower loses its links to
  the controllers (only those) for 1.5-2.3 s, within its broker session, so it still follows
  the partition in the leader epoch it knew and does not learn of its removal. If meanwhile
  the partition got it back (another reassignment) and the committed ISR counts it again, then
  when the cut ends the leader stops answering it and dies with the other ISR members, so the
  follower leads (replica_removal_readded). A follower counted in sync on
  fetches from a log its own metadata is about to delete would lead with what is left of it.
- figure_8 (Raft runs; Raft's Figure 8): a Raft leader with entries no follower has yet is
  cut off from the other voters for 5 s. The voter elected meanwhile is made unheard (its
  messages to the others are held), so its LeaderChange record stays its own, at offsets where
  the old leader holds its tail. The old leader, back with the third voter only, is elected again
  and brings that voter its tail one fetch at a time; the moment it applies an entry of its
  tail, of its earlier epoch, it is cut off and killed, and the unheard voter is heard again
  (figure_8_commit). An old epoch's entry counted as committed before the new epoch's first
  entry is on a majority is then overwritten by the unheard voter, elected with the third
  voter's vote.
- log_start_divergence: the leader of the retention workload's `retained` partition, its ISR
  full, is cut off from the controllers and the other brokers for a broker session and 0.3-1.5 s
  more, so a successor is elected while it still appends the acks=1 filler: records the
  successor never had. It stays cut off from the brokers until the successor's retention has
  moved its log start past where the two logs part, so the successor's epoch history no longer
  reaches them. Meanwhile, on an append that rolls a segment at the HW, the successor's other
  follower is cut off, the HW stands at that segment's base and retention moves the log start
  up to it. Then the old leader comes back, asks with its old epoch and hears that the
  successor's history starts at its log start; once it fetches at that offset it is counted in
  sync (the HW), its fetch answers are held, and when the controller has committed it to the
  ISR the successor and the other follower die (log_start_divergence_joined), so it leads with
  whatever it kept below that log start.
- stop_together (runs of combined nodes and no other faults): every node is stopped at once,
  as `dev`'s Ctrl-C stops a cluster (SIGTERM: each node's controlled shutdown), and all are
  restarted 0.5-2 s after the last is down (the nemesis's stop_together fault). Each broker's
  controlled shutdown must complete: the active controller's node serves those of the brokers
  stopping with it before it leaves; a controller that left at once took its vote with it, the
  next node to leave took the majority, and the last broker waited for a controller until its
  session lease ran out (ControlledShutdownStalled: a controlled shutdown still under way a
  broker session after the stop).

The strikes are the nemesis's own faults (kill, power_loss within its budget, oneway, reset,
pause, stop_together), applied through it, so they are counted and recorded in the fault
schedule, and each is counted as `strike_<moment>` in the run's coverage (simulations.coverage);
a replay runs no Moments of its own and applies them at their recorded times, which is close to
but not always exactly where a hook struck (inside a node's task, before its next send). A rule
a strike is aimed at is checked where the fault is applied (stop_together's
ControlledShutdownStalled in the nemesis), so a replay checks it too. Each seed enables a
random subset of the moments (swarm testing) from a random stream of its own, so the
nemesis's draws do not depend on them; a run that names its moments draws the subset all the
same, so the rest of that stream is the seed's. At most one strike at a time, with a drawn pause
after each. Drawn moments run only when the selected faults include the crash group's kinds.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

import trio

from broker.transactions import TxnState
from metadata.controller import rpc
from simulations.nemesis import BROKER_POWER_LOSS_BUDGET, Nemesis, fault_kinds
from simulations.workloads.retention import RETAINED

__all__ = ["Moments", "MOMENT_KINDS", "STRIKE_KINDS", "moments_enabled"]

MOMENT_KINDS = ("isr_expand", "isr_shrink", "leader_change", "producer_id", "snapshot", "min_isr", "pause_leader",
                "metadata_lag", "stale_isr", "voter_link_reset", "coordinator_clock")
# Struck only where a run names them (SimOptions.moments), never drawn: each is aimed at one
# rule's moment (tests/simulations/catalogue.py), and drawing them would change every seed's run.
AIMED_KINDS = ("deposed_leader", "controller_restart", "replica_removal", "figure_8", "log_start_divergence",
               "stop_together")
# What the coverage summary counts (simulations.coverage): the moments, the expansion strikes
# that also hold the controllers' answers, the followers bounced for them, the successors
# elected under a voter_link_reset, the winners a controller_restart cut off, the removed
# followers counted in sync again under a replica_removal, the old leaders a figure_8
# killed as they applied their old tail, and the old leaders a log_start_divergence left to lead.
STRIKE_KINDS = (*MOMENT_KINDS, *AIMED_KINDS, "isr_expand_hold", "isr_expand_bounce", "voter_link_reset_successor",
                "controller_restart_cut", "replica_removal_readded", "figure_8_commit", "log_start_divergence_joined")
POLL = 0.01
_COMPLETING = (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
VOTER_FETCH_TIMEOUT_S = 2.0  # the controllers' Raft fetch timeout (raft.config)
RETAINED_KEY = (RETAINED, 0)  # the partition the log_start_divergence strike works on


@dataclass
class _Figure8:
    """A figure_8 strike under way: the old leader cut off, then (once elected) the unheard
    voter, then the old leader leading again in `epoch_again`."""
    leader: int  # the old leader
    epoch: int  # its epoch: its tail is of it
    tail: int  # its entries from here conflict with what the unheard voter holds
    until: float  # given up after this
    unheard: int | None = None  # the voter elected while it was cut off
    epoch_again: int | None = None  # the old leader's epoch once elected again


@dataclass
class _LogStartDivergence:
    """A log_start_divergence strike under way. Its stages: `deposed` (the old leader cut off,
    a successor to be elected), `rolling` (waiting for a segment rolled at the successor's HW),
    `frozen` (the HW held there, waiting for the log start to reach it), `rejoining` (the old
    leader let back, waiting for it to be counted in sync) and `joining` (its answers held,
    waiting for the committed ISR)."""
    old_leader: int
    epoch: int  # the old leader's last epoch: its records from `divergence` on are of it
    give_up: float
    stage: str = "deposed"
    leader: int | None = None  # the successor
    follower: int | None = None  # the successor's other ISR member
    divergence: int = -1  # where the successor's own epochs start: the logs part there
    base: int = -1  # the segment base the successor's HW is held at


def moments_enabled(selection: str, named: tuple[str, ...] = ()) -> bool:
    """Drawn moments run beside the crash kinds (most strikes kill); named ones always run."""
    return bool(named) or any(k in fault_kinds(selection) for k in ("kill", "kill_leader", "power_loss"))


class Moments:
    def __init__(self, nemesis: Nemesis, rng: random.Random, *, min_isr: int = 2, kinds: tuple[str, ...] = ()):
        self.nemesis = nemesis
        self.cluster = nemesis.cluster
        self.trace = nemesis.trace
        self.rng = rng
        self.min_isr = min_isr
        self.kinds = [k for k in MOMENT_KINDS if rng.random() < 0.6] or [rng.choice(MOMENT_KINDS)]
        if kinds:  # chosen instead of drawn (after the draw, so the rest of the stream is the same)
            unknown = sorted(set(kinds) - set(MOMENT_KINDS + AIMED_KINDS))
            if unknown:
                raise ValueError(f"unknown moment {unknown[0]!r} (one of {', '.join(MOMENT_KINDS + AIMED_KINDS)})")
            self.kinds = list(kinds)
        self.counts: dict[str, int] = {}
        self._busy_until = 0.0  # no strike before this
        self._leader_busy_until = 0.0  # no leader_change strike before this
        self._expand_busy_until = 0.0  # no isr_expand strike before this
        self._hold_busy_until = 0.0  # no isr_expand strike with the answers held before this
        self._clock_busy_until = 0.0  # no coordinator_clock strike before this
        self._stale_busy_until = 0.0  # no stale_isr strike before this
        self._reset_busy_until = 0.0  # no voter_link_reset strike before this
        self._removal_busy_until = 0.0  # no replica_removal strike before this
        self._figure_8: _Figure8 | None = None  # the figure_8 strike under way
        self._figure_8_next = 0.0  # no figure_8 strike before this
        self._log_start: _LogStartDivergence | None = None  # the log_start_divergence strike under way
        self._next_log_start = 0.0  # no log_start_divergence strike before this
        self._next_stop_together = 0.0  # no stop_together strike before this
        self._leaders: dict[int, set] = {}  # node -> the (topic, partition) it leads
        self._snapshots: dict[int, tuple] = {}  # node -> its Raft snapshot id
        self._producer_ids: dict[int, int] = {}  # node -> its allocator's next id
        self._nursery: trio.Nursery | None = None
        self._next_pause = 0.0
        self._next_lag = 0.0
        self._next_bounce = 0.0
        self._next_reset = 0.0
        self._next_depose = 0.0
        self._next_controller_restart = 0.0
        self._until = 0.0  # the end of the fault phase
        self._raft_leader: tuple[int | None, float] = (None, 0.0)  # the Raft leader, and since when
        self.session_timeout = self.cluster.broker_session_timeout

    def describe(self) -> dict:
        return {"kinds": list(self.kinds), "strikes": dict(sorted(self.counts.items()))}

    async def run(self, until: float) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self._until = until
            self._next_pause = trio.current_time() + self.rng.uniform(0.5, 5.0)
            self._next_lag = trio.current_time() + self.rng.uniform(0.5, 4.0)
            self._next_bounce = trio.current_time() + self.rng.uniform(0.5, 3.0)
            self._next_reset = trio.current_time() + self.rng.uniform(0.5, 3.0)
            # Drawn only where struck: the other moments' draws stay those of the seed.
            if "deposed_leader" in self.kinds:
                self._next_depose = trio.current_time() + self.rng.uniform(0.5, 3.0)
            if "controller_restart" in self.kinds:
                self._next_controller_restart = trio.current_time() + self.rng.uniform(0.5, 2.0)
            if "log_start_divergence" in self.kinds:
                self._next_log_start = trio.current_time() + self.rng.uniform(0.5, 2.0)
            if "stop_together" in self.kinds:
                self._next_stop_together = trio.current_time() + self.rng.uniform(1.0, 3.0)
            while trio.current_time() < until:
                with trio.move_on_at(until):
                    await trio.sleep(POLL)
                now = trio.current_time()
                if now >= until:
                    break
                self._watch(now)
            self._nursery = None  # the hooks stay installed in the nodes: from now on they do nothing
            nursery.cancel_scope.cancel()

    # ------------------------------------------------------------------ watching

    def _watch(self, now: float) -> None:
        hosts = self.cluster.hosts
        for node_id, host in sorted(hosts.items()):
            if not host.up:
                self._leaders.pop(node_id, None)
                continue
            if "snapshot" in self.kinds:
                self._watch_snapshot(node_id, host, now)
            if "figure_8" in self.kinds:
                self._hook_raft_leadership(node_id, host)
            if "replica_removal" in self.kinds and self.cluster.mode == "cluster":
                self._hook_reassignments(node_id, host.controller_role())
            kafka = host.kafka() if self.cluster.mode == "cluster" else None
            if kafka is None:
                continue
            self._hook(node_id, kafka)
            self._hook_partitions(node_id, kafka)
            self._hook_transaction_coordinator(node_id, kafka)
            self._watch_leaders(node_id, kafka, now)
            if "producer_id" in self.kinds:
                self._watch_producer_ids(node_id, kafka, now)
            if "min_isr" in self.kinds:
                self._watch_min_isr(node_id, kafka, now)
        if "pause_leader" in self.kinds and now >= self._next_pause:
            self._next_pause = now + self.rng.uniform(3.0, 10.0)
            self._pause_a_leader(now)
        if "metadata_lag" in self.kinds and now >= self._next_lag and self.cluster.mode == "cluster":
            self._next_lag = now + self.rng.uniform(2.0, 6.0)
            self._lag_metadata(now)
        if "isr_expand" in self.kinds and now >= self._next_bounce and self.cluster.mode == "cluster":
            self._next_bounce = now + self.rng.uniform(2.0, 5.0)
            self._bounce_follower(now)
        if "voter_link_reset" in self.kinds and self.cluster.mode == "cluster":
            leader = self.cluster.leader()
            if leader != self._raft_leader[0]:
                self._raft_leader = (leader, now)
        # Only once its successor, elected a fetch timeout after the cut at the soonest, would
        # find that the leader had been the controller for a whole broker session: only then may
        # it take the leader's death as proof that no broker holds a lease from it.
        if ("voter_link_reset" in self.kinds and now >= self._next_reset and self.cluster.mode == "cluster"
                and now - self._raft_leader[1] >= self.session_timeout - VOTER_FETCH_TIMEOUT_S):
            self._next_reset = now + self.rng.uniform(3.0, 8.0)
            self._reset_voter_link(now)
        if "deposed_leader" in self.kinds and now >= self._next_depose and self.cluster.mode == "cluster":
            self._next_depose = now + self.rng.uniform(3.0, 8.0)
            self._depose_unaware_leader(now)
        if "figure_8" in self.kinds:
            self._hook_applies()
            self._watch_figure_8(now)
        if "log_start_divergence" in self.kinds and self.cluster.mode == "cluster":
            self._watch_log_start(now)
        if "stop_together" in self.kinds and now >= self._next_stop_together and self.cluster.mode == "cluster":
            self._stop_together(now)
        if "controller_restart" in self.kinds and now >= self._next_controller_restart:
            self._next_controller_restart = now + self.rng.uniform(15.0, 25.0)  # the sequence takes ~15 s
            self._restart_controller(now)

    def _hook(self, node_id: int, kafka) -> None:
        settings = kafka.replicas.replication
        # Marked on the wrapper, not remembered by id(): ids are reused, differently in each process.
        if (getattr(settings.on_isr_change, "moments", None) is self
                or not ({"isr_expand", "isr_shrink", "stale_isr", "log_start_divergence"} & set(self.kinds))):
            return
        original = settings.on_isr_change
        replicas = kafka.replicas

        def on_isr_change(kind: str) -> None:
            if original is not None:
                original(kind)
            if self._nursery is None:
                return
            if kind == "expand" and self._log_start is not None:
                self._log_start_expanding(node_id, replicas)
            moment = "isr_expand" if kind == "expand" else "isr_shrink"
            if moment not in self.kinds and "stale_isr" not in self.kinds:
                return
            now = trio.current_time()
            changing = [(key, p) for key, p in sorted(replicas.partitions.items())
                        if p.is_leader and p.isr_state.inflight
                        and (p.isr_state.adding is not None) == (kind == "expand")]
            # A data partition's change first: __consumer_offsets' partitions change as often
            # (they expand first when a broker comes back) but carry few writes to lose.
            data = [c for c in changing if not c[1].log.config.compact]
            if not changing:
                return
            key, p = self.rng.choice(data or changing)
            # Half the time the other ISR strikes go first where both are on.
            if ("stale_isr" in self.kinds and data and (moment not in self.kinds or self.rng.random() < 0.5)
                    and self._stale_isr(node_id, *self.rng.choice(data), now)):
                return
            if moment == "isr_shrink" and moment in self.kinds:
                self._strike(moment, node_id, now, key=key)
            elif moment == "isr_expand" and moment in self.kinds:
                # A data partition's expansion whose committed ISR already moves the HW: there
                # the expansion's answers are held too.
                ripe = [(k, q) for k, q in data if len(q.isr_state.isr) >= self.min_isr]
                if ripe and now >= self._hold_busy_until:
                    self._hold_busy_until = now + self.rng.uniform(1.0, 4.0)
                    self._expand(node_id, *self.rng.choice(ripe), now, hold=True)
                elif now >= self._expand_busy_until:
                    self._expand(node_id, key, p, now, hold=False)

        on_isr_change.moments = self
        settings.on_isr_change = on_isr_change

    def _expand(self, node_id: int, key, p, now: float, *, hold: bool) -> None:
        # Not held back by the other strikes: a follower rejoins right after the restart
        # another strike caused, and that is the very moment.
        self._expand_busy_until = now + self.rng.uniform(1.0, 4.0)
        adding = p.isr_state.adding
        self._cut_follower(node_id, adding)  # before the fetch answer leaves
        # Half the time (always with the answers held) the other members die with the leader
        # (killed, their disks intact), so the newcomer is the one ISR member left to take
        # over: whether it holds every committed record is then all that matters.
        others = tuple(r for r in p.isr_state.isr if r not in (node_id, adding))
        # With the answers held, long enough for the workload to write (a few records a second).
        wait = self._strike("isr_expand", node_id, now, key=key, follower=adding, force=True,
                            also=others if hold or self.rng.random() < 0.5 else (),
                            delay=(0.3, 1.5) if hold else None)
        if hold:
            self._hold_expansion(node_id, adding, key, wait, now)

    def _hook_partitions(self, node_id: int, kafka) -> None:
        """Told at once when a partition of this broker becomes leader (its change callback,
        called on role changes and appends): polling would see it only after the followers
        have fetched from the new leader, and the moment would be gone."""
        if not {"leader_change", "log_start_divergence"} & set(self.kinds):
            return
        for _, p in sorted(kafka.replicas.partitions.items()):
            if getattr(p._on_change, "moments", None) is self:
                continue
            original = p._on_change
            led = [p.leader_epoch if p.is_leader else -1]  # the leader epoch it last led in

            def on_change(key, p=p, original=original, led=led) -> None:
                if original is not None:
                    original(key)
                if self._nursery is None or not p.is_leader:
                    return
                if self._log_start is not None:
                    self._log_start_appended(node_id, p)
                if led[0] != p.leader_epoch and "leader_change" in self.kinds:
                    led[0] = p.leader_epoch
                    self._new_leader(node_id, p)

            on_change.moments = self
            p._on_change = on_change

    def _new_leader(self, node_id: int, p) -> None:
        """A new leader is cut off from its followers (its fetch answers are held) and dies soon.
        Not held back by the other moments' strikes: the leader elected because of one is the
        very moment (a second failure during the failover)."""
        now = trio.current_time()
        if now < self._leader_busy_until:
            return
        self._leader_busy_until = now + self.rng.uniform(1.0, 4.0)
        hosts = self.cluster.hosts
        seconds = self.rng.uniform(0.5, 3.0)
        for follower in p.registration.replicas:
            if follower != node_id and follower in hosts:
                self._block(node_id, follower, seconds)
        self._strike("leader_change", node_id, now, key=p.key, force=True)

    def _hook_reassignments(self, node_id: int, role) -> None:
        """Told when a controller takes a reassignment request, before the change it makes is
        committed: once committed, the removed follower would learn of it within milliseconds."""
        handlers = role.requests._handlers if role is not None and role.requests is not None else None
        if handlers is None or getattr(handlers[rpc.AlterPartitionReassignmentsRequest], "moments", None) is self:
            return
        original = handlers[rpc.AlterPartitionReassignmentsRequest]

        async def alter_reassignments(request, original=original, role=role):
            if self._nursery is not None and self.cluster.leader() == node_id:
                self._remove_replica(role.state_machine.image, request)
            return await original(request)

        alter_reassignments.moments = self
        handlers[rpc.AlterPartitionReassignmentsRequest] = alter_reassignments

    def _hook_transaction_coordinator(self, node_id: int, kafka) -> None:
        """Told at once when the broker's transaction coordinator appends a Complete* record
        (its driver's carry_out): the follower fetch that would commit it must not leave."""
        driver = kafka.transactions
        if "coordinator_clock" not in self.kinds or getattr(driver.carry_out, "moments", None) is self:
            return
        original = driver.carry_out

        def carry_out(out) -> None:
            original(out)
            if self._nursery is not None and out.appends:
                completing = [t for t, txn in sorted(driver.coordinator.txns.items())
                              if txn.pending_state in _COMPLETING]
                if completing:
                    self._step_coordinator_clock(node_id, driver, completing[0])

        carry_out.moments = self
        driver.carry_out = carry_out

    def _step_coordinator_clock(self, node_id: int, driver, transactional_id: str) -> None:
        now = trio.current_time()
        if now < self._clock_busy_until:
            return
        hosts = self.cluster.hosts
        hold, step_ms = self.rng.uniform(5.5, 8.0), self.rng.uniform(45_000, 120_000)
        self._clock_busy_until = now + hold + self.rng.uniform(2.0, 6.0)
        self._record("coordinator_clock", node=hosts[node_id].name, transactional_id=transactional_id,
                     step_ms=round(step_ms), hold=round(hold, 6))
        self.nemesis._apply({"kind": "clock_jump", "node": node_id, "delta_ms": step_ms}, now, self._nursery)
        for broker in self.cluster.broker_ids:
            if broker != node_id:
                self._block(node_id, broker, hold)
        self._nursery.start_soon(self._step_clock_back, node_id, driver, transactional_id, step_ms, hold)

    async def _step_clock_back(self, node_id: int, driver, transactional_id: str, step_ms: float,
                               hold: float) -> None:
        with trio.move_on_after(hold):
            while ("complete", transactional_id) not in driver.coordinator.timers:
                await trio.sleep(POLL)
        self.nemesis._apply({"kind": "clock_jump", "node": node_id, "delta_ms": -step_ms}, trio.current_time(),
                            self._nursery)

    def _watch_leaders(self, node_id: int, kafka, now: float) -> None:
        self._leaders[node_id] = {(t, i) for (t, i), p in kafka.replicas.partitions.items() if p.is_leader}

    def _watch_producer_ids(self, node_id: int, kafka, now: float) -> None:
        allocator = kafka.producer_states.allocator
        handed = allocator._next
        before = self._producer_ids.get(node_id)
        self._producer_ids[node_id] = handed
        if before is not None and handed != before:
            self._strike("producer_id", node_id, now)

    def _watch_snapshot(self, node_id: int, host, now: float) -> None:
        node = host.node
        driver = node.driver if node is not None else None
        if driver is None:
            return
        snapshot_id = driver.core.log.snapshot_id
        before = self._snapshots.get(node_id)
        self._snapshots[node_id] = snapshot_id
        if before is not None and snapshot_id != before:
            self._strike("snapshot", node_id, now)

    def _watch_min_isr(self, node_id: int, kafka, now: float) -> None:
        if now < self._busy_until:
            return
        for key, p in sorted(kafka.replicas.partitions.items()):
            if p.is_leader and len(p.isr) == self.min_isr and len(p.registration.replicas) > self.min_isr:
                if self.rng.random() < 0.02:  # not at once: the ISR is often at its minimum for seconds
                    self._strike("min_isr", self.rng.choice(sorted(p.isr)), now, key=key, power=True)
                return

    # ------------------------------------------------------------------ striking

    def _cut_follower(self, leader: int, follower: int | None) -> None:
        if follower is None or self._nursery is None:
            return
        self._block(leader, follower, self.rng.uniform(1.0, 4.0))

    def _strike(self, moment: str, node_id: int, now: float, *, key=None, follower=None, power=None,
                force: bool = False, also: tuple[int, ...] = (), delay: tuple[float, float] | None = None
                ) -> float | None:
        """Kill or power off `node_id` after the moment's delay; `also` are killed with it.
        Returns the delay (None: no strike now)."""
        if (now < self._busy_until and not force) or self._nursery is None:
            return None
        delay = delay or {"isr_expand": (0.02, 0.5), "isr_shrink": (0.0, 0.05), "leader_change": (0.0, 0.3),
                 "producer_id": (0.0, 0.3), "snapshot": (0.0, 0.05), "min_isr": (0.0, 0.2)}[moment]
        wait = self.rng.uniform(*delay)
        if power is None:
            power = self.rng.random() < 0.5
        self._busy_until = max(self._busy_until, now + wait + self.rng.uniform(1.0, 4.0))
        extra = {"also": [self.cluster.hosts[n].name for n in also]} if also else {}
        self._record(moment, node=self.cluster.hosts[node_id].name, key=key, follower=follower, after=round(wait, 6),
                     **extra)
        self._nursery.start_soon(self._kill_later, node_id, wait, power)
        for other in also:
            self._nursery.start_soon(self._kill_later, other, wait, False)
        return wait

    async def _kill_later(self, node_id: int, wait: float, power: bool, restart_after: float | None = None) -> None:
        await trio.sleep(wait)
        nemesis = self.nemesis
        if not self.cluster.hosts[node_id].up:
            return
        kind = "power_loss" if power and self._may_lose_power(node_id) else "kill"
        if restart_after is None:
            restart_after = self.rng.uniform(0.1, 3.0)
        nemesis._apply({"kind": kind, "node": node_id, "restart_after": restart_after},
                       trio.current_time(), self._nursery)

    def _may_lose_power(self, node_id: int) -> bool:
        return self.cluster.loses_page_cache(node_id) or self.nemesis.broker_power_losses < BROKER_POWER_LOSS_BUDGET

    def _full_isr_partitions(self) -> list[tuple[int, tuple, object]]:
        """(leader, key, partition) of every data partition led on a live broker whose ISR is its
        whole replica set and above min.insync.replicas."""
        hosts = self.cluster.hosts
        full = []
        for node_id in self.cluster.broker_ids:
            kafka = hosts[node_id].kafka() if hosts[node_id].up else None
            for key, p in sorted(kafka.replicas.partitions.items()) if kafka is not None else ():
                if (p.is_leader and not p.log.config.compact and len(p.isr_state.isr) > self.min_isr
                        and len(p.isr_state.isr) == len(p.registration.replicas)):
                    full.append((node_id, key, p))
        return full

    def _cut(self, a: int, b: int, seconds: float) -> None:
        """Nothing crosses between a and b, either way, for `seconds`."""
        self._block(a, b, seconds)
        self._block(b, a, seconds)

    def _block(self, src: int, dst: int, seconds: float) -> None:
        hosts = self.cluster.hosts
        self.nemesis._apply({"kind": "oneway", "src": hosts[src].name, "dst": hosts[dst].name, "seconds": seconds},
                            trio.current_time(), self._nursery)

    def _record(self, moment: str, **fields) -> None:
        self.counts[moment] = self.counts.get(moment, 0) + 1
        self.trace.record("moments", moment, **fields)

    def _hold_expansion(self, leader: int, follower: int | None, key, wait: float, now: float) -> None:
        """An expansion strike's variant: the leader's connections to the newcomer reset (cut
        off by `_cut_follower`, the newcomer cannot fetch again) and the controllers' answers to
        the leader held for most of the strike's delay, so the change stays in flight at the
        leader after the controller committed it. Only the maximal ISR then keeps the HW from
        passing the newcomer's log end before the leader and the other members die."""
        if follower is None or wait is None:
            return
        hosts = self.cluster.hosts
        hold = wait * self.rng.uniform(0.5, 1.0)
        self._record("isr_expand_hold", node=hosts[leader].name, key=key, follower=hosts[follower].name,
                     hold=round(hold, 6))
        self.nemesis._apply({"kind": "reset", "a": hosts[leader].name, "b": hosts[follower].name}, now, self._nursery)
        for controller in self.cluster.voters:
            self._block(controller, leader, hold)

    def _stale_isr(self, leader: int, key, p, now: float) -> bool:
        """A leader proposed an ISR change: its requests to the controllers are held 1.2-2.5 s
        (within its session) while an ISR member loses power at once and restarts, so the
        controller drops that member from the ISR (fenced, or registered again after an unclean
        shutdown) under the proposal, which arrives stale. The member's fetch answers stay held,
        and once the proposal has landed the leader and the other members die: a stale ISR
        accepted would leave the member that lost records the one to lead."""
        hosts = self.cluster.hosts
        # Not held back by the other strikes: ISR changes follow the restarts they cause, so
        # nearly every proposal comes within their pause.
        if now < self._stale_busy_until or not hosts[leader].up:
            return False
        state = p.isr_state
        members = [r for r in state.isr if r not in (leader, state.adding, *state.removing)
                   and r in hosts and hosts[r].up and self._may_lose_power(r)]
        if not members:
            return False
        victim = self.rng.choice(members)
        hold = self.rng.uniform(1.2, 2.5)
        after = hold + self.rng.uniform(0.05, 0.3)
        self._stale_busy_until = now + after + self.rng.uniform(1.0, 4.0)
        self._busy_until = max(self._busy_until, self._stale_busy_until)
        self._record("stale_isr", node=hosts[leader].name, key=key, victim=hosts[victim].name, hold=round(hold, 6),
                     after=round(after, 6))
        for controller in self.cluster.voters:
            self._block(leader, controller, hold)
        self._block(leader, victim, after + 1.0)
        self._nursery.start_soon(self._kill_later, victim, 0.0, True, self.rng.uniform(0.1, 0.5))
        for other in [leader, *(r for r in (*state.isr, state.adding) if r not in (None, leader, victim))]:
            self._nursery.start_soon(self._kill_later, other, after, False)
        return True

    def _reset_voter_link(self, now: float) -> None:
        """The connections between the Raft leader and one voter following it reset; the voter
        reconnects and hears from it again, then the other voters are cut off from the leader
        and from the brokers for 2.5-3.5 s: a successor may be elected while the brokers, which
        reach only the old leader, hear of no successor until the cut ends, which may be longer
        than the close grace after it took over. The successor must not take its predecessor
        for dead: it answered after the reset."""
        # Not held back by the other strikes' pauses: those mostly strike brokers, and one
        # follows another so closely that this one would seldom come.
        if now < self._reset_busy_until:
            return
        hosts = self.cluster.hosts
        leader = self.cluster.leader()
        voters = [v for v in self.cluster.voters if v != leader and hosts[v].up]
        # The cut outlasts the voters' fetch timeout (2 s) and mostly an election, and ends
        # within the fault phase.
        heard, cut = self.rng.uniform(0.3, 1.0), self.rng.uniform(2.5, 3.5)
        if leader is None or not voters or now + heard + cut + 1.0 > self._until:
            return
        voter = self.rng.choice(voters)
        self._reset_busy_until = now + heard + cut + self.rng.uniform(1.0, 3.0)
        self._busy_until = max(self._busy_until, self._reset_busy_until)
        self._record("voter_link_reset", node=hosts[voter].name, leader=hosts[leader].name, heard=round(heard, 6),
                     cut=round(cut, 6))
        self.nemesis._apply({"kind": "reset", "a": hosts[voter].name, "b": hosts[leader].name}, now, self._nursery)
        self._nursery.start_soon(self._depose_later, leader, heard, cut)

    async def _depose_later(self, leader: int, heard: float, cut: float) -> None:
        await trio.sleep(heard)
        if not self.cluster.hosts[leader].up:
            return
        others = [v for v in self.cluster.voters if v != leader]
        for voter in others:
            for node in [leader, *self.cluster.broker_ids]:
                if node != voter:
                    self._cut(node, voter, cut)
        with trio.move_on_after(cut):  # for the coverage: how often a successor took over
            while self.cluster.leader() in (None, leader):
                await trio.sleep(POLL)
            self._record("voter_link_reset_successor", node=self.cluster.hosts[self.cluster.leader()].name)

    def _depose_unaware_leader(self, now: float) -> None:
        """A data partition leader whose ISR is full loses its links to the controllers (only
        those) for a broker session and 0.3-1.5 s more: it is fenced and a successor elected
        while it, not told, still takes the produce requests of clients whose metadata is as old
        as its own. Its followers fetch from the successor now, so what it appends waits for
        acks=all that no follower will give; once the cut ends it follows the successor and
        truncates those batches. Their waiting acknowledgements must not succeed."""
        if now < self._busy_until:
            return
        leaders = sorted({node_id for node_id, _, _ in self._full_isr_partitions()})
        if not leaders:
            return
        leader = self.rng.choice(leaders)
        seconds = self.session_timeout + self.rng.uniform(0.3, 1.5)
        self._busy_until = now + seconds + self.rng.uniform(1.0, 3.0)
        self._record("deposed_leader", node=self.cluster.hosts[leader].name, seconds=round(seconds, 3))
        for controller in self.cluster.voters:
            self._cut(leader, controller, seconds)

    def _stop_together(self, now: float) -> None:
        """Stop every node at once (their controlled shutdowns), where that must leave no broker
        waiting: every node up, each both broker and controller, an active controller, and no
        other fault in the run (a cut link or a paused node may hold a shutdown up rightly)."""
        hosts = self.cluster.hosts
        if now > self._until - self.session_timeout - 1.0:
            return  # the stops must end before the fault phase does (its end kills a node still stopping)
        if (self.nemesis.profile.kinds or not all(h.up and h.is_broker and h.is_controller for h in hosts.values())
                or self.cluster.leader() is None):
            self._next_stop_together = now + 1.0
            return
        self._next_stop_together = now + self.rng.uniform(15.0, 20.0)  # the stops take up to 10 s
        self._record("stop_together", nodes=len(hosts))
        strike = {"kind": "stop_together", "nodes": sorted(hosts), "restart_after": self.rng.uniform(0.5, 2.0)}
        self.nemesis._apply(strike, now, self._nursery)

    def _restart_controller(self, now: float) -> None:
        """The Raft leader dies and restarts at once (its disk intact): the voters that followed
        it find its link broken and a new connection refused, so they take it for dead. Then it
        is made to lead again: the other two voters are cut off from each other, so whichever
        wins the election, with the restarted leader's vote, replicates only to it; then the
        winner is cut off from both until they elect again, and the restarted leader, whose log
        is now the longer, wins. Once it has led as long as voter_link_reset waits, that strike
        follows. A voter that took it for dead must take it for alive once it heard from it,
        or the successor takes the leases of its second reign for gone with the first one's."""
        if now < self._busy_until:
            return
        leading = self.cluster.leader_and_epoch()
        if leading is None:
            return
        epoch, first = leading
        others = [v for v in self.cluster.voters if v != first and self.cluster.hosts[v].up]
        if len(others) != 2:
            return
        self._busy_until = now + self.rng.uniform(4.0, 6.0)
        restart_after = self.rng.uniform(0.1, 0.5)
        self._record("controller_restart", node=self.cluster.hosts[first].name, restart_after=round(restart_after, 6))
        self._nursery.start_soon(self._kill_later, first, 0.0, False, restart_after)
        a, b = others
        self._cut(a, b, 4.0)
        self._nursery.start_soon(self._lead_again, first, epoch)

    async def _lead_again(self, first: int, epoch: int) -> None:
        hosts = self.cluster.hosts
        for _ in range(2):
            leading = None
            with trio.move_on_after(8.0):
                while leading is None or leading[0] <= epoch or not hosts[first].up:
                    await trio.sleep(POLL)
                    leading = self.cluster.leader_and_epoch()
            if leading is None or leading[0] <= epoch:
                return
            epoch, leader = leading
            if leader == first:
                await trio.sleep(self.session_timeout - VOTER_FETCH_TIMEOUT_S)
                if self.cluster.leader_and_epoch() == leading:
                    self._reset_voter_link(trio.current_time())
                return
            await trio.sleep(0.3)  # its first entries reach the restarted leader, not the voter cut off
            seconds = VOTER_FETCH_TIMEOUT_S + self.rng.uniform(1.0, 2.0)
            self._record("controller_restart_cut", node=hosts[leader].name, seconds=round(seconds, 3))
            for voter in self.cluster.voters:
                if voter != leader:
                    self._cut(leader, voter, seconds)

    def _remove_replica(self, image, request) -> None:
        now = trio.current_time()
        hosts = self.cluster.hosts
        if now < self._removal_busy_until:
            return
        for asked in request.reassignments:
            topic = image.topic(asked.topic) if asked.replicas is not None else None
            part = topic.partitions.get(asked.partition) if topic is not None else None
            if part is None or asked.topic.startswith("__"):
                continue
            removed = [r for r in part.replicas if r not in asked.replicas and r != part.leader
                       and r in hosts and hosts[r].up]
            if not removed:
                continue
            follower = self.rng.choice(removed)
            # Within the session (3 s, heartbeats every 0.5 s): a fenced follower may not join.
            seconds = self.rng.uniform(1.5, 2.3)
            self._removal_busy_until = now + seconds + self.rng.uniform(0.5, 2.0)
            key = (asked.topic, asked.partition)
            self._record("replica_removal", node=hosts[follower].name, key=key, seconds=round(seconds, 3))
            for controller in self.cluster.voters:
                self._cut(follower, controller, seconds)
            self._nursery.start_soon(self._strike_if_readded, follower, key, seconds)
            return

    async def _strike_if_readded(self, follower: int, key, seconds: float) -> None:
        hosts = self.cluster.hosts
        cut_ends = trio.current_time() + seconds
        removed = False  # the committed assignment went without the follower during the cut
        while not removed and trio.current_time() < cut_ends:
            with trio.move_on_at(cut_ends):
                await trio.sleep(POLL)
            part = self._committed_partition(key)
            removed = part is not None and follower not in part.replicas
        await trio.sleep_until(cut_ends)
        part = self._committed_partition(key) if removed else None
        # Counted in sync again while it could not have heard of its removal.
        if part is None or follower not in part.isr or part.leader not in hosts or not hosts[part.leader].up:
            return
        others = tuple(r for r in part.isr if r not in (part.leader, follower))
        self._record("replica_removal_readded", node=hosts[part.leader].name, key=key,
                     follower=hosts[follower].name, epoch=part.leader_epoch)
        self._block(part.leader, follower, 1.0)
        for node in (part.leader, *others):
            self._nursery.start_soon(self._kill_later, node, 0.0, False)

    def _watch_log_start(self, now: float) -> None:
        s = self._log_start
        if s is None:
            if now >= self._next_log_start and now >= self._busy_until:
                self._depose_retained_leader(now)
            return
        if now > s.give_up or not self.cluster.hosts[s.old_leader].up:
            self._end_log_start(s, now)
        elif s.stage == "deposed":
            self._log_start_successor(s)
        elif s.stage == "rolling":
            old, new = self._partition(s.old_leader, RETAINED_KEY), self._partition(s.leader, RETAINED_KEY)
            if old is None or new is None or not new.is_leader or new.log.high_watermark > old.log.log_end_offset:
                self._end_log_start(s, now)  # no segment can roll at the HW below the old leader's log end now
        elif s.stage in ("frozen", "rejoining"):
            new = self._partition(s.leader, RETAINED_KEY)
            if new is None or not new.is_leader or new.log.high_watermark != s.base:
                self._end_log_start(s, now)  # the cut-off follower left the ISR: the HW moved on
            elif s.stage == "frozen" and new.log.log_start_offset == s.base:
                s.stage = "rejoining"
                for broker in self.cluster.broker_ids:
                    if broker != s.old_leader:
                        self._cut(s.old_leader, broker, 0.001)  # the long cut ends 1 ms from now
        elif s.stage == "joining":
            new = self._partition(s.leader, RETAINED_KEY)
            if new is None or not new.is_leader:
                self._end_log_start(s, now)
            elif s.old_leader in new.isr_state.isr:  # the change committed, as the successor heard
                hosts = self.cluster.hosts
                self._log_start = None
                self._record("log_start_divergence_joined", node=hosts[s.leader].name,
                             follower=hosts[s.old_leader].name, base=s.base, epoch=new.leader_epoch)
                # Back only after both sessions ended: the old leader is the one ISR member to lead.
                restart_after = self.rng.uniform(3.5, 5.0)
                for node in (s.leader, s.follower):
                    self._nursery.start_soon(self._kill_later, node, 0.0, False, restart_after)

    def _depose_retained_leader(self, now: float) -> None:
        """The retained partition's leader, its ISR full, is cut off from the controllers for a
        broker session and 0.3-1.5 s more, and from the other brokers until its successor's log
        start has passed where their logs part (at most the strike's 12 s)."""
        full = [(leader, p) for leader, key, p in self._full_isr_partitions() if key == RETAINED_KEY]
        if not full or now + 9.0 > self._until:  # the strike takes some 8 s
            return
        leader, p = full[0]
        seconds = self.session_timeout + self.rng.uniform(0.3, 1.5)
        self._log_start = _LogStartDivergence(old_leader=leader, epoch=p.leader_epoch, give_up=now + 12.0)
        self._next_log_start = now + 12.0 + self.rng.uniform(1.0, 3.0)
        self._record("log_start_divergence", node=self.cluster.hosts[leader].name, epoch=p.leader_epoch,
                     seconds=round(seconds, 3))
        for controller in self.cluster.voters:
            self._cut(leader, controller, seconds)
        for broker in self.cluster.broker_ids:
            if broker != leader:
                self._cut(leader, broker, 12.0)

    def _log_start_successor(self, s: _LogStartDivergence) -> None:
        """The successor, as it knows itself: leading in a later epoch, with one other ISR member."""
        for broker in self.cluster.broker_ids:
            new = self._partition(broker, RETAINED_KEY) if broker != s.old_leader else None
            if new is None or not new.is_leader or new.leader_epoch <= s.epoch:
                continue
            others = [r for r in new.isr_state.isr if r != broker]
            starts = [start for epoch, start in new.log.epoch_cache.entries() if epoch > s.epoch]
            if len(others) == 1 and s.old_leader not in new.isr_state.isr and starts:
                s.leader, s.follower, s.divergence, s.stage = broker, others[0], min(starts), "rolling"
            return

    def _log_start_appended(self, node_id: int, p) -> None:
        """The successor appended: if that rolled a segment at its HW, above where the logs part
        and within the old leader's log, its other follower is cut off before it fetches, so
        the HW stands at that segment's base."""
        s = self._log_start
        if s.stage != "rolling" or node_id != s.leader or p.key != RETAINED_KEY:
            return
        log = p.log
        base = log.active_segment.base_offset
        old = self._partition(s.old_leader, p.key)
        if (old is None or base != log.high_watermark or base >= log.log_end_offset or base <= s.divergence
                or base > old.log.log_end_offset):
            return
        s.stage, s.base = "frozen", base
        self._cut(s.leader, s.follower, s.give_up - trio.current_time())

    def _log_start_expanding(self, node_id: int, replicas) -> None:
        """The successor proposed the old leader for the ISR: its answers to it are held from
        now on, so it never hears the log start it would follow."""
        s = self._log_start
        p = replicas.partitions.get(RETAINED_KEY)
        if (s.stage != "rejoining" or node_id != s.leader or p is None or not p.is_leader
                or p.isr_state.adding != s.old_leader):
            return
        s.stage = "joining"
        self._block(s.leader, s.old_leader, s.give_up - trio.current_time())

    def _end_log_start(self, s: _LogStartDivergence, now: float) -> None:
        """It did not come together: the cuts it made end, and another try comes later."""
        self._log_start = None
        self._next_log_start = max(self._next_log_start, now + self.rng.uniform(1.0, 3.0))
        if s.stage in ("deposed", "rolling", "frozen"):
            for broker in self.cluster.broker_ids:
                if broker != s.old_leader:
                    self._cut(s.old_leader, broker, 0.001)
        if s.stage in ("frozen", "rejoining", "joining"):
            self._cut(s.leader, s.follower, 0.001)
        if s.stage == "joining":
            self._block(s.leader, s.old_leader, 0.001)

    def _partition(self, node_id: int, key):
        """A live broker's replica of the partition (None: none)."""
        host = self.cluster.hosts.get(node_id)
        kafka = host.kafka() if host is not None and host.up else None
        return None if kafka is None else kafka.replicas.partitions.get(key)

    def _committed_partition(self, key):
        """The partition's registration in the active controller's image (None: no such)."""
        controller = self.cluster.leader()
        machine = self.cluster.hosts[controller].controller_state_machine() if controller is not None else None
        topic = machine.image.topic(key[0]) if machine is not None else None
        return topic.partitions.get(key[1]) if topic is not None else None

    def _hook_raft_leadership(self, node_id: int, host) -> None:
        """Told when a voter wins an election, before its first message leaves."""
        core = host.node.driver.core if host.up and host.node is not None and host.node.driver is not None else None
        if core is None or getattr(core._become_leader, "moments", None) is self:
            return
        original = core._become_leader

        def become_leader(now: float, original=original, core=core) -> None:
            original(now)
            if self._nursery is not None:
                self._figure_8_leader(node_id, core.quorum.epoch, core.log.end_offset - 1)

        become_leader.moments = self
        core._become_leader = become_leader

    def _hook_applies(self) -> None:
        """Told of every entry a node applies (the checker's own report), as it applies it."""
        checker = self.cluster.checker
        if getattr(checker.on_apply, "moments", None) is self:
            return
        original = checker.on_apply

        def on_apply(node: int, offset: int, epoch: int, payload: bytes, control: bool, original=original) -> None:
            original(node, offset, epoch, payload, control)
            if self._nursery is not None:
                self._figure_8_applied(node, offset, epoch)

        on_apply.moments = self
        checker.on_apply = on_apply

    def _watch_figure_8(self, now: float) -> None:
        hosts = self.cluster.hosts
        f = self._figure_8
        if f is not None:
            if now > f.until:
                self._figure_8 = None  # it did not come together: another try later
            return
        if now < self._figure_8_next or now + 12.0 > self._until:
            return
        leader = self.cluster.leader()
        st = hosts[leader].status() if leader is not None else None
        if st is None:
            return
        followers = [r.log_end_offset for r in st.voters if r.replica_id != leader]
        if len(followers) != 2 or st.log_end_offset <= max(followers) + 1:
            return  # a tail of two entries at least: the third voter takes it one fetch at a time
        others = [v for v in self.cluster.voters if v != leader]
        self._figure_8 = _Figure8(leader=leader, epoch=st.epoch, tail=max(followers), until=now + 12.0)
        self._figure_8_next = now + 12.0 + self.rng.uniform(1.0, 3.0)
        self._record("figure_8", node=hosts[leader].name, epoch=st.epoch, tail=max(followers),
                     end=st.log_end_offset)
        for voter in others:
            self._cut(leader, voter, 5.0)

    def _figure_8_leader(self, node_id: int, epoch: int, leader_change_offset: int) -> None:
        f = self._figure_8
        if f is None:
            return
        if f.unheard is None and node_id != f.leader and epoch > f.epoch:
            # Elected while the old leader is cut off: its messages are held from now on, so its
            # LeaderChange record stays its own. The old leader stays cut off from it.
            f.unheard = node_id
            f.tail = leader_change_offset  # the old leader's entries from here conflict with it
            for other in self.cluster.voters:
                if other != node_id:
                    self._block(node_id, other, 8.0)
            self._cut(node_id, f.leader, 8.0)
        elif f.unheard is not None and node_id == f.leader:
            f.epoch_again = epoch

    def _figure_8_applied(self, node_id: int, offset: int, epoch: int) -> None:
        f = self._figure_8
        if f is None or f.epoch_again is None or node_id != f.leader or epoch != f.epoch or offset < f.tail:
            return
        # The old leader, leading again, applies an entry of its tail: it dies now, and the
        # unheard voter is heard again (a held pair's block ends 1 ms from now).
        self._figure_8 = None
        hosts = self.cluster.hosts
        third = [v for v in self.cluster.voters if v not in (node_id, f.unheard)]
        self._record("figure_8_commit", node=hosts[node_id].name, offset=offset, epoch=epoch,
                     unheard=hosts[f.unheard].name)
        for voter in third:
            self._cut(node_id, voter, 3.0)
            self._block(f.unheard, voter, 0.001)
        self._nursery.start_soon(self._kill_later, node_id, 0.0, False, self.rng.uniform(1.0, 3.0))

    def _bounce_follower(self, now: float) -> None:
        """A follower of a data partition whose ISR is full dies and comes back at once, so
        that ISR shrinks and grows again while still at min.insync.replicas: the expansion the
        isr_expand strike with held answers waits for (faults leave most ISRs below it). Not
        held back by the other strikes, which leave little time between them."""
        full = self._full_isr_partitions()
        if not full:
            return
        hosts = self.cluster.hosts
        leader, key, p = self.rng.choice(full)
        follower = self.rng.choice([r for r in p.isr_state.isr if r != leader])
        self._record("isr_expand_bounce", node=hosts[follower].name, key=key)
        self._nursery.start_soon(self._kill_later, follower, 0.0, False, self.rng.uniform(0.1, 0.6))

    def _pause_a_leader(self, now: float) -> None:
        if now < self._busy_until:
            return
        leaders = sorted(n for n, led in self._leaders.items() if led and self.cluster.hosts[n].up)
        if not leaders:
            return
        node_id = self.rng.choice(leaders)
        seconds = self.session_timeout + self.rng.uniform(0.2, 3.0)
        self._busy_until = now + seconds + self.rng.uniform(1.0, 3.0)
        self._record("pause_leader", node=self.cluster.hosts[node_id].name, seconds=round(seconds, 3))
        self.nemesis._apply({"kind": "pause", "node": node_id, "seconds": seconds}, now, self._nursery)

    def _lag_metadata(self, now: float) -> None:
        if now < self._busy_until:
            return
        hosts = self.cluster.hosts
        followers = {}  # broker -> leaders of partitions it follows
        for node_id in self.cluster.broker_ids:
            kafka = hosts[node_id].kafka()
            if kafka is None:
                continue
            for _, p in sorted(kafka.replicas.partitions.items()):
                leader = p.registration.leader
                if not p.is_leader and leader != node_id and leader in hosts and hosts[leader].up:
                    followers.setdefault(node_id, set()).add(leader)
        if not followers:
            return
        lagging = self.rng.choice(sorted(followers))
        seconds = self.rng.uniform(0.5, 5.0)
        self._busy_until = now + seconds + self.rng.uniform(1.0, 3.0)
        self._record("metadata_lag", node=hosts[lagging].name, seconds=round(seconds, 3))
        for controller in self.cluster.voters:
            self._cut(lagging, controller, seconds)
        leader = self.rng.choice(sorted(followers[lagging]))
        self._nursery.start_soon(self._kill_later, leader, self.rng.uniform(0.05, min(1.0, seconds)), False)
