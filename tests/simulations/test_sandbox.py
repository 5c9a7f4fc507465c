"""simulations.determinism: deterministic trio runs and the nondeterminism sandbox."""
from __future__ import annotations

import os
import random
import socket
import threading
import time
import uuid

import pytest
import trio
import trio.testing
import trio._core._run as trio_run

from simulations.determinism import NondeterminismError, deterministic_scheduling, run_deterministic


def test_trio_private_scheduling_hooks_exist():
    # The harness depends on these private names; trio is pinned to 0.35.x for them.
    assert hasattr(trio_run, "_ALLOW_DETERMINISTIC_SCHEDULING")
    assert isinstance(trio_run._r, random.Random)
    assert trio.__version__.startswith("0.35.")

    # And these runner internals (the lean run loop, the lone-schedule-point test).
    async def runner_internals() -> list[bool]:
        runner = trio_run.GLOBAL_RUN_CONTEXT.runner
        return [hasattr(runner.io_manager, "get_events"), hasattr(runner.io_manager, "process_events"),
                isinstance(runner.instruments["_all"], dict), hasattr(runner, "runq"),
                runner.deadlines.next_deadline() == float("inf")]

    assert trio.run(runner_internals) == [True] * 5


async def _interleaving(n_tasks: int = 6, steps: int = 5) -> list[int]:
    order: list[int] = []

    async def worker(i: int) -> None:
        for _ in range(steps):
            await trio.sleep(0.001)  # every task wakes at the same instants: ties everywhere
            order.append(i)

    async with trio.open_nursery() as nursery:
        for i in range(n_tasks):
            nursery.start_soon(worker, i)
    return order


def test_same_seed_same_interleaving_different_seed_differs():
    # In this process, after whatever the session ran before (see
    # test_process_state_isolation.py for the trio loops other fixtures leave running).
    a = run_deterministic(_interleaving, seed=7)
    b = run_deterministic(_interleaving, seed=7)
    c = run_deterministic(_interleaving, seed=8)
    assert a == b
    assert a != c


def test_same_seed_same_interleaving_in_a_fresh_interpreter():
    import subprocess
    import sys

    here = run_deterministic(_interleaving, seed=7)
    code = (
        "from simulations.determinism import run_deterministic\n"
        "from tests.simulations.test_sandbox import _interleaving\n"
        "a = run_deterministic(_interleaving, seed=7)\n"
        "b = run_deterministic(_interleaving, seed=7)\n"
        "c = run_deterministic(_interleaving, seed=8)\n"
        f"print(a == b, a != c, a == {here!r})\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "True", "True"]  # and the same schedule as in this process


def test_virtual_clock_jumps_without_waiting():
    async def long_sleep() -> float:
        await trio.sleep(3600)
        return trio.current_time()

    t0 = time.perf_counter()
    assert run_deterministic(long_sleep, seed=1) == 3600
    assert time.perf_counter() - t0 < 30  # an hour of sim time is not an hour of wall time


def test_scheduling_state_is_restored():
    flag = trio_run._ALLOW_DETERMINISTIC_SCHEDULING
    state = trio_run._r.getstate()
    with deterministic_scheduling(123):
        assert trio_run._ALLOW_DETERMINISTIC_SCHEDULING is True
    assert trio_run._ALLOW_DETERMINISTIC_SCHEDULING == flag
    assert trio_run._r.getstate() == state


FORBIDDEN_CALLS = {
    "time.time": lambda: time.time(),
    "time.monotonic": lambda: time.monotonic(),
    "time.perf_counter": lambda: time.perf_counter(),
    "time.time_ns": lambda: time.time_ns(),
    "os.urandom": lambda: os.urandom(4),
    "random.random": lambda: random.random(),
    "random.randint": lambda: random.randint(1, 6),
    "random.choice": lambda: random.choice([1, 2]),
    "unseeded Random()": lambda: random.Random(),
    "SystemRandom": lambda: random.SystemRandom().random(),
    "uuid.uuid4": lambda: uuid.uuid4(),
    "thread": lambda: threading.Thread(target=lambda: None).start(),
    "socket": lambda: socket.socket(),
    "create_connection": lambda: socket.create_connection(("localhost", 1)),
}


@pytest.mark.parametrize("name", sorted(FORBIDDEN_CALLS))
def test_sandbox_forbids(name):
    call = FORBIDDEN_CALLS[name]

    async def body() -> None:
        with pytest.raises(NondeterminismError):
            call()

    run_deterministic(body, seed=0)


def test_sandbox_forbids_trio_threads_and_tcp():
    async def body() -> None:
        with pytest.raises(NondeterminismError):
            await trio.to_thread.run_sync(lambda: None)
        with pytest.raises(NondeterminismError):
            await trio.open_tcp_stream("127.0.0.1", 9)

    run_deterministic(body, seed=0)


def test_sandbox_allows_seeded_randomness_and_logging():
    async def body() -> int:
        import logging

        logging.getLogger("simulations.test").debug("timestamps come from the real clock: allowed")
        return random.Random(5).randint(0, 1 << 30)

    assert run_deterministic(body, seed=0) == random.Random(5).randint(0, 1 << 30)


def test_sandbox_removed_after_run_even_on_error():
    async def body() -> None:
        raise KeyError("boom")

    with pytest.raises(KeyError):
        run_deterministic(body, seed=0)
    time.time()
    os.urandom(1)
    random.Random()
    uuid.uuid4()


def test_virtual_clock_lets_idle_waiters_run_before_it_jumps():
    async def body() -> tuple[float, float]:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.sleep, 5)
            await trio.testing.wait_all_tasks_blocked()
            seen_idle_at = trio.current_time()
        return seen_idle_at, trio.current_time()

    assert run_deterministic(body, seed=0) == (0.0, 5.0)


def test_run_sync_soon_reaches_a_busy_run_within_the_sparse_polling_interval():
    # The run loop asks epoll for events only every POLL_EVERY passes while tasks keep it
    # busy; trio's wakeup fd (Ctrl-C, run_sync_soon) must still be noticed within that bound.
    from simulations.determinism import _SparseIOPolling

    async def body() -> tuple[int, bool]:
        ran = []
        trio.lowlevel.current_trio_token().run_sync_soon(ran.append, True)
        passes = 0
        while not ran and passes < 10 * _SparseIOPolling.POLL_EVERY:
            await trio.sleep(0.001)  # the virtual clock jumps: the loop never really sleeps
            passes += 1
        # Nothing else scheduled while the thread runs: the run waits in a real epoll,
        # which the thread's completion (a run_sync_soon) must wake.
        await trio.to_thread.run_sync(ran.append, "thread")
        return passes, ran[-1] == "thread"

    passes, woke = run_deterministic(body, seed=0, guard=False)
    assert passes <= _SparseIOPolling.POLL_EVERY + 2
    assert woke


def test_sim_clock_sleep_is_trio_sleep_without_a_cancel_scope():
    from simulations.determinism import current_sim_clock

    async def body() -> list:
        clock = current_sim_clock()
        seen = []
        await clock.sleep(1.5)
        seen.append(trio.current_time())
        await clock.sleep_until(4.0)
        seen.append(trio.current_time())
        with trio.move_on_after(1.0) as scope:  # cancelled mid-sleep: its timer must not wake it later
            await clock.sleep(10.0)
        seen.append((trio.current_time(), scope.cancelled_caught))
        await trio.sleep(20.0)  # past the cancelled sleep's timer (t=14): nothing woke this task early
        seen.append(trio.current_time())
        with trio.CancelScope() as scope:
            scope.cancel()
            await clock.sleep(0)  # a past or present deadline is still a checkpoint
        seen.append(scope.cancelled_caught)
        with pytest.raises(ValueError):
            await clock.sleep(-1)
        return seen

    assert run_deterministic(body, seed=0) == [1.5, 4.0, (5.0, True), 25.0, True]


def test_trace_reading_the_sim_clock_stamps_what_trio_would():
    from simulations.determinism import current_sim_clock
    from simulations.trace import Trace

    async def body() -> tuple[list[str], list[str]]:
        direct, via_trio = Trace(full=True), Trace(full=True)
        with direct.reading(current_sim_clock()):
            for delay in (0.0, 0.25, 1e-6, 3.0):
                await trio.sleep(delay)
                for trace in (direct, via_trio):
                    trace.record("n1", "tick", at=trio.current_time(), ok=True, ids=(1, 2))
        direct.record("n1", "after")  # the block ended: back to trio's clock
        via_trio.record("n1", "after")
        return direct.lines, via_trio.lines

    direct, via_trio = run_deterministic(body, seed=0)
    assert direct == via_trio
    assert direct[2].startswith("250001 3 n1 tick at=0.250001 ok=True ids=[1,2]")


def test_trace_record_io_writes_the_general_records_line():
    from simulations.trace import Trace

    fast, general = Trace(full=True), Trace(full=True)
    for trace in (fast, general):
        trace.record("n1", "start")
    fast.record_io("n2", "send", 7, 1024)
    general.record("n2", "send", conn=7, nbytes=1024)
    assert fast.lines == general.lines == ["-1 1 n1 start", "-1 2 n2 send conn=7 nbytes=1024"]
    assert fast.hash == general.hash and fast.kinds == general.kinds


def test_instruments_work_in_a_deterministic_run():
    # run_deterministic keeps trio's instruments in a plain dict (a faster `in`): adding,
    # calling and removing one must behave as with trio's own Instruments.
    seen: list[str] = []

    class Steps(trio.abc.Instrument):
        def after_task_step(self, task) -> None:
            seen.append("step")

        def after_run(self) -> None:
            seen.append("after_run")

    class Broken(trio.abc.Instrument):
        def before_task_step(self, task) -> None:
            raise RuntimeError("an instrument that raises is disabled")

    async def body() -> tuple[int, int]:
        steps, broken = Steps(), Broken()
        trio.lowlevel.add_instrument(steps)
        trio.lowlevel.add_instrument(broken)
        await trio.sleep(1)
        await trio.sleep(1)
        during = seen.count("step")
        with pytest.raises(KeyError):
            trio.lowlevel.remove_instrument(broken)  # already removed when it raised
        trio.lowlevel.remove_instrument(steps)
        await trio.sleep(1)
        trio.lowlevel.add_instrument(steps)  # left on: trio calls its after_run at the end
        return during, seen.count("step")

    during, after_removal = run_deterministic(body, seed=0)
    assert during >= 2 and after_removal == during
    assert seen[-1] == "after_run"
