"""`format --standalone` (as kafka-storage format --standalone): a first controller that is the
whole quorum, grown with `quorum add-controller` by a second node formatted with it as the initial
voter; then the quorum's refusals, one line each: a duplicate voter, an unknown one."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from raftkafka.cli.dev import node_layout
from storage.java_properties import parse_properties
from tests.e2e.procs import REPO, free_base_port, wait_until

pytestmark = pytest.mark.e2e


def cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "raftkafka", *args], capture_output=True, text=True,
                          timeout=60, env=env)


def one_line_error(r: subprocess.CompletedProcess, *fragments: str) -> None:
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 1 and len(lines) == 1 and lines[0].startswith("error: "), r
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def voters(bootstrap: str) -> list[int]:
    r = cli("quorum", "--bootstrap-server", bootstrap, "describe", "--status")
    assert r.returncode == 0, r.stderr
    line = next(l for l in r.stdout.splitlines() if l.startswith("CurrentVoters:"))
    return sorted(v["id"] for v in json.loads(line.partition(":")[2]))


def test_a_standalone_controller_grows_with_add_controller(processes, tmp_path):
    base = free_base_port(2)
    first = node_layout(1, 1, base, str(tmp_path / "node-1"))
    second = node_layout(2, 2, base, str(tmp_path / "node-2"), {
        "controller.quorum.voters": first.settings["controller.quorum.voters"],
        "offsets.topic.replication.factor": 1, "transaction.state.log.replication.factor": 1})
    configs = {}
    for layout in (first, second):  # the config beside the data dir: format wants it empty
        configs[layout.node_id] = str(tmp_path / f"node-{layout.node_id}.properties")
        with open(configs[layout.node_id], "w") as f:
            f.write("".join(f"{k}={v}\n" for k, v in layout.settings.items()))
    cluster_id = cli("format", "--random-uuid").stdout.strip()
    r = cli("format", "--cluster-id", cluster_id, "--config", configs[1], "--standalone")
    assert r.returncode == 0, r.stderr
    with open(os.path.join(first.data_dir, "bootstrap.voters")) as f:
        doc = json.load(f)
    directory_1 = parse_properties(open(os.path.join(first.data_dir, "meta.properties")).read())["directory.id"]
    assert [(v["id"], v["port"], v["directory_id"]) for v in doc["voters"]] == [
        (1, first.controller_port, directory_1)]
    # The second node joins with the first as its initial voter: it starts as an observer.
    r = cli("format", "--cluster-id", cluster_id, "--config", configs[2])
    assert r.returncode == 0, r.stderr

    bootstrap = f"127.0.0.1:{first.client_port}"
    nodes = [processes.node(configs[1]), processes.node(configs[2])]
    for node in nodes:
        node.wait_line(r"serving", 60)
    assert voters(bootstrap) == [1]
    deadline = time.monotonic() + 30
    while True:
        r = cli("quorum", "--bootstrap-server", bootstrap, "--command-config", configs[2], "add-controller")
        if r.returncode == 0 or time.monotonic() > deadline:
            break
        assert "REQUEST_TIMED_OUT" in r.stderr, r.stderr  # not caught up yet
        time.sleep(0.3)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("Added controller 2 with directory id ")
    wait_until(lambda: voters(bootstrap) == [1, 2], 20, "voters [1, 2]")

    one_line_error(cli("quorum", "--bootstrap-server", bootstrap, "--command-config", configs[2],
                       "add-controller"), "DUPLICATE_VOTER")
    one_line_error(cli("quorum", "--bootstrap-server", bootstrap, "remove-controller", "--controller-id", "7",
                       "--controller-directory-id", directory_1), "VOTER_NOT_FOUND")
