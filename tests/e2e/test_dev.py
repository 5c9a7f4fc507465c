"""`python -m raftkafka dev --nodes 3`: one line per node, `ready`, a killed node rejoins from
its node.toml, and SIGTERM / Ctrl-C stop every child."""
from __future__ import annotations

import signal

import pytest
import trio

from raftkafka.cli.dev import wait_ready
from tests.e2e.procs import dev_config_path, free_base_port, pid_alive, wait_until

pytestmark = pytest.mark.e2e


def cluster_id(data_dir) -> str:
    text = (data_dir / "node-1" / "meta.properties").read_text()
    return next(line.split("=", 1)[1] for line in text.splitlines() if line.startswith("cluster.id="))


# A kill -9'd broker re-registers once its old session lapses: keep that short here.
FAST_SESSIONS = ("broker.session.timeout.ms=2000", "broker.heartbeat.interval.ms=300")


def test_dev_lines_ready_rejoin_and_sigterm_stops_all(processes, tmp_path):
    base = free_base_port(3)
    data = tmp_path / "data"
    dev, pids = processes.dev(3, base, str(data), *FAST_SESSIONS)
    lines = [l for l in dev.lines if l.startswith("node ")]
    assert [l.split()[0:2] for l in lines] == [["node", "1"], ["node", "2"], ["node", "3"]]
    for i, line in enumerate(lines, start=1):
        assert f"kafka 127.0.0.1:{base + 2 * (i - 1)}" in line
        assert f"controller 127.0.0.1:{base + 2 * (i - 1) + 1}" in line
    ready = next(l for l in dev.lines if l.startswith("ready"))
    assert ready == "ready  bootstrap.servers=" + ",".join(f"127.0.0.1:{base + 2 * i}" for i in range(3))
    for i in (1, 2, 3):
        assert (data / f"node-{i}" / "node.toml").exists()

    # kill -9 node 2: dev reports it; restarted from its node.toml it rejoins.
    import os

    os.kill(pids[2], signal.SIGKILL)
    dev.wait_line(rf"^node 2 \(pid {pids[2]}\) exited with code -9", 30)
    rejoined = processes.node(dev_config_path(str(data), 2))
    rejoined.wait_line(r"node 2 \(broker,controller\) serving Kafka clients", 60)
    controller_ports = {i: base + 2 * (i - 1) + 1 for i in (1, 2, 3)}

    async def all_three_unfenced():
        with trio.fail_after(60):
            await wait_ready(controller_ports, cluster_id(data), [1, 2, 3])

    trio.run(all_three_unfenced)

    # The node we restarted by hand is ours to stop; it shuts down cleanly on its own (first:
    # stopped last, it would find no quorum left to complete its controlled shutdown).
    rejoined.signal(signal.SIGTERM)
    assert rejoined.wait(60) == 0
    dev.signal(signal.SIGTERM)
    assert dev.wait(60) == 0
    assert dev.lines[-1] == "stopped"
    assert not pid_alive(pids[1]) and not pid_alive(pids[3])
    assert "controlled shutdown complete" in rejoined.output()  # its log is its output
    assert {n: end for n, end in _controlled_shutdowns(data).items() if n != 2} == {1: "complete", 3: "complete"}


def test_ctrl_c_stops_every_child_and_a_second_run_reuses_the_data(processes, tmp_path):
    base = free_base_port(3)
    data = tmp_path / "data"
    dev, pids = processes.dev(3, base, str(data))
    first_cluster = cluster_id(data)
    dev.signal(signal.SIGINT)
    assert dev.wait(60) == 0 and dev.lines[-1] == "stopped"
    wait_until(lambda: not any(pid_alive(p) for p in pids.values()), 10, "the children to exit")
    # Stopped together, every broker still completes its controlled shutdown: the active
    # controller serves the others' before it leaves (none waits out its timeout).
    assert _controlled_shutdowns(data) == {1: "complete", 2: "complete", 3: "complete"}
    again, _ = processes.dev(3, base, str(data))
    assert cluster_id(data) == first_cluster
    again.signal(signal.SIGINT)
    assert again.wait(60) == 0
    assert _controlled_shutdowns(data) == {1: "complete", 2: "complete", 3: "complete"}


def _controlled_shutdowns(data) -> dict[int, str]:
    """Node → how its latest controlled shutdown ended, from its node.log."""
    ends = {}
    for node in (1, 2, 3):
        for line in (data / f"node-{node}" / "node.log").read_text().splitlines():
            if "controlled shutdown " in line:
                ends[node] = line.rsplit("controlled shutdown ", 1)[1]
    return ends
