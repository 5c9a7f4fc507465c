"""The README's quickstart, run as written.

The test reads the fenced blocks of the README's "Quickstart" section in order:
- ```bash background``` starts a long-running command (a node, a dev cluster) in a fresh
  process group and waits until it says it is serving; starting the next one first stops the
  previous one with Ctrl-C (SIGINT), as the README tells the reader to;
- ```bash``` runs the block with bash (errexit, pipefail) and requires exit status 0;
- ```text``` right after a bash block is that block's exact standard output.

Everything runs in an empty temporary directory with this checkout's Python first on PATH, so
`python -m raftkafka` is the command a new user types. The quickstart uses Kafka's ports
(9092-9097), so they must be free.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.procs import REPO, ports_free, wait_until

pytestmark = pytest.mark.e2e

BLOCK = re.compile(r"^```(bash background|bash|text)\n(.*?)^```", re.S | re.M)
SERVING = re.compile(r"serving Kafka clients|^ready\b", re.M)


def quickstart_blocks() -> list[tuple[str, str]]:
    text = (REPO / "README.md").read_text()
    start = text.index("\n## Quickstart")
    end = text.find("\n## ", start + 1)
    section = text[start : end if end != -1 else len(text)]
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer(section)]


def test_readme_has_a_quickstart_with_servers_commands_and_expected_output():
    kinds = [kind for kind, _ in quickstart_blocks()]
    assert kinds.count("bash background") == 2  # the single node, then the 3-node cluster
    assert "text" in kinds and kinds.count("bash") >= 5


class _Background:
    def __init__(self, script: str, cwd: Path, env: dict):
        self.log = cwd / f"background-{time.monotonic_ns()}.log"
        self._out = open(self.log, "wb")
        self.popen = subprocess.Popen(["bash", "-c", script], cwd=cwd, env=env, stdout=self._out,
                                      stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_serving(self, timeout: float = 120.0) -> None:
        def serving():
            if self.popen.poll() is not None:
                raise AssertionError(f"exited with {self.popen.returncode}:\n{self.output()[-3000:]}")
            return SERVING.search(self.output())

        wait_until(serving, timeout, "the command to start serving")

    def ctrl_c(self, timeout: float = 60.0) -> None:
        os.killpg(self.popen.pid, signal.SIGINT)
        self.popen.wait(timeout)

    def kill(self) -> None:
        try:
            os.killpg(self.popen.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.popen.wait(10)
        self._out.close()


def test_quickstart_runs_as_written(tmp_path):
    assert ports_free(range(9092, 9098)), "the quickstart needs ports 9092-9097 free"
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"],
           "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
    blocks = quickstart_blocks()
    background: list[_Background] = []
    try:
        last_stdout = None
        for kind, body in blocks:
            if kind == "bash background":
                if background:
                    background[-1].ctrl_c()
                background.append(_Background(body, tmp_path, env))
                background[-1].wait_serving()
                last_stdout = None
            elif kind == "bash":
                done = subprocess.run(["bash", "-euo", "pipefail", "-c", body], cwd=tmp_path, env=env,
                                      capture_output=True, text=True, timeout=180)
                assert done.returncode == 0, f"{body}\nexit {done.returncode}\n{done.stdout}\n{done.stderr}"
                last_stdout = done.stdout
            else:
                assert last_stdout is not None, "a text block must follow a command block"
                assert last_stdout == body, f"expected:\n{body}\ngot:\n{last_stdout}"
                last_stdout = None
    finally:
        for proc in background:
            proc.kill()
