"""A failing seed as a small reproduction file, replayed and shrunk.

A reproduction is a fault schedule (simulations/fault_schedule.py: the seed, the options and
every fault the run applied) plus what went wrong: the first violation, how many there were,
and the last lines of the trace. It loads as a schedule, so `simulate --replay FILE` replays
it; `simulate --repro FILE` replays it and says whether the same invariant breaks again.

A replay applies the recorded faults at their times, but the nemesis no longer draws, so the
run's tasks interleave differently from the start and its trace is not the recorded one: a
violation that needed one interleaving may not recur. `rerun_seed` runs the seed itself, its
faults drawn again, which is the recorded run exactly (the same trace hash) while the code is
unchanged; `--repro` falls back to it.

`shrink` drops faults while the violation persists (Zeller's delta debugging over the
schedule's events: remove a chunk, keep the removal if the same invariant still breaks, halve
the chunks when no removal does), so what is left are faults the failure needs.

    python -m raftkafka simulate --seeds 0..999 --save-failing failing/
    python -m raftkafka simulate --repro failing/seed-17.json
    python -m raftkafka simulate --shrink failing/seed-17.json      # writes seed-17.shrunk.json
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, NamedTuple

from simulations.fault_schedule import FaultSchedule
from simulations.runner import SimOptions, run_simulation

__all__ = ["Repro", "save_repro", "load_repro", "replay", "rerun_seed", "breaks", "shrink", "TAIL_LINES"]

TAIL_LINES = 40


class Repro(NamedTuple):
    schedule: FaultSchedule
    violation: dict | None  # the first one; None for a plain schedule
    heal_timeout: float | None  # the recorded run's; None for a plain schedule
    trace_hash: str | None  # the recorded run's; None for a plain schedule or an older file


def save_repro(path: str | Path, result: dict, tail: list[str]) -> None:
    """Write the reproduction of a failed run (`run_simulation`'s result, its trace's tail)."""
    violations = result["violations"]
    extra = {"heal_timeout": result["options"]["heal_timeout"], "hash": result["hash"],
             "violation": violations[0] if violations else None, "violations": len(violations),
             "trace_tail": list(tail)[-TAIL_LINES:]}
    FaultSchedule.from_dict(result["schedule"]).save(path, extra)


def load_repro(path: str | Path) -> Repro:
    """A reproduction file, or a plain schedule (ValueError, with the path, for neither)."""
    schedule = FaultSchedule.load(path)
    data = json.loads(Path(path).read_text())
    return Repro(schedule, data.get("violation"), data.get("heal_timeout"), data.get("hash"))


def replay(schedule: FaultSchedule, **options) -> dict:
    return run_simulation(SimOptions.replaying(schedule, **options))


def rerun_seed(schedule: FaultSchedule, **options) -> dict:
    """The schedule's seed run with its own draws, as `simulate --seed` runs it, under the
    schedule's options."""
    return run_simulation(SimOptions(seed=schedule.seed, duration=schedule.duration, faults=schedule.faults,
                                     controllers=schedule.controllers, workload=schedule.workload,
                                     brokers=schedule.brokers, node_settings=dict(schedule.node_settings),
                                     **options))


def breaks(result: dict, invariant: str | None) -> bool:
    """Whether the run broke `invariant` (any invariant if None)."""
    return any(invariant is None or v["invariant"] == invariant for v in result["violations"])


def shrink(schedule: FaultSchedule, invariant: str | None, *, max_runs: int = 200,
           on_run: Callable[[int, int, bool], None] | None = None, **options) -> FaultSchedule:
    """The schedule with as few faults as delta debugging finds that still break `invariant`.
    `on_run(run, faults tried, still failing)` reports each trial run."""
    events = list(schedule.events)
    runs = 0

    def fails(candidate: list[dict]) -> bool:
        nonlocal runs
        runs += 1
        trial = FaultSchedule(**{**schedule.__dict__, "events": candidate})
        failed = breaks(replay(trial, **options), invariant)
        if on_run is not None:
            on_run(runs, len(candidate), failed)
        return failed

    if fails([]):
        return FaultSchedule(**{**schedule.__dict__, "events": []})
    chunks = 2
    while len(events) >= 2 and runs < max_runs:
        size = -(-len(events) // chunks)
        for start in range(0, len(events), size):
            candidate = events[:start] + events[start + size:]
            if runs >= max_runs:
                break
            if fails(candidate):
                events = candidate
                chunks = max(chunks - 1, 2)
                break
        else:
            if chunks >= len(events):
                break
            chunks = min(len(events), chunks * 2)
    return FaultSchedule(**{**schedule.__dict__, "events": events})
