"""A failing seed leaves a reproduction (schedule, options, first violation, trace tail) that
`simulate --repro` replays and `simulate --shrink` cuts down to the faults the failure needs."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import simulations.repro as repro
from simulations.fault_schedule import FaultSchedule
from simulations.runner import SimOptions, run_simulation

REPO = Path(__file__).resolve().parents[2]


def test_shrinking_keeps_exactly_the_faults_the_failure_needs(monkeypatch):
    schedule = FaultSchedule.from_dict(run_simulation(SimOptions(seed=2, duration=1.0, faults="none",
                                                                 workload="raft"))["schedule"])
    schedule.events = [{"kind": "clog", "src": "n1", "dst": "n2", "seconds": 0.1, "at": i / 10} for i in range(13)]
    needed = {3, 11}  # the failure happens only when both of these faults are applied
    runs = []

    def fake_replay(trial, **options):
        runs.append(len(trial.events))
        present = {round(e["at"] * 10) for e in trial.events}
        return {"violations": [{"invariant": "Boom"}] if needed <= present else []}

    monkeypatch.setattr(repro, "replay", fake_replay)
    small = repro.shrink(schedule, "Boom")
    assert sorted(round(e["at"] * 10) for e in small.events) == [3, 11]
    assert len(runs) < 40
    assert repro.shrink(schedule, "Other") .events == schedule.events  # never fails: nothing dropped


def test_a_failing_seed_writes_a_reproduction_that_replays_and_shrinks(tmp_path):
    # A raft run given no time to converge after the heal fails on every seed (Liveness).
    out = tmp_path / "failing"
    sim = [sys.executable, "-m", "raftkafka", "simulate"]
    done = subprocess.run(sim + ["--seeds", "5..5", "--duration", "2s", "--workload", "raft", "--faults", "crash",
                                 "--heal-timeout", "0s", "--save-failing", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    path = out / "seed-5.json"
    data = json.loads(path.read_text())
    assert data["seed"] == 5 and data["heal_timeout"] == 0.0 and data["violation"]["invariant"] == "Liveness"
    assert len(data["trace_tail"]) == repro.TAIL_LINES and data["events"]
    again = subprocess.run(sim + ["--repro", str(path)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert again.returncode == 1 and "reproduced: Liveness" in again.stdout, again.stdout + again.stderr
    small = subprocess.run(sim + ["--shrink", str(path)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert small.returncode == 0, small.stdout + small.stderr
    shrunk = json.loads((out / "seed-5.shrunk.json").read_text())
    assert shrunk["events"] == [] and shrunk["violation"]["invariant"] == "Liveness"  # it needs no fault at all


def test_a_reproduction_whose_replay_runs_clean_falls_back_to_the_seeds_own_run(tmp_path, monkeypatch, capsys):
    # The replay of a schedule runs without the nemesis's draws, so its tasks interleave
    # differently and a violation may not recur; the seed's own run is the recorded run.
    from raftkafka.cli.main import main

    out = tmp_path / "failing"
    done = subprocess.run([sys.executable, "-m", "raftkafka", "simulate", "--seeds", "5..5", "--duration", "2s",
                           "--workload", "raft", "--faults", "crash", "--heal-timeout", "0s",
                           "--save-failing", str(out)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    path = out / "seed-5.json"
    recorded_hash = json.loads(path.read_text())["hash"]

    def clean_replay(schedule, **options):  # as a replay whose interleaving misses the failure
        return run_simulation(SimOptions.replaying(schedule, heal_timeout=30.0))
    monkeypatch.setattr(repro, "replay", clean_replay)

    def repro_run() -> tuple[int, str]:
        try:
            main(["simulate", "--repro", str(path)])
        except SystemExit as e:
            return e.code, capsys.readouterr().out
        raise AssertionError("the command did not exit")

    code, printed = repro_run()
    assert code == 1, printed
    assert "did NOT reproduce: Liveness" in printed
    assert ("the seed's own run: python -m raftkafka simulate --seed 5 --duration 2s --faults crash --nodes 3 "
            "--brokers 3 --workload raft --heal-timeout 0s") in printed
    assert f"hash={recorded_hash}" in printed
    assert "reproduced by the seed's own run: Liveness; the recorded run exactly (the same trace hash)" in printed

    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "hash": "0" * 16}))  # as if recorded by other code
    code, printed = repro_run()
    assert code == 1 and "reproduced by the seed's own run: Liveness; not the recorded run" in printed, printed

    path.write_text(json.dumps({**data, "heal_timeout": 30.0}))  # the seed's own run converges too
    code, printed = repro_run()
    assert code == 0 and "the seed's own run did NOT reproduce it either" in printed, printed
