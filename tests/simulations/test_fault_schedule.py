"""A run's fault schedule: saved, loaded, and replayed as the same faults at the same times."""
from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys

import pytest

from simulations.fault_schedule import FaultSchedule
from simulations.runner import SimOptions, run_simulation
from tests.e2e.procs import REPO


def _drawn(seed: int) -> tuple[dict, dict]:
    """A 10 s all-faults run of `seed`: (its schedule, the faults injected)."""
    result = run_simulation(SimOptions(seed=seed, duration=10.0, faults="all"))
    return result["schedule"], result["faults"]


def test_a_replay_applies_the_recorded_faults_at_their_times_and_is_deterministic(tmp_path):
    # The first 10 s seed with a power loss, a wiped disk, replayed requests, a pause and a restart
    # (which seed that is moves whenever a fault kind or workload is added), searched in order by
    # two worker processes (this box has two cores).
    wanted = {"power_loss", "wipe", "replay", "pause", "restart"}
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        for seed, (drawn, faults) in enumerate(pool.imap(_drawn, range(160))):
            schedule = FaultSchedule.from_dict(drawn)
            if {e["kind"] for e in schedule.events} >= wanted:
                break
        else:
            pytest.fail(f"no seed in 0-159 draws {sorted(wanted)}")
        pool.terminate()
    original = {"faults": faults}
    path = tmp_path / f"seed-{seed}.json"
    schedule.save(path)
    replayed = run_simulation(SimOptions.replaying(FaultSchedule.load(path)))
    assert replayed["schedule"]["events"] == schedule.to_dict()["events"]
    assert replayed["faults"] == original["faults"] and not replayed["violations"]
    again = run_simulation(SimOptions.replaying(FaultSchedule.load(path)))
    assert again["hash"] == replayed["hash"]


def test_a_replayed_fault_that_no_longer_applies_is_skipped():
    schedule = FaultSchedule.from_dict(run_simulation(SimOptions(seed=2, duration=3.0, faults="none",
                                                                 workload="raft"))["schedule"])
    schedule.events = [{"kind": "kill", "node": 1, "restart_after": 1.0, "at": 0.5},
                       {"kind": "kill", "node": 1, "restart_after": 1.0, "at": 0.6},  # already down
                       {"kind": "bitrot", "node": 1, "path": "/nowhere.log", "bits": [3], "restart_after": 1.0,
                        "at": 0.7}]
    result = run_simulation(SimOptions.replaying(schedule))
    assert result["faults"] == {"kill": 1} and not result["violations"]
    assert [e["kind"] for e in result["schedule"]["events"]] == ["kill"]


def test_a_file_that_is_not_a_schedule_is_one_line(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": 99}))
    with pytest.raises(ValueError, match="bad.json: fault schedule format 99"):
        FaultSchedule.load(bad)
    done = subprocess.run([sys.executable, "-m", "raftkafka", "simulate", "--replay", str(bad)], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "format 99" in done.stderr


def test_fuzzing_saves_the_schedule_of_each_failing_seed_only(tmp_path):
    # A run that cannot converge (a 0 s heal timeout) fails on every seed.
    out = tmp_path / "failing"
    done = subprocess.run([sys.executable, "-m", "raftkafka", "simulate", "--seeds", "3..4", "--duration", "1s",
                           "--workload", "raft", "--heal-timeout", "0s", "--save-failing", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    saved = sorted(p.name for p in out.iterdir())
    assert saved == ["seed-3.json", "seed-4.json"]
    assert FaultSchedule.load(out / "seed-3.json").seed == 3
