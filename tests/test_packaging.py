"""Packaging: the LICENSE matches the declared licence, the extras say what each optional part
needs, and a missing optional part is one clear line, not a traceback."""
from __future__ import annotations

import pathlib
import sys
import tomllib

import pytest

from raftkafka.cli.main import main

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_the_license_file_is_the_declared_apache_2_0():
    assert _project()["license"] == {"text": "Apache-2.0"}
    text = (ROOT / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License") and "Version 2.0, January 2004" in text
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text and "END OF TERMS AND CONDITIONS" in text


def test_extras_carry_bench_and_the_simulation_trio_pin():
    project = _project()
    extras = project["optional-dependencies"]
    assert any(d.startswith("confluent-kafka") for d in extras["bench"])
    assert extras["sim"] == ["trio>=0.35,<0.36"]
    [trio] = [d for d in project["dependencies"] if d.startswith("trio")]
    assert "<" not in trio  # the node's install does not carry the simulation's pin


def _run(capsys, *argv) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(list(argv))
    return exit_info.value.code, capsys.readouterr().err


def test_bench_without_confluent_kafka_says_which_extra(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "confluent_kafka", None)  # import fails as if not installed
    code, err = _run(capsys, "bench", "produce", "--bootstrap-server", "127.0.0.1:1", "--topic", "t",
                     "--num-records", "1", "--record-size", "1")
    assert code == 1 and err.strip().splitlines() == [
        "error: bench needs the confluent-kafka package for librdkafka and the scenarios: "
        "pip install 'raftkafka[bench]' (or run a workload with --client ours)"]


def test_simulate_on_another_trio_minor_says_which_extra(monkeypatch, capsys):
    import trio
    monkeypatch.setattr(trio, "__version__", "0.99.0")
    code, err = _run(capsys, "simulate", "--seed", "1")
    assert code == 2 and "found 0.99.0: pip install 'raftkafka[sim]'" in err and len(err.strip().splitlines()) == 1
