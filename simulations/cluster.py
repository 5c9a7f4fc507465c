"""A simulated cluster: the real node code (raftkafka.node.ControllerNode: storage → Raft
core → driver → transport, plus in "cluster" mode the real MetadataApp — active controller,
metadata loader, broker lifecycle and the Kafka broker) on simulated Envs, one trio task
tree per node.

- Modes: "raft" runs controllers whose state machine only records entries (the Raft
  workload); "cluster" runs full nodes: controllers 1..c, and broker-only nodes
  c+1..c+b (with b = 0 the controllers are combined broker+controller nodes).
- Each node is a `NodeHost`: a name ("n1"), its roles, a disk (MemFileSystem) that
  survives its incarnations, a skewable wall clock, and the current incarnation's
  SimEnv, ControllerNode and cancel scope.
- kill = the incarnation dies (its Env refuses further I/O), its cancel scope is
  cancelled, its connections reset and listeners gone, then its disk crashes
  (unfsynced data lost, last write possibly torn).
- restart = a new incarnation built from the crashed disk, as a real process
  restart would.
- A node whose run raises is a finding unless the exception is a disk error the
  nemesis injected (then it is a crash, like a process dying on EIO/ENOSPC).
- pause = a process frozen (SIGSTOP, a long GC pause): every byte to or from it waits
  in the network, and its Env's sleeps do not return, until it resumes with the state
  it had. (Deadlines node code sets with trio cancel scopes still expire meanwhile.)

`poll()` feeds every live node's status and every disk's durable state to the
RaftChecker; the harness calls it on a short sim-time period.
"""
from __future__ import annotations

import contextlib
import math
import posixpath
import random
import weakref
import uuid

import msgpack
import trio

from raft.entry import Entry
from raft.node_storage import METADATA_DIR, NodeStorage
from raft.quorum_state import Role
from raftkafka.node.assembly import ControllerNode, shut_down_gracefully
from raftkafka.node.config import load_config
from raftkafka.node.metadata_roles import MetadataApp
from simulations.checkers.metadata import MetadataChecker
from simulations.checkers.raft import GENESIS_DIGEST, DurableLog, RaftChecker, entry_digest
from simulations.env import SimEnv, SkewedClock, derive_seed
from simulations.network import SimNetwork
from simulations.node_logs import stack_summary
from simulations.trace import Trace
from storage.memfs import MemFileSystem
from storage.meta_properties import DataDirError, MetaProperties, VoterSpec, format_data_dir, uuid_to_str
from storage.quorum_state_file import QuorumStateFile

__all__ = ["SimCluster", "NodeHost", "ControllerHost", "DATA_DIR", "CONTROLLER_PORT", "BROKER_PORT", "CLUSTER_ID"]

DATA_DIR = "/data"
CONTROLLER_PORT = 9093
BROKER_PORT = 9092
DUPLICATE_PORT_SHIFT = 100  # a duplicate process (start_duplicate) listens on these ports + this
DUPLICATE_INCARNATIONS = 1_000_000  # a duplicate's Env seeds, apart from the real incarnations'
CLUSTER_ID = uuid_to_str(uuid.UUID(int=0x5EED))


class CheckedStateMachine:
    """The Raft state machine of a simulated node: reports every applied entry to the checker.

    Its snapshot is (end offset, digest of the prefix), so a restored snapshot is
    checked against the committed prefix it claims to cover.
    """

    def __init__(self, node_id: int, checker: RaftChecker):
        self.node_id = node_id
        self.checker = checker
        self.end = 0
        self.digest = GENESIS_DIGEST

    def restore(self, snapshot_id: tuple[int, int], data: bytes | None) -> None:
        end, digest = (0, GENESIS_DIGEST) if data is None else msgpack.unpackb(data)
        if end != snapshot_id[0]:
            self.checker.violate("ConsistentCommittedData",
                                 f"node {self.node_id}: snapshot {tuple(snapshot_id)} holds state up to {end}")
        self.end, self.digest = end, digest
        self.checker.on_restore(self.node_id, end, digest)

    def apply(self, entries: list[Entry], high_watermark: int) -> None:
        for e in entries:
            payload = bytes(e.payload)
            self.checker.on_apply(self.node_id, e.offset, e.epoch, payload, bool(e.control))
            self.digest = entry_digest(self.digest, e.offset, e.epoch, payload, bool(e.control))
            self.end = e.offset + 1

    def snapshot(self) -> bytes:
        return msgpack.packb([self.end, self.digest])


class ReportingStateMachine:
    """Wraps a node's real metadata state machine: every applied entry is reported to the
    Raft checker first. A restored snapshot holds an image, not a digest; the metadata
    checker compares the image it yields with the replayed committed log instead."""

    def __init__(self, inner, node_id: int, checker: RaftChecker):
        self.inner = inner
        self.node_id = node_id
        self.checker = checker

    def restore(self, snapshot_id: tuple[int, int], data: bytes | None) -> None:
        self.checker.on_restore_unverified(self.node_id, snapshot_id[0])
        self.inner.restore(snapshot_id, data)

    def apply(self, entries: list[Entry], high_watermark: int) -> None:
        for e in entries:
            self.checker.on_apply(self.node_id, e.offset, e.epoch, bytes(e.payload), bool(e.control))
        self.inner.apply(entries, high_watermark)

    def snapshot(self) -> bytes:
        return self.inner.snapshot()


class PausableEnv(SimEnv):
    """A SimEnv whose process can be frozen: every timer stalls. A sleep that ends while
    paused returns only at the resume, and a deadline (a cancel scope from move_on_at,
    move_on_after, fail_after) that passes while paused expires at the resume, as the timers
    of a stopped process fire when it runs again."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._resumed: trio.Event | None = None  # not None while paused
        self.paused_until = 0.0
        self._scopes: weakref.WeakSet[trio.CancelScope] = weakref.WeakSet()  # this Env's deadlines
        self._held: dict[trio.CancelScope, float] = {}  # while paused: scope -> its real deadline

    @property
    def paused(self) -> bool:
        return self._resumed is not None

    def pause(self) -> None:
        if self._resumed is None:
            self._resumed = trio.Event()
            for scope in list(self._scopes):
                self._hold(scope)

    def resume(self) -> None:
        if self._resumed is not None:
            self._resumed.set()
            self._resumed = None
            held, self._held = self._held, {}
            for scope, deadline in held.items():
                scope.deadline = deadline  # one that passed meanwhile expires now

    def _hold(self, scope: trio.CancelScope) -> None:
        if scope.deadline != math.inf and not scope.cancel_called:
            self._held[scope] = scope.deadline
            scope.deadline = math.inf

    def _track(self, scope: trio.CancelScope) -> trio.CancelScope:
        self._scopes.add(scope)
        if self._resumed is not None:
            self._hold(scope)
        return scope

    def move_on_at(self, deadline: float) -> trio.CancelScope:
        return self._track(trio.CancelScope(deadline=deadline))

    def move_on_after(self, seconds: float) -> trio.CancelScope:
        return self._track(trio.CancelScope(deadline=self.now() + seconds))

    @contextlib.contextmanager
    def fail_after(self, seconds: float):
        with self.move_on_after(seconds) as scope:
            yield scope
        if scope.cancelled_caught:
            raise trio.TooSlowError

    async def _until_resumed(self) -> None:
        while self._resumed is not None:
            await self._resumed.wait()

    async def sleep(self, seconds: float) -> None:
        await super().sleep(seconds)
        if self._resumed is not None:
            await self._until_resumed()

    async def sleep_until(self, deadline: float) -> None:
        await super().sleep_until(deadline)
        if self._resumed is not None:
            await self._until_resumed()


class NodeHost:
    def __init__(self, node_id: int, roles: tuple[str, ...], clock: SkewedClock):
        self.node_id = node_id
        self.roles = roles
        self.name = f"n{node_id}"
        self.disk = MemFileSystem()
        self.clock = clock
        self.incarnation = 0
        self.env: PausableEnv | None = None
        self.node: ControllerNode | None = None
        self.scope: trio.CancelScope | None = None
        self.disk_fault = False  # the nemesis made this disk fail: an OSError is then a crash
        # Errors the disk raised during this incarnation (ENOSPC from disk_full, EIO from
        # fsync_error): one may surface after the fault ended, once the node's shielded
        # cleanup is done, and is still the fault's.
        self.injected_errnos: set[int] = set()
        self.stop_scope: trio.CancelScope | None = None  # a graceful stop under way (SimCluster.stop)
        self.stopping = False  # this incarnation ends by a graceful stop
        self.wipes = 0  # how often its disk was wiped (each time formatted again: a new directory id)
        self.needs_format = False
        self.duplicates: list[ControllerNode] = []  # second processes running on this disk (start_duplicate)

    @property
    def up(self) -> bool:
        return self.env is not None and self.env.alive

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    def status(self):
        driver = self.node.driver if self.node is not None else None
        return None if driver is None else driver.core.status()

    # What the checkers read of a full node (None in raft mode or before it runs).
    def broker_role(self):
        app = self.node.app if self.node is not None and self.up else None
        return None if app is None else app.broker

    def kafka(self):
        role = self.broker_role()
        return None if role is None else role.kafka

    def controller_state_machine(self):
        role = self.controller_role()
        return None if role is None else role.state_machine

    def controller_role(self):
        app = self.node.app if self.node is not None and self.up else None
        return None if app is None else app.controller


ControllerHost = NodeHost  # the first milestone's name


class SimCluster:
    def __init__(self, seed: int, net: SimNetwork, trace: Trace, checker: RaftChecker, *,
                 controllers: int = 3, brokers: int = 0, mode: str = "raft",
                 raft_settings: dict | None = None, node_settings: dict | None = None, spares: int = 0):
        if mode not in ("raft", "cluster"):
            raise ValueError(f"mode must be raft or cluster, not {mode!r}")
        self.seed = seed
        self.net = net
        self.trace = trace
        self.checker = checker
        self.mode = mode
        self.raft_settings = dict(raft_settings or {})
        self.node_settings = dict(node_settings or {})
        self.hosts: dict[int, NodeHost] = {}
        combined = mode == "cluster" and brokers == 0
        # Spare controllers are formatted with the first `controllers` as the initial voters:
        # they start as observers until a voter change adds them (KIP-853).
        self.initial_voters = list(range(1, controllers + 1))
        for i in range(1, controllers + spares + 1):
            roles = ("broker", "controller") if combined else ("controller",)
            self.hosts[i] = NodeHost(i, roles, SkewedClock())
        if mode == "cluster":
            for i in range(controllers + spares + 1, controllers + spares + brokers + 1):
                self.hosts[i] = NodeHost(i, ("broker",), SkewedClock())
        for _, host in sorted(self.hosts.items()):
            net.add_host(host.name)
        self.disk_rng = random.Random(derive_seed(seed, "disk-crash"))
        self._nursery: trio.Nursery | None = None
        self.crashes = 0
        self.on_start = []  # callbacks(host) run when an incarnation starts (checkers reset)
        # The committed metadata log replayed (simulations.checkers.metadata), set by the runner.
        self.metadata_log: MetadataChecker | None = None
        # node -> (its disk's durable_changes, quorum state, DurableLog) as last read: a disk
        # with nothing newly durable is not copied and re-read every poll.
        self._durable_seen: dict[int, tuple] = {}
        # After the heal, a node that still dies of an injected disk error (one raised just
        # before the heal, surfacing after) is restarted at once, as a supervisor would:
        # nobody else restarts it, and the liveness phase needs every node.
        self.restart_after_disk_error = False
        # Each incarnation's root task -> (host, env): simulations.node_logs finds which node
        # logged an error by walking the task tree up to one of these.
        self.node_tasks: dict = {}

    @property
    def voters(self) -> list[int]:
        return sorted(i for i, h in self.hosts.items() if h.is_controller)

    @property
    def node_ids(self) -> list[int]:
        return sorted(self.hosts)

    @property
    def broker_ids(self) -> list[int]:
        return sorted(i for i, h in self.hosts.items() if h.is_broker)

    def address(self, node_id: int) -> tuple[str, int]:
        return self.hosts[node_id].name, CONTROLLER_PORT

    def bootstrap(self) -> list[str]:
        """Kafka bootstrap servers of every broker."""
        return [f"{self.hosts[i].name}:{BROKER_PORT}" for i in self.broker_ids]

    # ------------------------------------------------------------- lifecycle
    async def format(self) -> None:
        for _, host in sorted(self.hosts.items()):
            await self._format(host)

    def directory_id(self, host: NodeHost, wipes: int = 0) -> str:
        names = ("dir", host.name) if not wipes else ("dir", host.name, f"wipe-{wipes}")
        return uuid_to_str(uuid.UUID(int=derive_seed(self.seed, *names)))

    async def _format(self, host: NodeHost) -> None:
        """`raftkafka format` of the node's disk, with the initial voters by id and directory id
        (Kafka's --initial-controllers): a wiped voter formatted again gets a new directory id."""
        voters = [VoterSpec(i, self.hosts[i].name, CONTROLLER_PORT, self.directory_id(self.hosts[i]))
                  for i in self.initial_voters]
        meta = MetaProperties(CLUSTER_ID, host.node_id, self.directory_id(host, host.wipes))
        # A crash during the format may leave it done but the node not yet started: formatted
        # again at the next start, as an operator's script does it (kafka-storage's --ignore-formatted).
        await format_data_dir(host.disk, DATA_DIR, meta, voters, ignore_formatted=True)

    def wipe(self, node_id: int) -> None:
        """The node (down) gets a new, empty disk, formatted again before its next start."""
        host = self.hosts[node_id]
        assert not host.up, f"{host.name} must be down to wipe its disk"
        host.disk = MemFileSystem()
        host.wipes += 1
        host.needs_format = True
        self._durable_seen.pop(node_id, None)
        statuses = [st for h in self.hosts.values() if h.up and (st := h.status()) is not None]
        committed = [st.high_watermark for st in statuses]
        # A leader may still count what the node acknowledged before it lost its disk: what it
        # has counted already, and a fetch the node sent before it went down that the leader
        # has not read yet (at most the node's log end then; membership seed 21001).
        acknowledged = [r.log_end_offset for st in statuses if st.role is Role.LEADER for r in st.voters
                        if r.replica_id == node_id]
        last = host.status()  # the state the node went down in
        if last is not None:
            acknowledged.append(last.log_end_offset)
        self.checker.forget_disk(node_id, max(committed + acknowledged, default=0), self.directory_id(host, host.wipes))
        self.trace.record(host.name, "wiped", wipes=host.wipes)

    def config_for(self, node_id: int, port_shift: int = 0):
        host = self.hosts[node_id]
        listeners = []
        if host.is_broker:
            listeners.append(f"PLAINTEXT://{host.name}:{BROKER_PORT + port_shift}")
        if host.is_controller:
            listeners.append(f"CONTROLLER://{host.name}:{CONTROLLER_PORT + port_shift}")
        settings = {
            "node.id": node_id,
            "process.roles": ",".join(host.roles),
            "log.dirs": DATA_DIR,
            "listeners": ",".join(listeners),
            "controller.state.machine": "recording" if self.mode == "raft" else "metadata",
        }
        settings.update(self.raft_settings)
        if self.mode == "cluster":
            settings.update(self.node_settings)
        return load_config(settings)

    def bind(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery

    def start(self, node_id: int) -> None:
        host = self.hosts[node_id]
        assert not host.up, f"{host.name} is already running"
        host.incarnation += 1
        host.injected_errnos = set()
        host.stopping = False
        host.env = PausableEnv(host.name, seed=self.seed, incarnation=host.incarnation,
                          net=self.net, disk=host.disk, clock=host.clock)
        config = self.config_for(node_id)
        if self.mode == "raft":
            host.node = ControllerNode(host.env, config, state_machine=CheckedStateMachine(node_id, self.checker))
        else:
            app = MetadataApp(host.env, config, kafka_broker=True)
            app.state_machine = ReportingStateMachine(app.state_machine, node_id, self.checker)
            host.node = ControllerNode(host.env, config, app=app)
        host.scope = trio.CancelScope()
        self.net.host_up(host.name)
        self.checker.applied_end.pop(node_id, None)
        for callback in self.on_start:
            callback(host)
        self.trace.record(host.name, "start", incarnation=host.incarnation)
        self._nursery.start_soon(self._run, host, host.env, host.node, host.scope)

    def start_duplicate(self, node_id: int, seconds: float) -> None:
        """Start a second process of a running node on its disk, with other ports (an operator's
        copy of its config): its data dir lock must refuse it before it reads or writes anything
        (metadata.data_dir_lock). One that starts anyway is killed after `seconds`."""
        host = self.hosts[node_id]
        env = PausableEnv(host.name, seed=self.seed, incarnation=DUPLICATE_INCARNATIONS + host.incarnation,
                          net=self.net, disk=host.disk, clock=host.clock)
        node = ControllerNode(env, self.config_for(node_id, port_shift=DUPLICATE_PORT_SHIFT),
                              app=MetadataApp(env, self.config_for(node_id, port_shift=DUPLICATE_PORT_SHIFT),
                                              kafka_broker=True))
        self.trace.record(host.name, "start_duplicate", incarnation=host.incarnation)
        self._nursery.start_soon(self._run_duplicate, host, env, node, seconds)

    async def _run_duplicate(self, host: NodeHost, env: PausableEnv, node: ControllerNode, seconds: float) -> None:
        host.duplicates.append(node)
        try:
            with trio.move_on_after(seconds):
                await node.run()
        except DataDirError as e:
            self.trace.record(host.name, "duplicate_refused", error=str(e))
        except Exception as e:  # noqa: BLE001 - it shares a disk with a running node: anything goes
            self.trace.record(host.name, "duplicate_failed", error=f"{type(e).__name__}: {e}")
        else:
            self.trace.record(host.name, "duplicate_killed")
        finally:
            env.alive = False
            host.duplicates.remove(node)

    async def _run(self, host: NodeHost, env: SimEnv, node: ControllerNode, scope: trio.CancelScope) -> None:
        task = trio.lowlevel.current_task()
        self.node_tasks[task] = (host, env)
        try:
            await self._run_incarnation(host, env, node, scope)
        finally:
            del self.node_tasks[task]

    async def _run_incarnation(self, host: NodeHost, env: SimEnv, node: ControllerNode,
                               scope: trio.CancelScope) -> None:
        try:
            with scope:
                if host.needs_format:  # a wiped disk: the operator formats it before the start
                    await self._format(host)
                    host.needs_format = False
                await node.run()
        except Exception as e:  # noqa: BLE001 - classified below
            # Outside the scope: a killed node's cleanup (a broker closing its logs) may
            # fail on the crashed disk after the scope has swallowed the Cancelled.
            if env is not host.env or not env.alive:
                return  # the incarnation was killed; its last steps may fail on the dead Env
            leaves = _leaf_exceptions(e)
            names = sorted({type(x).__name__ for x in leaves})
            # Only the disk faults raise ENOSPC or EIO here (the simulated disks have no capacity
            # limit), so such an error is the fault's even when it surfaces after the fault ended.
            injected = host.disk_fault or (host.injected_errnos and all(
                getattr(x, "errno", None) in host.injected_errnos for x in leaves))
            restart = False
            if injected and all(isinstance(x, OSError) for x in leaves):
                self.trace.record(host.name, "crashed_on_disk_error", errors=names)
                restart = self.restart_after_disk_error
            else:
                self.trace.record(host.name, "node_failed", errors=names, stack=stack_summary(leaves[0]))
                self.checker.violate("NodeFailed", f"{host.name} stopped with {names}: {_first_line(leaves)}")
            self.kill(host.node_id, reason="failed")
            if restart:
                self.start(host.node_id)
            return
        if env is host.env and env.alive:
            self.trace.record(host.name, "node_exited")
            # A graceful stop flushed and closed everything: its page cache is not lost.
            self.kill(host.node_id, reason="stopped" if host.stopping else "exited",
                      power_loss=False if host.stopping else None)

    def loses_page_cache(self, node_id: int) -> bool:
        """Whether a plain kill of this node also loses its unfsynced writes.

        The Raft workload models every kill as a power loss (the quorum fsyncs before it
        acknowledges). Kafka brokers acknowledge acks=all from the ISR's page caches, so on
        nodes with the broker role a kill is a process kill (kill -9: the page cache
        survives) and a power loss is a separate, budgeted fault (`power_loss`)."""
        return self.mode == "raft" or not self.hosts[node_id].is_broker

    async def stop(self, node_id: int) -> bool | None:
        """SIGTERM: the node's controlled shutdown (raftkafka.node.assembly), then it stops as
        the real process does; returns once it is down, with whether the controlled shutdown
        completed (None: the node had no registered broker, or was killed meanwhile). If the
        fault phase ends first, the stop ends as a kill, so the heal restarts the node."""
        host = self.hosts[node_id]
        node, env = host.node, host.env
        done, finished = None, False
        try:
            with trio.CancelScope() as host.stop_scope:
                done = await shut_down_gracefully(node)
                self.trace.record(host.name, "controlled_shutdown", complete=done)
                if done:
                    self._check_controlled_shutdown(host)
                host.stopping = True
                host.scope.cancel()
                while host.env is env and host.up:  # until _run has seen the node end
                    await trio.sleep(0.01)
                finished = True
        finally:
            host.stop_scope = None
            if not finished and host.env is env and host.up:
                self.kill(node_id, reason="stop_abandoned", power_loss=False)
        return done if finished else None

    def _check_controlled_shutdown(self, host: NodeHost) -> None:
        """A broker that asked to shut down while the controller could not have fenced it
        (it held its session lease when it sent that heartbeat: `asked_shutdown_with_lease`,
        metadata.broker_lifecycle; not when the stop began, as a paused process asks only
        once it runs again), or whose metadata shows it went through the controller's
        controlled shutdown, stops knowing it leads nothing: the controller answers
        should_shutdown only once its leaderships moved and every live broker (this one
        too) reported metadata past the moves, and never elects a broker in controlled
        shutdown. (One the controller had fenced meanwhile is let stop at once, as in
        Kafka; its metadata may be stale then.) One that led nothing in the controller's
        image when it asked is let stop at once too, as in Kafka, without waiting for its
        metadata (which may still show a leadership that has ended since, e.g. of a deleted
        topic): it is judged by the committed image that fencing was decided on."""
        role = host.broker_role()
        if role is None or role.kafka is None or role.lifecycle is None:
            return
        image = role.kafka.metadata.image
        reg = image.brokers.get(host.node_id)
        leased = role.lifecycle.asked_shutdown_with_lease
        if reg is None or reg.epoch != role.lifecycle.broker_epoch or not (leased or reg.in_controlled_shutdown):
            return
        if not reg.in_controlled_shutdown and self.metadata_log is not None:
            # Let go at once (it led nothing in the controller's image): its own metadata may
            # lag that image, so judge the image the controller decided on.
            self.metadata_log.on_fencing(host.node_id, reg.epoch,
                                         lambda decided: self._report_leaderships(host, decided or image))
        else:
            self._report_leaderships(host, image)

    def _report_leaderships(self, host: NodeHost, image) -> None:
        still = sorted(f"{t.name}-{p}" for t, p, part in image.iter_partitions() if part.leader == host.node_id)
        if still:
            self.checker.violate("ControlledShutdownLeftLeaders",
                                 f"{host.name} completed its controlled shutdown still leading {still[:5]}")

    def kill(self, node_id: int, *, reason: str = "nemesis", power_loss: bool | None = None,
             sectors: bool = False) -> None:
        host = self.hosts[node_id]
        if host.stop_scope is not None:
            host.stop_scope.cancel()  # a graceful stop under way ends with the process
        if not host.up:
            return
        host.env.alive = False
        host.scope.cancel()
        self.net.host_down(host.name)
        host.disk.sync_delay = 0.0
        host.disk.fail_writes = False
        host.disk.fail_syncs = False
        host.disk_fault = False
        host.env.resume()  # its frozen tasks wake into their cancellation
        if power_loss is None:
            power_loss = self.loses_page_cache(node_id)
        if power_loss:
            host.disk.crash(self.disk_rng, sectors=sectors)
        else:
            host.disk.process_exit()
        self.crashes += 1
        self.trace.record(host.name, "kill", reason=reason, incarnation=host.incarnation, power_loss=power_loss)

    def pause(self, node_id: int, until: float) -> None:
        """Freeze the node's process until sim time `until` (see the module docstring)."""
        host = self.hosts[node_id]
        if not host.up:
            return
        env = host.env
        env.pause()
        env.paused_until = max(env.paused_until, until)
        peers = [h.name for _, h in sorted(self.hosts.items()) if h is not host] + ["client"]
        for peer in peers:
            self.net.clog(host.name, peer, until)
            self.net.clog(peer, host.name, until)
        self.trace.record(host.name, "pause", until=round(until, 6))
        self._nursery.start_soon(self._resume_at, env, until)

    async def _resume_at(self, env: PausableEnv, until: float) -> None:
        await trio.sleep_until(until)
        if env.paused and trio.current_time() >= env.paused_until:  # not paused again meanwhile
            env.resume()
            self.trace.record(env.name, "resume")

    def resume_all(self) -> None:
        for _, host in sorted(self.hosts.items()):
            if host.env is not None and host.env.paused:
                host.env.resume()
                self.trace.record(host.name, "resume")

    # -------------------------------------------------------------- checking
    async def poll_durable(self) -> dict[int, DurableLog]:
        """Check what every disk durably holds (election state, log) against the leaders' HW."""
        self.checker.now = trio.current_time()
        durable = {}
        for node_id in self.voters:
            log = await self.durable_log(node_id)
            if log is not None:
                durable[node_id] = log
        for node_id in self.voters:
            host = self.hosts[node_id]
            st = host.status() if host.up else None
            if st is not None and st.role is Role.LEADER:
                self.checker.check_majority(node_id, st.high_watermark, durable,
                                            leader_voters=[(r.replica_id, r.directory_id) for r in st.voters])
        return durable

    async def durable_log(self, node_id: int) -> DurableLog | None:
        """What a crash right now would leave of this node's Raft state (None if unreadable)."""
        disk = self.hosts[node_id].disk
        cached = self._durable_seen.get(node_id)
        if cached is not None and cached[0] == disk.durable_changes:
            # Nothing became durable since the last read: the same state, observed again.
            _, stored, log = cached
            if stored is not None:
                self.checker.observe_persisted(node_id, stored.epoch, stored.leader_id)
            return log
        changes = disk.durable_changes
        copy = disk.durable_copy()
        directory = posixpath.join(DATA_DIR, METADATA_DIR)
        storage = NodeStorage(copy, DATA_DIR)
        try:
            stored = QuorumStateFile(copy, directory).read()
            _, raft_log = await storage.load()
        except (ValueError, OSError, DataDirError) as e:  # the storage layer's corruption errors
            self.checker.violate("DurableState", f"n{node_id}: a crash now would leave unreadable Raft state: "
                                 f"{type(e).__name__}: {str(e)[:160]}")
            return None
        finally:
            storage.close()
        if stored is not None:
            self.checker.observe_persisted(node_id, stored.epoch, stored.leader_id)
        epochs = {e.offset: e.epoch for e in raft_log.entries_between(raft_log.start_offset, raft_log.end_offset)}
        log = DurableLog(raft_log.start_offset, raft_log.end_offset, epochs, raft_log.snapshot_id[1])
        self._durable_seen[node_id] = (changes, stored, log)
        return log

    @property
    def broker_session_timeout(self) -> float:
        """The nodes' broker.session.timeout.ms in seconds; where a run leaves it unset (the Raft
        runs, whose moments time voter links by it) the cluster runs' 3 s."""
        return float(self.node_settings.get("broker.session.timeout.ms", 3000)) / 1000

    def leader(self) -> int | None:
        """The live node that is leader in the highest epoch, if any."""
        best = self.leader_and_epoch()
        return None if best is None else best[1]

    def leader_and_epoch(self) -> tuple[int, int] | None:
        """(epoch, node) of the live node that is leader in the highest epoch, if any."""
        best = None
        for node_id, host in sorted(self.hosts.items()):
            st = host.status() if host.up else None
            if st is not None and st.role is Role.LEADER and (best is None or st.epoch > best[0]):
                best = (st.epoch, node_id)
        return best


def _leaf_exceptions(e: BaseException) -> list[BaseException]:
    if isinstance(e, BaseExceptionGroup):
        return [leaf for sub in e.exceptions for leaf in _leaf_exceptions(sub)]
    return [e]


def _first_line(leaves: list[BaseException]) -> str:
    return str(leaves[0]).splitlines()[0][:200] if leaves and str(leaves[0]) else ""
