"""Real node processes for the end-to-end tests: `python -m raftkafka` (bare), `node`, `dev`.

Every process started here is registered and killed (SIGKILL, with its children for
`dev`) by `Processes.kill_all()`, which the fixtures call in `finally`. Output is read by
a thread per process into a list of lines, so tests wait for a line with a deadline
(polling), never by sleeping blindly.
"""
from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from raftkafka.bench.processes import pid_alive, ports_free  # noqa: F401  (tests import them from here)

REPO = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"


def wait_until(predicate, timeout: float = 60.0, what: str = "condition", interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def free_base_port(nodes: int = 1) -> int:
    """A base port P with P..P+2*nodes-1 free (the dev/bare port layout)."""
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(20000, 32768 - 2 * nodes, 2)  # below the ephemeral range
        if ports_free(range(base, base + 2 * nodes)):
            return base
    raise RuntimeError("no free port range found")


class Proc:
    """One child process with its merged stdout/stderr collected line by line."""

    def __init__(self, args: list[str], *, cwd: str | None = None, env: dict | None = None,
                 python: str = sys.executable):
        full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        if python == sys.executable:
            full_env["PYTHONPATH"] = str(REPO) + os.pathsep + full_env.get("PYTHONPATH", "")
        self.args = args
        self.popen = subprocess.Popen([python, "-m", "raftkafka", *args], cwd=cwd, env=full_env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for raw in self.popen.stdout:
            self.lines.append(raw.decode("utf-8", "replace").rstrip("\n"))

    @property
    def pid(self) -> int:
        return self.popen.pid

    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_line(self, pattern: str, timeout: float = 60.0) -> re.Match:
        regex = re.compile(pattern)

        def found():
            for line in list(self.lines):
                m = regex.search(line)
                if m:
                    return m
            if self.popen.poll() is not None:
                time.sleep(0.2)  # let the reader drain
                raise AssertionError(f"process exited ({self.popen.returncode}) before {pattern!r}:\n"
                                     + self.output()[-4000:])
            return None

        try:
            return wait_until(found, timeout, f"a line matching {pattern!r}")
        except AssertionError as e:
            raise AssertionError(f"{e}\n--- output ---\n{self.output()[-4000:]}") from None

    def signal(self, signum: int) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signum)

    def wait(self, timeout: float = 60.0) -> int:
        code = self.popen.wait(timeout)
        self._reader.join(5)
        return code


class Processes:
    """Starts node processes and always cleans them up (kill_all)."""

    def __init__(self):
        self.procs: list[Proc] = []
        self.extra_pids: set[int] = set()  # dev's children

    def start(self, *args: str, **kw) -> Proc:
        proc = Proc(list(args), **kw)
        self.procs.append(proc)
        return proc

    def node(self, config_path: str, **kw) -> Proc:
        return self.start("node", "--config", config_path, **kw)

    def dev(self, nodes: int, base_port: int, data_dir: str, *settings: str, security: str = "plaintext",
            **kw) -> tuple[Proc, dict[int, int]]:
        """`dev` up to its `ready` line; returns the process and node id → pid."""
        args = ["dev", "--nodes", str(nodes), "--base-port", str(base_port), "--data-dir", data_dir,
                "--security", security]
        for s in settings:
            args += ["--set", s]
        proc = self.start(*args, **kw)
        pids = {}
        for i in range(1, nodes + 1):
            m = proc.wait_line(rf"^node {i}\s+pid (\d+)\s+kafka {HOST}:(\d+)\s+controller {HOST}:(\d+)", 30)
            pids[i] = int(m.group(1))
            self.extra_pids.add(pids[i])
        proc.wait_line(r"^ready\b", 120)
        return proc, pids

    def kill_all(self) -> None:
        for proc in self.procs:
            if proc.popen.poll() is None:
                proc.popen.kill()
        for pid in sorted(self.extra_pids):
            kill_pid(pid)
        for proc in self.procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                pass


def kill_pid(pid: int) -> None:
    if pid_alive(pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def dev_config_path(data_dir: str, node_id: int) -> str:
    return os.path.join(os.path.abspath(data_dir), f"node-{node_id}", "node.toml")


def write_single_node(data_dir: str, base_port: int, *settings: tuple[str, object]) -> str:
    """Format a one-node data dir like the bare command does; the path of its node.toml."""
    from raftkafka.cli.dev import node_layout, prepare_node, voters_of

    layout = node_layout(1, 1, base_port, data_dir, dict(settings))
    prepare_node(layout, voters_of([layout]), "MkU3OEVBNTcwNTJENDM2Qg")
    return layout.config_path
