"""`quorum add-controller` / `remove-controller` and `format --standalone`: arguments checked
before anything is sent, one line each (the cluster side is tests/e2e/test_standalone_quorum.py)."""
from __future__ import annotations

import json


def test_remove_controller_needs_a_directory_id(cli):
    r = cli("quorum", "--bootstrap-server", "127.0.0.1:1", "remove-controller", "--controller-id", "1",
            "--controller-directory-id", "nope")
    assert r.code == 1 and r.err.strip().count("\n") == 0 and "--controller-directory-id 'nope'" in r.err


def test_add_controller_needs_the_controllers_config(cli, tmp_path):
    r = cli("quorum", "--bootstrap-server", "127.0.0.1:1", "add-controller")
    assert r.code == 1 and "--command-config" in r.err
    broker = tmp_path / "broker.properties"
    broker.write_text("node.id=5\nprocess.roles=broker\nlog.dirs=/nowhere\nlisteners=PLAINTEXT://127.0.0.1:9092\n"
                      "controller.listener.names=CONTROLLER\ncontroller.quorum.voters=1@127.0.0.1:9093\n")
    r = cli("quorum", "--bootstrap-server", "127.0.0.1:1", "--command-config", broker, "add-controller")
    assert r.code == 1 and "not a controller" in r.err
    controller = tmp_path / "controller.properties"
    controller.write_text(f"node.id=5\nprocess.roles=controller\nlog.dirs={tmp_path / 'unformatted'}\n"
                          "listeners=CONTROLLER://127.0.0.1:9093\ncontroller.listener.names=CONTROLLER\n")
    r = cli("quorum", "--bootstrap-server", "127.0.0.1:1", "--command-config", controller, "add-controller")
    assert r.code == 1 and "format" in r.err and r.err.strip().count("\n") == 0


def test_format_standalone_names_only_this_controller(cli, tmp_path):
    config = tmp_path / "controller.properties"
    data = tmp_path / "data"
    config.write_text(f"node.id=3\nprocess.roles=controller\nlog.dirs={data}\n"
                      "listeners=CONTROLLER://127.0.0.1:19093\ncontroller.listener.names=CONTROLLER\n")
    r = cli("format", "--cluster-id", "MkU3OEVBNTcwNTJENDM2Qg", "--config", config, "--standalone",
            "--directory-id", "AAAAAAAAAAAAAAAAAAAABw")
    assert r.code == 0, r.err
    doc = json.loads((data / "bootstrap.voters").read_text())
    assert doc["voters"] == [{"id": 3, "host": "127.0.0.1", "port": 19093, "directory_id": "AAAAAAAAAAAAAAAAAAAABw"}]
    r = cli("format", "--cluster-id", "MkU3OEVBNTcwNTJENDM2Qg", "--config", config, "--standalone",
            "--initial-controllers", "1@127.0.0.1:9093")
    assert r.code == 1 and "not both" in r.err
