"""A deterministic run must not depend on what else the process did or is doing.

The suite's session fixtures (tests/cli: three brokers and a mini cluster) keep trio loops
running in background threads; were every trio loop to draw from the one scheduler RNG the
seeded run is given, the same seed would diverge in process after a long test session. The
first test below creates that situation on purpose; without
`simulations.determinism._PerThreadRandom` its runs differ.

The memory-layout test guards the other suspect: anything ordered by `id()` or by the
hash of an object without `__hash__` (trio's deadline heap tie-break, sets of tasks,
our own sets) would change order once the heap looks different.
"""
from __future__ import annotations

import os
import random
import socket
import sys
import threading
import time
import uuid

import pytest
import trio
import trio._core._run as trio_run

from metadata.image import MetadataImage
from simulations.checkers.metadata import MetadataChecker
from simulations.checkers.raft import RaftChecker
from simulations.determinism import NondeterminismError, deterministic_scheduling, run_deterministic
from simulations.runner import SimOptions, run_simulation
from simulations.trace import Trace
from tests.simulations.test_sandbox import _interleaving

SIM = SimOptions(seed=4, duration=3.0, workload="raft")


class BackgroundTrioLoop:
    """A trio loop in a thread, busy the way a broker fixture is: several tasks runnable
    in every pass, so every pass shuffles a batch with trio's scheduler RNG."""

    def __init__(self, tasks: int = 4):
        self.tasks = tasks
        self.passes = 0
        self._stop = False
        self._started = threading.Event()
        self._thread = threading.Thread(target=trio.run, args=(self._main,), daemon=True)

    async def _main(self) -> None:
        async def spin() -> None:
            while not self._stop:
                self.passes += 1
                await trio.sleep(0)

        async with trio.open_nursery() as nursery:
            for _ in range(self.tasks):
                nursery.start_soon(spin)
            self._started.set()

    def __enter__(self) -> "BackgroundTrioLoop":
        # Hand the GIL over often, so the other loop runs in the middle of every run.
        self._switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(1e-5)
        self._thread.start()
        assert self._started.wait(30)
        return self

    def __exit__(self, *exc) -> None:
        self._stop = True
        self._thread.join(30)
        sys.setswitchinterval(self._switch_interval)


def test_same_seed_same_schedule_while_another_trio_loop_runs_in_the_process():
    alone = run_deterministic(_interleaving, 12, 40, seed=7)
    with BackgroundTrioLoop() as loop:
        runs = [run_deterministic(_interleaving, 12, 40, seed=7) for _ in range(3)]
        other_seed = run_deterministic(_interleaving, 12, 40, seed=8)
        passes_during_runs = loop.passes
    assert passes_during_runs > 0  # the other loop did run alongside
    assert runs == [alone] * 3
    assert other_seed != alone


def test_same_seed_same_simulation_hash_while_another_trio_loop_runs_in_the_process():
    alone = run_simulation(SIM)
    with BackgroundTrioLoop():
        again = run_simulation(SIM)
    assert again["violations"] == alone["violations"] == []
    assert again["hash"] == alone["hash"]
    assert again["events"] == alone["events"]


def _perturb_process_state(rng: random.Random) -> list:
    """Shift where the next run's objects land and what process-global counters read."""
    kinds = [
        lambda n: bytes(n * 8),
        lambda n: [0] * n,
        lambda n: {i: i for i in range(n % 9)},
        lambda n: trio.CancelScope(deadline=float(n)),
        lambda n: threading.Event(),  # any object with the default identity hash
    ]
    junk = [rng.choice(kinds)(rng.randrange(1, 64)) for _ in range(100_000)]
    kept = [x for x in junk if rng.random() < 0.3]  # leave holes of every size behind
    del junk

    async def churn() -> None:  # advances trio's global task counter, frees cancel scopes
        async with trio.open_nursery() as nursery:
            for _ in range(500):
                nursery.start_soon(trio.sleep, 0)
        for _ in range(500):
            with trio.move_on_after(0):
                await trio.sleep(1)

    trio.run(churn)
    return kept


def test_same_seed_same_simulation_hash_after_perturbing_memory_layout():
    first = run_simulation(SIM)
    kept = _perturb_process_state(random.Random(99))
    second = run_simulation(SIM)
    kept += _perturb_process_state(random.Random(100))
    third = run_simulation(SIM)
    assert first["hash"] == second["hash"] == third["hash"]
    assert len(kept) > 0


def test_scheduler_rng_is_seeded_for_this_thread_only():
    seen_in_other_thread = []

    def draw_elsewhere() -> None:
        seen_in_other_thread.append(trio_run._r.getstate())

    with deterministic_scheduling(5):
        expected = random.Random(5)
        assert [trio_run._r.random() for _ in range(3)] == [expected.random() for _ in range(3)]
        other = threading.Thread(target=draw_elsewhere)
        other.start()
        other.join()
        # Another thread's trio loop draws from trio's own generator, not this stream.
        assert seen_in_other_thread[0] != expected.getstate()
        assert trio_run._r.random() == expected.random()
        assert trio_run._ALLOW_DETERMINISTIC_SCHEDULING is True


def test_metadata_checker_checks_a_new_image_that_reuses_the_old_ones_address():
    # A checker that remembered a node's last image by id() would take a new image allocated
    # at the freed old one's address for unchanged, so whether it got checked would depend on
    # the allocator (~100 skipped images per cluster run). It keeps the image itself.
    checker = RaftChecker(Trace(), [1, 2, 3])
    metadata = MetadataChecker(checker)
    previous = MetadataImage(offset=-1)
    metadata.observe(1, 0, "broker", previous, [])
    address = id(previous)
    del previous  # the node moves on and drops its old image
    allocated = []
    for _ in range(1000):  # the allocator hands the freed block out again, unless someone holds it
        image = MetadataImage(offset=3)  # nothing committed yet: publishing offset 3 is a violation
        if id(image) == address:
            break
        allocated.append(image)
    metadata.observe(1, 0, "broker", image, [])
    assert [v.invariant for v in checker.violations] == ["UncommittedMetadataPublished"]


def test_sandbox_forbids_only_in_the_simulating_thread():
    # The patches are process-wide; a broker fixture's thread calling time.monotonic()
    # or opening a socket while a simulation runs must not get NondeterminismError.
    sandbox_on, other_done = threading.Event(), threading.Event()
    seen_elsewhere: list[str] = []

    def other_thread() -> None:
        assert sandbox_on.wait(30)
        try:
            time.monotonic(), os.urandom(1), random.random(), uuid.uuid4(), random.Random()
            socket.socket().close()
            # A whole trio loop, as a broker fixture runs one: wakeup socketpair, clock
            # offset from trio's RNG, fsync-style worker thread.
            trio.run(trio.to_thread.run_sync, time.time_ns)
            seen_elsewhere.append("ok")
        except BaseException as e:  # noqa: BLE001 - reported by the assertion below
            seen_elsewhere.append(repr(e))
        finally:
            other_done.set()

    async def body() -> None:
        with pytest.raises(NondeterminismError):
            time.monotonic()
        sandbox_on.set()
        assert other_done.wait(30)  # blocks the run; virtual time does not move meanwhile
        with pytest.raises(NondeterminismError):
            os.urandom(1)

    thread = threading.Thread(target=other_thread)
    thread.start()
    run_deterministic(body, seed=0)
    thread.join(30)
    assert seen_elsewhere == ["ok"]
