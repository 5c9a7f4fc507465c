"""`format`, `node` and `quorum` commands: results, and one-line errors for expected failures."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from raftkafka.bench.raft_quorum import LocalCluster, free_ports
from raftkafka.node.config import ConfigError, load_config, parse_listeners, parse_voters


def cli(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "raftkafka", *args], capture_output=True, text=True, timeout=timeout)


def one_line_error(proc: subprocess.CompletedProcess, *fragments: str) -> None:
    assert proc.returncode == 1, proc
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


# ------------------------------------------------------------------ config
def test_config_names_the_bad_setting():
    base = {"node.id": 1, "process.roles": "controller", "log.dirs": "/d"}
    cfg = load_config(base)
    assert cfg.controller_listener.port == 9093 and cfg.raft_config().election_timeout == 1.0
    cases = [
        ({"node.id": "x"}, "node.id"),
        ({"process.roles": "chef"}, "process.roles"),
        ({"listeners": "nonsense"}, "listeners"),
        ({"listeners": "PLAINTEXT://:9092"}, "listeners"),
        ({"controller.quorum.voters": "1@host"}, "controller.quorum.voters"),
        ({"controller.quorum.election.timeout.ms": 0}, "controller.quorum.election.timeout.ms"),
        ({"no.such.setting": 1}, "no.such.setting"),
    ]
    for override, name in cases:
        with pytest.raises(ConfigError, match=name.replace(".", r"\.")):
            load_config({**base, **override})
    with pytest.raises(ConfigError, match="log.dirs is required"):
        load_config({"node.id": 1, "process.roles": "controller"})


def test_voter_and_listener_parsing():
    v = parse_voters("1@127.0.0.1:9093, 2@[::1]:9094:AAAAAAAAAAAAAAAAAAAABw")
    assert [(x.node_id, x.host, x.port, x.directory_id) for x in v] == [
        (1, "127.0.0.1", 9093, None), (2, "::1", 9094, "AAAAAAAAAAAAAAAAAAAABw")]
    with pytest.raises(ConfigError, match="twice"):
        parse_voters("1@a:1,1@b:2")
    assert parse_listeners("controller://:9093")[0].host == "0.0.0.0"


def test_toml_file_with_nested_and_dotted_keys(tmp_path):
    from raftkafka.node.config import read_toml

    path = tmp_path / "node.toml"
    path.write_text('"node.id" = 3\n[process]\nroles = ["controller"]\n[log]\ndirs = "/x"\n')
    assert load_config(read_toml(str(path))).node_id == 3
    path.write_text("node.id = = 3")
    with pytest.raises(ConfigError, match="node.toml"):
        read_toml(str(path))


# ------------------------------------------------------------------ format
def test_format_and_refusals(tmp_path):
    cid = cli("format", "--random-uuid").stdout.strip()
    assert len(cid) == 22
    d = str(tmp_path / "n1")
    ok = cli("format", "--cluster-id", cid, "--node-id", "1", "--log-dir", d, "--initial-voters", "1@127.0.0.1:9093")
    assert ok.returncode == 0 and "Formatted" in ok.stdout
    assert f"cluster.id={cid}" in (tmp_path / "n1" / "meta.properties").read_text()
    one_line_error(cli("format", "--cluster-id", cid, "--node-id", "1", "--log-dir", d,
                       "--initial-voters", "1@127.0.0.1:9093"), "already formatted")
    again = cli("format", "--cluster-id", cid, "--node-id", "1", "--log-dir", d,
                "--initial-voters", "1@127.0.0.1:9093", "--ignore-formatted")
    assert again.returncode == 0
    one_line_error(cli("format", "--cluster-id", "bad", "--node-id", "1", "--log-dir", d), "--cluster-id")
    one_line_error(cli("format", "--cluster-id", cid, "--node-id", "2", "--log-dir", str(tmp_path / "n2")),
                   "--initial-voters")
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "file").write_text("x")
    one_line_error(cli("format", "--cluster-id", cid, "--node-id", "1", "--log-dir", str(tmp_path / "junk"),
                       "--initial-voters", "1@h:1"), "not empty")


# -------------------------------------------------------------------- node
def test_node_refuses_unformatted_and_foreign_dirs(tmp_path):
    port = free_ports(1)[0]
    common = ["node", "--roles", "controller", "--listeners", f"CONTROLLER://127.0.0.1:{port}"]
    one_line_error(cli(*common, "--node-id", "1", "--log-dir", str(tmp_path / "none")), "does not exist")
    (tmp_path / "empty").mkdir()
    one_line_error(cli(*common, "--node-id", "1", "--log-dir", str(tmp_path / "empty")), "not formatted")
    cid = cli("format", "--random-uuid").stdout.strip()
    d = str(tmp_path / "n1")
    cli("format", "--cluster-id", cid, "--node-id", "1", "--log-dir", d, "--initial-voters", f"1@127.0.0.1:{port}")
    one_line_error(cli(*common, "--node-id", "2", "--log-dir", d), "belongs to node 1")
    one_line_error(cli(*common, "--node-id", "1", "--log-dir", d, "--controller-quorum-voters", "5@h:1"),
                   "controller.quorum.voters")
    one_line_error(cli(*common, "--node-id", "x", "--log-dir", d), "node.id")
    one_line_error(cli("node", "--config", str(tmp_path / "missing.toml")), "missing.toml")


# ------------------------------------------------------------------ quorum
def test_quorum_describe_unreachable_is_one_line():
    port = free_ports(1)[0]
    one_line_error(cli("quorum", "describe", "--bootstrap-controller", f"127.0.0.1:{port}", "--timeout", "1"),
                   "could not describe")
    one_line_error(cli("quorum", "describe", "--bootstrap-controller", "nonsense"), "HOST:PORT")


@pytest.mark.e2e
def test_quorum_describe_text_and_json(tmp_path):
    with LocalCluster(3, base_dir=str(tmp_path)) as cluster:
        cluster.format()
        cluster.start_all()
        addr = f"127.0.0.1:{cluster.ports[2]}"
        out = cli("quorum", "describe", "--bootstrap-controller", addr, "--json", "--timeout", "30")
        assert out.returncode == 0, out.stderr
        doc = json.loads(out.stdout)
        assert doc["leader_id"] in (1, 2, 3) and doc["leader_epoch"] >= 1 and doc["high_watermark"] >= 0
        assert sorted(v["id"] for v in doc["voters"]) == [1, 2, 3] and doc["observers"] == []
        assert all({"id", "log_end_offset", "lag"} <= set(v) for v in doc["voters"])
        text = cli("quorum", "describe", "--bootstrap-controller", addr, "--timeout", "30")
        assert text.returncode == 0
        assert f"LeaderId:               {doc['leader_id']}" in text.stdout
        assert "HighWatermark:" in text.stdout and "LogEndOffset" in text.stdout


def test_node_with_busy_port_or_damaged_state_is_one_line(tmp_path):
    import socket

    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]
    try:
        cid = cli("format", "--random-uuid").stdout.strip()
        d = tmp_path / "n1"
        cli("format", "--cluster-id", cid, "--node-id", "1", "--log-dir", str(d), "--initial-voters", f"1@127.0.0.1:{port}")
        common = ["node", "--roles", "controller", "--node-id", "1", "--log-dir", str(d)]
        one_line_error(cli(*common, "--listeners", f"CONTROLLER://127.0.0.1:{port}"), "cannot listen")
        (d / "__cluster_metadata-0").mkdir(exist_ok=True)
        (d / "__cluster_metadata-0" / "quorum-state").write_text("{not json")
        one_line_error(cli(*common, "--listeners", f"CONTROLLER://127.0.0.1:{free_ports(1)[0]}"), "quorum-state")
    finally:
        busy.close()
