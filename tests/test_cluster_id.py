"""Cluster and directory ids made by `format`, `dev` and the bare command never look like a flag
(`--controller-directory-id --Fsc...` is refused by any argument parser)."""
import json
import uuid

import pytest

from raftkafka.cli import dev, format_storage
from raftkafka.cli.format_storage import random_uuid_text
from storage.env import RealEnv
from storage.meta_properties import is_valid_uuid, uuid_to_str

DASH_FIRST = [uuid.UUID(bytes=b"\xfb" + bytes(15)), uuid.UUID(bytes=b"\xf8" + bytes(15))]


class _DashFirstEnv(RealEnv):
    """A RealEnv whose uuids start with two whose base64 text starts with '-'."""

    def __init__(self):
        super().__init__()
        self.queued = list(DASH_FIRST)

    def uuid(self):
        return self.queued.pop(0) if self.queued else super().uuid()


def test_the_dash_first_ids_are_what_they_claim():
    assert all(uuid_to_str(u).startswith("-") for u in DASH_FIRST)


def test_random_uuid_text_skips_ids_starting_with_a_dash():
    env = _DashFirstEnv()
    text = random_uuid_text(env)
    assert not text.startswith("-") and is_valid_uuid(text)
    assert env.queued == []  # both dash-first ids were drawn and refused


@pytest.fixture
def dash_first_env(monkeypatch):
    monkeypatch.setattr(format_storage, "RealEnv", _DashFirstEnv)
    monkeypatch.setattr(dev, "RealEnv", _DashFirstEnv)


def test_format_standalone_draws_a_directory_id_that_is_not_a_flag(dash_first_env, tmp_path, capsys):
    from raftkafka.cli.main import main

    data = tmp_path / "data"
    config = tmp_path / "controller.properties"
    config.write_text(f"node.id=1\nprocess.roles=controller\nlog.dirs={data}\n"
                      "listeners=CONTROLLER://127.0.0.1:19093\ncontroller.listener.names=CONTROLLER\n")
    with pytest.raises(SystemExit) as exit:
        main(["format", "--cluster-id", "MkU3OEVBNTcwNTJENDM2Qg", "--config", str(config), "--standalone"])
    assert exit.value.code == 0, capsys.readouterr().err
    [voter] = json.loads((data / "bootstrap.voters").read_text())["voters"]
    assert is_valid_uuid(voter["directory_id"]) and not voter["directory_id"].startswith("-")
    assert f"directory.id={voter['directory_id']}" in (data / "meta.properties").read_text()


def test_dev_formats_directory_ids_that_are_not_flags(dash_first_env, tmp_path):
    layout = dev.node_layout(1, 1, 21500, str(tmp_path / "node-1"))
    assert dev.prepare_node(layout, dev.voters_of([layout]), "MkU3OEVBNTcwNTJENDM2Qg")
    meta = (tmp_path / "node-1" / "meta.properties").read_text()
    [directory_id] = [line.split("=", 1)[1] for line in meta.splitlines() if line.startswith("directory.id=")]
    assert is_valid_uuid(directory_id) and not directory_id.startswith("-")
