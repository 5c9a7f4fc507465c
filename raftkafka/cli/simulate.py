"""`python -m raftkafka simulate`: deterministic simulation of a cluster under faults.

    python -m raftkafka simulate --seed 7 [--duration 30s] [--faults all|none|network|crash|disk|clock|process]
                                 [--nodes 3] [--brokers 3] [--workload cluster|raft] [--json] [--trace FILE]
    python -m raftkafka simulate --seeds 0..199 [--jobs 2] [--json] [--save-failing DIR]
    python -m raftkafka simulate --replay FILE
    python -m raftkafka simulate --repro FILE | --shrink FILE

One seed prints a summary and the trace hash (the same seed gives the same hash
in any process); a violation prints the invariant and the last trace events.
`--seeds A..B` (inclusive) fuzzes a range and prints every failing seed; its
progress goes to stderr: a bar with an ETA redrawn in place on a terminal, else
(a log, a pipe) one plain line every `--progress-every` seeds. `--save-schedule FILE` (one
seed) and `--save-failing DIR` (fuzzing: DIR/seed-N.json per failing seed) write the faults a
run applied; `--replay FILE` runs that seed again under exactly those faults
(simulations/fault_schedule.py), which stays meaningful when a code change moves the seed's
own draws. A `--save-failing` file is a reproduction (simulations/repro.py): the schedule plus
the first violation, the trace hash and tail; `--repro FILE` replays it and says whether the same
invariant breaks (if not, it runs the seed with its own draws, the recorded run itself while the
code is unchanged), `--shrink FILE` drops faults while it does (FILE.shrunk.json).
A run prints its coverage counters (simulations/coverage.py); a fuzz run prints their sums.
Exit status: 0 clean, 1 a violation, 2 bad usage.
The simulation package is imported only when the command runs.
"""
from __future__ import annotations

import json
import os
import sys
import time

__all__ = ["add_parser", "run"]

TAIL_EVENTS = 40


def add_parser(subparsers) -> None:
    from raftkafka.cli.common import add_command

    p = add_command(subparsers, "simulate", "deterministic simulation of a cluster under faults")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--seed", type=int, help="run one seed")
    which.add_argument("--seeds", metavar="A..B", help="fuzz seeds A to B inclusive")
    which.add_argument("--replay", metavar="FILE", help="replay a saved fault schedule (its seed and options)")
    which.add_argument("--repro", metavar="FILE",
                       help="replay a reproduction file (--save-failing) and say whether its violation recurs")
    which.add_argument("--shrink", metavar="FILE",
                       help="drop faults from a reproduction while its violation persists; writes FILE.shrunk.json")
    p.add_argument("--duration", default="30s", help="simulated time of the fault phase (default 30s)")
    p.add_argument("--heal-timeout", help="time allowed to converge after healing (default 30s; --repro and "
                                           "--shrink: the recorded run's)")
    p.add_argument("--faults", default="all",
                   help="all, none, or a comma list of groups (network, crash, disk, clock, process) or kinds")
    p.add_argument("--nodes", "--controllers", dest="nodes", type=int, default=3, help="controllers (default 3)")
    p.add_argument("--brokers", type=int, default=3,
                   help="broker-only nodes for the cluster workload; 0 = combined controller+broker nodes (default 3)")
    p.add_argument("--workload", default="cluster", choices=["cluster", "raft", "append", "membership"],
                   help="cluster: controllers, brokers and Kafka clients (default); raft (= append): the quorum alone")
    p.add_argument("--check-every-step", action="store_true",
                   help="run the in-memory checks after every task step, not every 20 ms (about 2x slower)")
    p.add_argument("--set", dest="node_settings", action="append", default=[], metavar="NAME=VALUE",
                   help="a node setting over the workload's own (repeatable)")
    p.add_argument("--jobs", type=int, default=1, help="worker processes for --seeds (default 1)")
    p.add_argument("--progress-every", type=int, default=0, metavar="N",
                   help="--seeds off a terminal: a progress line every N seeds (default: about 20 lines)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--trace", metavar="FILE", help="write the whole event trace to FILE")
    p.add_argument("--save-schedule", metavar="FILE", help="write the faults the run applied to FILE (JSON)")
    p.add_argument("--save-failing", metavar="DIR",
                   help="with --seeds: a reproduction DIR/seed-N.json (schedule, first violation, trace tail) "
                        "for each failing seed")
    p.add_argument("--max-runs", type=int, default=200, help="--shrink: at most this many trial runs (default 200)")
    p.set_defaults(run=run)


def _duration(text: str, flag: str) -> float:
    from simulations.runner import parse_duration

    try:
        seconds = parse_duration(text)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:  # also refuses nan
        raise ValueError(f"{flag} {text!r}: not a duration (e.g. 30s, 2m, 500ms)")
    return seconds


def _options(args, seed: int, full_trace: bool):
    from raftkafka.cli.dev import _extra_settings
    from simulations.fault_schedule import FaultSchedule
    from simulations.nemesis import fault_kinds
    from simulations.runner import SimOptions

    if getattr(args, "replay", None):
        return SimOptions.replaying(FaultSchedule.load(args.replay), heal_timeout=_duration(args.heal_timeout or "30s", "--heal-timeout"),
                                    full_trace=full_trace, step_checks=getattr(args, "check_every_step", False))
    fault_kinds(args.faults)  # validates
    return SimOptions(seed=seed, duration=_duration(args.duration, "--duration"), faults=args.faults,
                      controllers=args.nodes, heal_timeout=_duration(args.heal_timeout or "30s", "--heal-timeout"),
                      full_trace=full_trace, workload=args.workload, brokers=getattr(args, "brokers", 3),
                      step_checks=getattr(args, "check_every_step", False),
                      node_settings=_extra_settings(getattr(args, "node_settings", [])))


def _usage_error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


SIM_TRIO_MINOR = "0.35"  # the `sim` extra's pin (pyproject.toml): trio's private scheduler names we replace


def trio_mismatch() -> str | None:
    import trio

    if trio.__version__.startswith(SIM_TRIO_MINOR + "."):
        return None
    return (f"simulate needs trio {SIM_TRIO_MINOR}.x (it replaces trio's private scheduler internals); "
            f"found {trio.__version__}: pip install 'raftkafka[sim]'")


def run(args) -> int:
    if (mismatch := trio_mismatch()) is not None:
        return _usage_error(mismatch)
    if args.nodes < 1:
        return _usage_error("--nodes must be at least 1")
    if getattr(args, "brokers", 3) < 0:
        return _usage_error("--brokers must be at least 0")
    if args.save_failing and args.seeds is None:
        return _usage_error("--save-failing goes with --seeds (one seed: --save-schedule)")
    if args.save_schedule and args.seeds is not None:
        return _usage_error("--save-schedule saves one run's schedule (fuzzing: --save-failing DIR)")
    if getattr(args, "repro", None) or getattr(args, "shrink", None):
        return _repro(args)
    try:
        if args.seeds is not None:
            first, sep, last = args.seeds.partition("..")
            if not sep:
                raise ValueError("--seeds takes A..B")
            try:
                first, last = int(first), int(last)
            except ValueError:
                raise ValueError(f"--seeds {args.seeds!r}: A..B takes two integers") from None
            return _fuzz(args, first, last)
        options = _options(args, args.seed, full_trace=bool(args.trace))
    except ValueError as e:
        return _usage_error(str(e))
    from simulations.runner import run_simulation

    result = run_simulation(options)
    trace = result.pop("trace")
    schedule = result.pop("schedule")
    if args.trace:
        trace.write(args.trace, header=[f"seed={options.seed} hash={result['hash']} faults={options.faults}"])
    if args.save_schedule:
        _save_schedule(args.save_schedule, schedule)
    if args.json:
        print(json.dumps(result, sort_keys=True))
    else:
        _print_summary(result)
        if result["violations"]:
            print(f"last {TAIL_EVENTS} events:")
            for line in trace.last(TAIL_EVENTS):
                print(f"  {line}")
            if args.replay:
                print(f"replay: python -m raftkafka simulate --replay {args.replay} --trace trace-{options.seed}.log")
            else:
                print(f"replay: python -m raftkafka simulate --seed {args.seed} --duration {args.duration} "
                      f"--faults {args.faults} --nodes {args.nodes} --brokers {getattr(args, 'brokers', 3)} "
                      f"--workload {args.workload} --trace trace-{args.seed}.log --save-schedule seed-{args.seed}.json")
    return 1 if result["violations"] else 0


def _repro(args) -> int:
    """--repro FILE: replay and compare; --shrink FILE: drop faults while the violation persists."""
    from simulations.repro import breaks, load_repro, replay, shrink

    repro_only = bool(getattr(args, "repro", None))
    path = args.repro if repro_only else args.shrink
    try:
        recorded = load_repro(path)
        heal_timeout = _duration(args.heal_timeout, "--heal-timeout") if args.heal_timeout else recorded.heal_timeout
        heal_timeout = 30.0 if heal_timeout is None else heal_timeout
    except ValueError as e:
        return _usage_error(str(e))
    schedule, violation = recorded.schedule, recorded.violation
    invariant = violation["invariant"] if violation else None
    if violation:
        print(f"recorded: {violation['invariant']}: {violation['message']}")
    result = replay(schedule, heal_timeout=heal_timeout)
    result.pop("schedule")
    trace = result.pop("trace")
    _print_summary(result)
    again = breaks(result, invariant)
    if repro_only or not again:
        print(("reproduced" if again else "did NOT reproduce") + (f": {invariant}" if invariant else ""))
        if again:
            print(f"last {TAIL_EVENTS} events:")
            for line in trace.last(TAIL_EVENTS):
                print(f"  {line}")
            return 1
        return _rerun_seed(recorded, invariant, heal_timeout) if violation else (1 if result["violations"] else 0)

    def progress(run: int, faults: int, failed: bool) -> None:
        print(f"  run {run}: {faults} faults: {'still fails' if failed else 'passes'}", flush=True)

    print(f"shrinking {len(schedule.events)} faults (at most {args.max_runs} runs)")
    small = shrink(schedule, invariant, max_runs=args.max_runs, on_run=progress, heal_timeout=heal_timeout)
    final = replay(small, heal_timeout=heal_timeout)
    out = str(path)[:-5] if str(path).endswith(".json") else str(path)
    out += ".shrunk.json"
    from simulations.repro import save_repro

    save_repro(out, final, final.pop("trace").last(TAIL_EVENTS))
    kinds = ", ".join(sorted({e["kind"] for e in small.events})) or "none"
    print(f"{len(small.events)} of {len(schedule.events)} faults left ({kinds}); written to {out}")
    return 0


def _rerun_seed(recorded, invariant: str, heal_timeout: float) -> int:
    """The schedule's replay ran clean: run the seed with its own draws, which is the recorded
    run itself while the code is unchanged (simulations/repro.py)."""
    from simulations.repro import breaks, rerun_seed

    schedule = recorded.schedule
    settings = "".join(f" --set {k}={v}" for k, v in sorted(schedule.node_settings.items()))
    command = (f"python -m raftkafka simulate --seed {schedule.seed} --duration {schedule.duration:g}s "
               f"--faults {schedule.faults} --nodes {schedule.controllers} --brokers {schedule.brokers} "
               f"--workload {schedule.workload} --heal-timeout {heal_timeout:g}s{settings}")
    print(f"the seed's own run: {command}")
    result = rerun_seed(schedule, heal_timeout=heal_timeout)
    result.pop("schedule")
    trace = result.pop("trace")
    _print_summary(result)
    same = ("the recorded run exactly (the same trace hash)" if result["hash"] == recorded.trace_hash else
            "not the recorded run (another trace hash: the code changed)" if recorded.trace_hash else
            "the file has no trace hash to compare")
    if breaks(result, invariant):
        print(f"reproduced by the seed's own run: {invariant}; {same}")
        print(f"last {TAIL_EVENTS} events:")
        for line in trace.last(TAIL_EVENTS):
            print(f"  {line}")
        return 1
    print(f"the seed's own run did NOT reproduce it either; {same}")
    return 1 if result["violations"] else 0


def _print_summary(result: dict) -> None:
    status = "OK" if not result["violations"] else f"{len(result['violations'])} VIOLATION(S)"
    speed = result["sim_seconds"] / max(result["wall_seconds"], 1e-9)
    print(f"seed {result['seed']}: {status}  hash={result['hash']}  sim={result['sim_seconds']:.1f}s "
          f"wall={result['wall_seconds']:.2f}s ({speed:.0f}x)  events={result['events']}")
    faults = " ".join(f"{k}={v}" for k, v in sorted(result["faults"].items())) or "none"
    print(f"  faults: {faults}")
    w = result["workload"]
    if w and "ops" in w:
        ops = " ".join(f"{k}={v}" for k, v in w["ops"].items())
        print(f"  client ops: {ops}")
        print(f"  records read back={w['records_read']}; committed metadata entries={w['committed']}, "
              f"images compared={w['images_compared']}, node crashes={w['crashes']}")
    elif w:
        print(f"  appends: sent={w['sent']} acked={w['acked']} failed={w['failed']} "
              f"indeterminate={w['indeterminate']}; committed entries={w['committed']}, node crashes={w['crashes']}")
    if result.get("coverage"):
        print("  coverage: " + format_coverage(result["coverage"]))
    for v in result["violations"]:
        print(f"  VIOLATION {v['invariant']} at {v['sim_time']:.3f}s: {v['message']}")


def format_coverage(counts: dict) -> str:
    """The counters that moved, then those that stayed at zero on their own NEVER line, so a
    blind spot stands out."""
    zeros = [k for k, n in sorted(counts.items()) if not n]
    seen = [f"{k}={n}" for k, n in sorted(counts.items()) if n]
    return " ".join(seen) + (f"\n  NEVER: {' '.join(zeros)}" if zeros else "")


def _run_one(job: tuple) -> dict:
    """Worker: one seed, without the trace (it stays in the worker)."""
    args_dict, seed = job
    from types import SimpleNamespace

    from simulations.runner import run_simulation

    result = run_simulation(_options(SimpleNamespace(**args_dict), seed, full_trace=False))
    trace = result.pop("trace")
    schedule = result.pop("schedule")
    if result["violations"]:
        result["tail"] = trace.last(TAIL_EVENTS)
        result["schedule"] = schedule
    return result


def _save_schedule(path: str, schedule: dict | None) -> None:
    from simulations.fault_schedule import FaultSchedule

    if schedule is not None:  # None: the harness failed before the fault phase
        FaultSchedule.from_dict(schedule).save(path)


def _fuzz(args, first: int, last: int) -> int:
    if last < first:
        raise ValueError("--seeds A..B needs A <= B")
    _options(args, first, full_trace=False)  # validate before starting workers
    if args.save_failing:
        os.makedirs(args.save_failing, exist_ok=True)
    seeds = list(range(first, last + 1))
    args_dict = {k: getattr(args, k) for k in ("duration", "heal_timeout", "faults", "nodes", "workload",
                                               "check_every_step", "brokers", "node_settings") if hasattr(args, k)}
    jobs = [(args_dict, s) for s in seeds]
    wall0 = time.perf_counter()
    failing: list[dict] = []
    sim_seconds = 0.0
    done = 0
    fault_totals: dict[str, int] = {}  # injected faults by kind, over every seed
    coverage: dict[str, int] = {}  # simulations.coverage counters, over every seed
    progress = Progress(len(seeds), sys.stderr, every=getattr(args, "progress_every", 0))

    def report(result: dict) -> None:
        nonlocal done, sim_seconds
        done += 1
        sim_seconds += result["sim_seconds"]
        for kind, n in result["faults"].items():
            fault_totals[kind] = fault_totals.get(kind, 0) + n
        for key, n in result.get("coverage", {}).items():
            coverage[key] = coverage.get(key, 0) + n
        if result["violations"]:
            failing.append(result)
            if args.save_failing and result.get("schedule") is not None:
                from simulations.repro import save_repro

                save_repro(os.path.join(args.save_failing, f"seed-{result['seed']}.json"), result, result["tail"])
            v = result["violations"][0]
            progress.clear()
            # With --json, stdout holds the one JSON object alone.
            print(f"FAIL seed {result['seed']}: {v['invariant']}: {v['message']}", flush=True,
                  file=sys.stderr if args.json else sys.stdout)
        progress.update(done, len(failing), time.perf_counter() - wall0)

    if args.jobs > 1:
        import multiprocessing

        with multiprocessing.get_context("spawn").Pool(args.jobs) as pool:
            for result in pool.imap_unordered(_run_one, jobs):
                report(result)
    else:
        for job in jobs:
            report(_run_one(job))
    progress.finish()
    wall = time.perf_counter() - wall0
    summary = {"seeds": len(seeds), "failing": sorted(r["seed"] for r in failing),
               "sim_seconds": round(sim_seconds, 3), "wall_seconds": round(wall, 3),
               "seeds_per_second": round(len(seeds) / wall, 3), "sim_per_wall": round(sim_seconds / wall, 1),
               "faults": dict(sorted(fault_totals.items())), "coverage": dict(sorted(coverage.items()))}
    if args.json:
        print(json.dumps(summary, sort_keys=True))
    else:
        listed = f" {summary['failing']}" if failing else ""
        print(f"{len(seeds)} seeds, {len(failing)} failing{listed}; "
              f"{summary['seeds_per_second']} seeds/s, {summary['sim_per_wall']}x realtime over {wall:.1f}s")
        print("faults injected: " + (" ".join(f"{k}={v}" for k, v in summary["faults"].items()) or "none"))
        print("coverage: " + format_coverage(coverage))
        for r in sorted(failing, key=lambda r: r["seed"]):
            print(f"seed {r['seed']}: last events:")
            for line in r.get("tail", [])[-15:]:
                print(f"  {line}")
    return 1 if failing else 0


def format_eta(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class Progress:
    """Progress of a seed range on `stream`: a bar redrawn with carriage returns on a terminal,
    else one line per `every` seeds (and the last), so logs and pipes get whole lines."""

    WIDTH = 30

    def __init__(self, total: int, stream, *, every: int = 0):
        self.total = total
        self.stream = stream
        self.tty = stream.isatty()
        self.every = every if every > 0 else max(1, total // 20)
        self._drawn = False

    def update(self, done: int, failing: int, elapsed: float) -> None:
        rate = done / elapsed if elapsed > 0 else 0.0
        eta = format_eta((self.total - done) / rate) if rate > 0 else "?"
        text = f"{done}/{self.total} seeds, {failing} failing, {rate:.1f} seeds/s, ETA {eta}"
        if self.tty:
            filled = self.WIDTH * done // self.total
            print(f"\r[{'#' * filled}{'.' * (self.WIDTH - filled)}] {text}\033[K", end="", file=self.stream, flush=True)
            self._drawn = True
        elif done % self.every == 0 or done == self.total:
            print(f"simulate: {text}", file=self.stream, flush=True)

    def clear(self) -> None:
        """Before other output on the terminal: wipe the bar (it is redrawn on the next update)."""
        if self.tty and self._drawn:
            print("\r\033[K", end="", file=self.stream, flush=True)
            self._drawn = False

    def finish(self) -> None:
        if self.tty and self._drawn:
            print(file=self.stream, flush=True)
