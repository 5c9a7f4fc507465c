"""A new user's path: a fresh clone of HEAD, a fresh venv, `pip install .`, then
`python -m raftkafka` serves librdkafka at localhost:P and the data survives a restart.

The venv has no access to this checkout or its venv (no --system-site-packages, no
PYTHONPATH); pip reuses its cache, so this takes seconds, not minutes (measured ~5 s).
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from tests.e2e.procs import REPO, free_base_port
from tests.e2e.test_single_node import consume_all, produce

pytestmark = pytest.mark.e2e


def base_python() -> str:
    """The interpreter this project's venv was made from: the new venv starts from a bare Python."""
    return getattr(sys, "_base_executable", None) or sys.executable


def test_fresh_clone_venv_pip_install_then_bare_command_serves_and_keeps_data(processes, tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    started = time.monotonic()
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
    venv = tmp_path / "venv"
    subprocess.run([base_python(), "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    subprocess.run([python, "-m", "pip", "install", "--quiet", str(clone)], check=True, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    print(f"clone + venv + pip install: {time.monotonic() - started:.1f} s")
    # The installed package, not this checkout:
    where = subprocess.run([python, "-c", "import raftkafka; print(raftkafka.__file__)"], env=env,
                           cwd=str(tmp_path), check=True, capture_output=True, text=True).stdout.strip()
    assert where.startswith(str(venv))

    home = tmp_path / "home"
    home.mkdir()
    base = free_base_port()
    bootstrap = f"localhost:{base}"
    node = processes.start("--base-port", str(base), cwd=str(home), env=env, python=python)
    node.wait_line(rf"Connect any Kafka client to\s+localhost:{base}", 60)
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("first-steps", 1)])["first-steps"].result(30)
    produce(bootstrap, "first-steps", 100, b"hello")
    node.signal(signal.SIGINT)
    assert node.wait(60) == 0

    again = processes.start("--base-port", str(base), cwd=str(home), env=env, python=python)
    again.wait_line(r"serving Kafka clients", 60)
    assert consume_all(bootstrap, "first-steps", 100) == [(i, b"k%d" % i, b"hello-%d" % i) for i in range(100)]
    again.signal(signal.SIGTERM)
    assert again.wait(60) == 0
