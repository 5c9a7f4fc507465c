"""Run a coroutine so that its whole execution is a pure function of a seed.

Three things make a trio run reproducible (see reference/simulation.md §5):

1. `SimClock`: time is virtual and only moves when every task is blocked,
   straight to the next deadline (what `MockClock(rate=0, autojump_threshold=0)`
   does, in one pass of trio's run loop instead of two, without a real clock).
2. trio's deterministic scheduling: each run-queue batch is sorted by task
   creation order and shuffled with trio's module RNG `_r`. This is the switch
   pytest-trio and trio's Hypothesis plugin flip; it is private API, so trio is
   pinned and a test asserts the attributes exist. `_r` is one object shared by
   every trio loop of the process, in every thread, so it is replaced (once, for
   good) by `_PerThreadRandom`: the thread running a deterministic run draws from
   its own seeded generator, every other thread from trio's original `_r`.
3. A sandbox that makes the usual ways of reaching real time, OS entropy,
   threads and sockets raise `NondeterminismError` while the run is going, so a
   stray call fails loudly instead of silently changing the trace.

Everything is restored when the run ends, so tests and other trio runs in the
same process are unaffected.
"""
from __future__ import annotations

import contextlib
import gc
import heapq
import math
import os
import random
import socket
import sys
import threading
import time
import uuid
from typing import Any, Awaitable, Callable, Iterator

import trio
import trio._core._run as _trio_run
from trio._core._instrumentation import Instruments

__all__ = [
    "NondeterminismError",
    "SimClock",
    "current_sim_clock",
    "deterministic_scheduling",
    "run_deterministic",
    "sandbox",
]


class NondeterminismError(RuntimeError):
    """Code inside a simulation reached for real time, entropy, a thread or a socket."""


# Callers from these modules may read the real clock: it only feeds log record
# timestamps, never the simulation's decisions or its trace.
_CLOCK_ALLOWED_CALLERS = ("logging",)


def _forbid(what: str, original: Callable, sim_thread: int, allowed_callers: tuple[str, ...] = ()):
    """`original`, except in the simulating thread (unless called from `allowed_callers`).

    The patches are process-wide, but other threads (a test's brokers, trio's worker
    threads) are not part of the simulation and keep the real functions.
    """

    def forbidden(*args, **kwargs):
        if threading.get_ident() != sim_thread:
            return original(*args, **kwargs)
        if allowed_callers:
            caller = sys._getframe(1).f_globals.get("__name__", "")
            if caller in allowed_callers or caller.split(".")[0] in allowed_callers:
                return original(*args, **kwargs)
        raise NondeterminismError(
            f"{what} called inside a simulation; node code must use its Env "
            "(env.now(), env.wall_ms(), env.rng, env.uuid(), env.net, env.fs)"
        )

    forbidden.__name__ = what.rsplit(".", 1)[-1]
    return forbidden


@contextlib.contextmanager
def sandbox() -> Iterator[None]:
    """Make real clocks, OS entropy, threads and sockets raise inside the block, in this thread.

    Install it *inside* trio.run: trio creates its wakeup socketpair before the
    root task starts, and reads the clock through names bound at import time
    (`trio._core._run.perf_counter`, `MockClock._real_clock`), so neither is
    affected by these patches.
    """
    patches: list[tuple[Any, str, Any]] = []
    sim_thread = threading.get_ident()

    def forbid(owner: Any, name: str, what: str, allowed_callers: tuple[str, ...] = ()) -> None:
        original = getattr(owner, name)
        patches.append((owner, name, original))
        setattr(owner, name, _forbid(what, original, sim_thread, allowed_callers))

    for name in ("time", "time_ns", "monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns"):
        forbid(time, name, f"time.{name}", _CLOCK_ALLOWED_CALLERS)
    for name in ("urandom", "getrandom"):
        if hasattr(os, name):
            forbid(os, name, f"os.{name}")
    for name in (
        "random", "randint", "randrange", "choice", "choices", "shuffle", "sample", "uniform",
        "getrandbits", "randbytes", "gauss", "expovariate", "triangular", "betavariate",
    ):
        forbid(random, name, f"random.{name}")
    original_seed = random.Random.seed

    def seed_or_refuse(self, a=None, version=2):
        # random.Random() with no seed draws OS entropy in C, bypassing os.urandom.
        if a is None and not isinstance(self, random.SystemRandom) and threading.get_ident() == sim_thread:
            raise NondeterminismError("random.Random() without a seed inside a simulation; use env.rng")
        return original_seed(self, a, version)

    patches.append((random.Random, "seed", original_seed))
    random.Random.seed = seed_or_refuse
    for name in ("random", "getrandbits", "randbytes"):
        forbid(random.SystemRandom, name, f"random.SystemRandom.{name}")
    forbid(uuid, "uuid1", "uuid.uuid1")
    forbid(uuid, "uuid4", "uuid.uuid4")
    forbid(threading.Thread, "start", "threading.Thread.start")
    for name in ("socket", "socketpair", "create_connection", "create_server", "getaddrinfo"):
        forbid(socket, name, f"socket.{name}")
    # trio's worker-thread cache can reuse a live thread without Thread.start.
    forbid(trio.to_thread, "run_sync", "trio.to_thread.run_sync")
    try:
        yield
    finally:
        for owner, name, original in reversed(patches):
            setattr(owner, name, original)


class SimClock(trio.abc.Clock):
    """Virtual time that jumps to the next deadline as soon as no task can run.

    trio asks `deadline_to_sleep_time` only when its run queue is empty, i.e. every
    task is blocked: that is the moment to jump. MockClock's autojump instead sleeps
    one idle pass first and jumps on the next, which costs a whole extra pass of the
    run loop (an epoll call, deadline bookkeeping) per distinct instant; a simulation
    has tens of thousands of instants per simulated minute.
    `trio.testing.wait_all_tasks_blocked` still works: while a task waits for idle the
    clock does not jump, so trio wakes that task first (MockClock's order too).
    """

    IDLE_FOREVER = 86400.0  # nothing scheduled at all: a deadlock; sleep (Ctrl-C still works)

    def __init__(self) -> None:
        self.now = 0.0
        self._timers: list[tuple[float, int, Callable[[], None]]] = []
        self._timer_seq = 0
        self.scheduler: _SchedulerRandom | None = None  # set by run_deterministic

    def only_this_task_can_run(self) -> bool:
        """Whether a schedule point here would just resume the calling task, with nothing
        else happening first, so a caller may skip a `cancel_shielded_checkpoint`.

        True when no other task is left in trio's current batch nor queued for the next,
        no deadline is due (expiring one could wake a task), no instrument watches task
        steps (the step checker), and time cannot move (it only jumps when the run queue
        is empty). The next pass would then run exactly this task, at the same instant,
        in the same state: the schedule point offers no interleaving to explore.
        Only known under `run_deterministic` (it sees trio's batches); else False.
        """
        scheduler = self.scheduler
        if scheduler is None or scheduler.batch:
            return False
        runner = _trio_run.GLOBAL_RUN_CONTEXT.runner
        if runner.runq or runner.instruments["_all"]:
            return False
        return runner.deadlines.next_deadline() > self.now

    def call_at(self, when: float, callback: Callable[[], None]) -> None:
        """Run `callback()` when virtual time reaches `when`: a timer without a cancel scope.

        It runs inside trio's run loop, at the jump to `when` (in the same pass that
        expires trio's deadlines there), so it must be quick and must not raise; it may
        `trio.lowlevel.reschedule` a parked task. Timers at one instant run in the order
        they were set.
        """
        self._timer_seq += 1
        heapq.heappush(self._timers, (when, self._timer_seq, callback))

    async def sleep(self, seconds: float) -> None:
        """`trio.sleep` on this clock (the same checkpoints), woken by a timer, not a cancel scope."""
        if seconds < 0:
            raise ValueError("sleep length must be non-negative")
        await self.sleep_until(self.now + seconds)

    async def sleep_until(self, deadline: float) -> None:
        """`trio.sleep_until` on this clock: one schedule point, cancellable, no cancel scope."""
        if deadline <= self.now:
            await trio.lowlevel.checkpoint()  # what a deadline already past does in trio
            return
        if deadline == math.inf:
            await trio.sleep_forever()
            return
        task = trio.lowlevel.current_task()
        asleep = [True]

        def wake() -> None:
            if asleep[0]:  # not if the sleep was cancelled meanwhile
                asleep[0] = False
                trio.lowlevel.reschedule(task)

        def abort(_raise_cancel) -> trio.lowlevel.Abort:
            asleep[0] = False
            return trio.lowlevel.Abort.SUCCEEDED

        self.call_at(deadline, wake)
        await trio.lowlevel.wait_task_rescheduled(abort)

    def start_clock(self) -> None:
        pass

    def current_time(self) -> float:
        return self.now

    def deadline_to_sleep_time(self, deadline: float) -> float:
        timers = self._timers
        if timers and timers[0][0] < deadline:
            deadline = timers[0][0]
        if deadline == math.inf:
            return self.IDLE_FOREVER
        if deadline > self.now and _trio_run.GLOBAL_RUN_CONTEXT.runner.waiting_for_idle:
            return self.IDLE_FOREVER  # trio wakes the idle waiters (after their cushion) instead
        if deadline > self.now:
            self.now = deadline
        while timers and timers[0][0] <= self.now:
            heapq.heappop(timers)[2]()
        return 0.0


def current_sim_clock() -> SimClock | None:
    """The running trio loop's `SimClock`, or None (outside a run, or on another clock)."""
    try:
        clock = trio.lowlevel.current_clock()
    except RuntimeError:
        return None
    return clock if isinstance(clock, SimClock) else None


class _SparseIOPolling:
    """trio's IO manager, polled for events only every `POLL_EVERY` passes of a busy run loop.

    trio asks the OS for I/O events (epoll) once per pass of its run loop, tens of
    thousands of passes per simulated minute. Nothing in a simulation does real I/O;
    only trio's own wakeup fd can become readable: a signal (Ctrl-C), a
    `run_sync_soon` (an async generator finalised, another thread). Those are noticed
    within `POLL_EVERY` passes, and at once when the run would sleep (a deadlock waits
    in a real epoll, so Ctrl-C still interrupts it). Which pass polls is a pure function
    of the pass count, so a run stays a function of its seed.
    """

    POLL_EVERY = 64

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self._skipped = 0

    def get_events(self, timeout: float) -> Any:
        if timeout <= 0 and self._skipped < self.POLL_EVERY:
            self._skipped += 1
            return ()  # "the timeout expired with no event", what a poll of an idle fd set says
        self._skipped = 0
        return self.inner.get_events(timeout)

    def process_events(self, events: Any) -> None:
        if events:
            self.inner.process_events(events)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)  # wait_readable, force_wakeup, close, statistics, ...


class _DictInstruments(dict):
    """trio's `Instruments` (hook name -> instruments) as a plain dict, with its methods.

    trio asks `"before_task_step" in runner.instruments` (and three more hooks) at every
    pass and task step: over 400k times a simulated minute. `Instruments` is a
    `UserDict`, so each of those is a Python-level call; on a dict it is a C lookup.
    The methods are trio's own, reading the hooks through `data` (this dict).
    """

    __slots__ = ()

    @property
    def data(self) -> dict:
        return self

    add_instrument = Instruments.add_instrument
    remove_instrument = Instruments.remove_instrument
    call = Instruments.call


@contextlib.contextmanager
def _lean_run_loop() -> Iterator[None]:
    """For the block, the current trio run polls epoll sparsely (`_SparseIOPolling`) and
    keeps its instruments in a `_DictInstruments`; both are put back after it."""
    runner = _trio_run.GLOBAL_RUN_CONTEXT.runner
    io_manager, instruments = runner.io_manager, runner.instruments
    runner.io_manager = _SparseIOPolling(io_manager)
    runner.instruments = _DictInstruments(instruments.data)
    try:
        yield
    finally:
        # Instruments added or removed meanwhile stay so (after_run is still called).
        instruments.data.clear()
        instruments.data.update(runner.instruments)
        runner.io_manager, runner.instruments = io_manager, instruments


class _PerThreadRandom(random.Random):
    """trio's scheduler RNG (`trio._core._run._r`), with a seeded generator per simulating thread.

    Why: `_r` is a module global, so every trio loop in the process draws from it,
    whatever its thread: a shuffle per run-queue batch of two or more tasks, a coin
    per pass outside deterministic mode, a draw per `trio.run` for the SystemClock
    offset. A seeded run is only reproducible if nothing else draws from its stream
    while it runs, and in a long test session something does: session fixtures keep
    brokers and clients running on trio loops in background threads, and they take
    numbers from the seeded stream at moments the OS thread scheduler picks, so the
    same seed shuffled differently (an in-process re-run diverged; separate
    processes never did).

    While a thread is inside `deterministic_scheduling`, that thread draws from its
    own seeded `random.Random`; every other thread, and that one outside a run, uses
    trio's original `_r` (the object trio's Hypothesis plugin registered), so the
    patch changes nothing for them.
    """

    def __init__(self, shared: random.Random) -> None:
        super().__init__(0)  # the base state is never used: every draw is delegated
        self.shared = shared
        self.local = threading.local()  # .rng: the seeded generator of a running simulation

    def _rng(self) -> random.Random:
        return getattr(self.local, "rng", None) or self.shared

    # What trio calls (shuffle, random, uniform) and what the other methods rest on.
    def random(self) -> float:
        return self._rng().random()

    def getrandbits(self, k: int) -> int:
        return self._rng().getrandbits(k)

    def shuffle(self, x: list) -> None:
        # trio shuffles every run-queue batch (in deterministic mode), the very list it then
        # pops tasks from: a simulation's generator keeps it (see SimClock.only_this_task_can_run).
        rng = getattr(self.local, "rng", None)
        if rng is None:
            self.shared.shuffle(x)
            return
        rng.batch = x
        # Most batches hold one task; shuffling fewer than two draws nothing: no stream changes.
        if len(x) > 1:
            rng.shuffle(x)

    def uniform(self, a: float, b: float) -> float:
        return self._rng().uniform(a, b)

    def seed(self, a=None, version: int = 2) -> None:
        if hasattr(self, "local"):  # not while random.Random.__init__ runs
            self._rng().seed(a, version)

    def getstate(self):
        return self._rng().getstate()

    def setstate(self, state) -> None:
        self._rng().setstate(state)


class _SchedulerRandom(random.Random):
    """The seeded scheduler generator of one deterministic run, which also holds the
    run-queue batch trio is working through (the tasks still to step in this pass)."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.batch: list = [None]  # no batch seen yet: never taken as empty


_scheduling_lock = threading.Lock()
_runs_in_progress = 0  # deterministic runs going on in any thread (the mode flag is global)
_flag_before_runs = False


def _per_thread_random() -> _PerThreadRandom:
    """trio's `_r`, replaced by a `_PerThreadRandom` the first time (a permanent, neutral patch)."""
    with _scheduling_lock:
        current = _trio_run._r
        if not isinstance(current, _PerThreadRandom):
            current = _PerThreadRandom(current)
            _trio_run._r = current
        return current


@contextlib.contextmanager
def deterministic_scheduling(seed: int) -> Iterator[_SchedulerRandom]:
    """Switch trio's scheduler to its deterministic mode, seeded, for this thread's runs.

    Yields the seeded generator (a `_SchedulerRandom`), which tracks trio's current batch.

    Other threads' trio loops neither draw from this seeded stream nor can switch the
    mode off while the block runs (the flag stays on until the last such block ends).
    """
    global _runs_in_progress, _flag_before_runs
    rng = _per_thread_random()
    with _scheduling_lock:
        if _runs_in_progress == 0:
            _flag_before_runs = _trio_run._ALLOW_DETERMINISTIC_SCHEDULING
            _trio_run._ALLOW_DETERMINISTIC_SCHEDULING = True  # type: ignore[misc]
        _runs_in_progress += 1
    outer = getattr(rng.local, "rng", None)
    scheduler = rng.local.rng = _SchedulerRandom(seed)
    try:
        yield scheduler
    finally:
        rng.local.rng = outer
        with _scheduling_lock:
            _runs_in_progress -= 1
            if _runs_in_progress == 0:
                _trio_run._ALLOW_DETERMINISTIC_SCHEDULING = _flag_before_runs  # type: ignore[misc]


def run_deterministic(
    async_fn: Callable[..., Awaitable[Any]],
    *args: Any,
    seed: int,
    guard: bool = True,
) -> Any:
    """`trio.run(async_fn, *args)` on a virtual clock with seeded, deterministic scheduling.

    Must be called from outside any trio run (it starts its own). With `guard`,
    the sandbox is active for the whole of `async_fn`.
    """
    clock = SimClock()

    async def root() -> Any:
        with _lean_run_loop():
            if not guard:
                return await async_fn(*args)
            with sandbox():
                return await async_fn(*args)

    # Garbage left by an earlier run must not be finalised (async generators,
    # __del__) at some arbitrary point inside this one. And no collection may run
    # inside it either: when CPython's full collections happen depends on the size of
    # the whole heap, i.e. on what the process did before, and the finalisers they run
    # would reorder tasks (an in-process re-run after a long test session diverged).
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        with deterministic_scheduling(seed) as scheduler:
            clock.scheduler = scheduler
            return trio.run(root, clock=clock)
    finally:
        if was_enabled:
            gc.enable()
        gc.collect()
