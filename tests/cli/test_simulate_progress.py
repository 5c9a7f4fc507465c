"""`simulate --seeds` progress: whole lines off a terminal, a bar with an ETA on one; bad
durations named by their flag."""
from __future__ import annotations

import io
import json
import subprocess
import sys

from raftkafka.cli.simulate import Progress, format_eta


def _simulate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "raftkafka", "simulate", *args], capture_output=True, text=True,
                          timeout=120)


def test_seeds_into_a_pipe_print_one_line_per_n_seeds_without_carriage_returns():
    done = _simulate("--seeds", "0..2", "--duration", "1s", "--heal-timeout", "5s", "--workload", "raft",
                     "--progress-every", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "\r" not in done.stderr and "\033" not in done.stderr
    lines = [l for l in done.stderr.splitlines() if l.startswith("simulate: ")]
    assert [l.split()[1] for l in lines] == ["2/3", "3/3"]  # every 2nd seed, and the last
    assert all(" ETA " in l for l in lines)
    assert "3 seeds, 0 failing" in done.stdout


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_a_bar_is_redrawn_in_place_with_an_eta():
    term = _Terminal()
    progress = Progress(10, term)
    progress.update(1, 0, 2.0)  # 0.5 seeds/s: 9 seeds left → 18 s
    progress.update(5, 1, 10.0)
    progress.finish()
    out = term.getvalue()
    assert out.count("\r[") == 2 and out.endswith("\n") and out.count("\n") == 1
    assert "1/10 seeds, 0 failing, 0.5 seeds/s, ETA 18s" in out
    assert "[###############...............] 5/10" in out
    assert [format_eta(s) for s in (5, 75, 3700)] == ["5s", "1m15s", "1h01m"]


def test_a_bad_duration_is_one_line_naming_its_flag():
    for flag in ("--duration", "--heal-timeout"):
        done = _simulate("--seeds", "0..1", flag, "abc")
        assert done.returncode == 2
        assert done.stderr.strip().splitlines() == [f"error: {flag} 'abc': not a duration (e.g. 30s, 2m, 500ms)"]
    done = _simulate("--seed", "1", "--duration=-5s")
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        "error: --duration '-5s': not a duration (e.g. 30s, 2m, 500ms)"]
    done = _simulate("--seed", "1", "--duration")  # a flag without its value: one line too
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and "--duration" in done.stderr


def test_with_json_a_failing_seed_is_named_on_stderr_and_stdout_stays_one_json_object():
    # A real run of a seed that fails: the catalogue's fetch_beyond_high_watermark, patched in.
    code = ("import pytest\n"
            "from tests.simulations.catalogue import by_name\n"
            "by_name('fetch_beyond_high_watermark').apply(pytest.MonkeyPatch())\n"
            "from raftkafka.cli.main import main\n"
            "main(['simulate', '--seeds', '0..0', '--duration', '10s', '--json'])\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    summary = json.loads(done.stdout)
    assert summary["seeds"] == 1 and summary["failing"] == [0]
    assert "FAIL seed 0: " in done.stderr
