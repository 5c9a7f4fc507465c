"""The client runs inside the simulation: apart from the blocking wrappers it reaches time,
randomness and the network only through the Env, and imports only wire, storage.env and the
Env's timers (storage.deadline_reaper)."""
import ast
import pathlib

import pytest

from tests.test_determinism_scan import scan

CLIENT = pathlib.Path(__file__).resolve().parents[2] / "raftkafka" / "client"
SOURCES = sorted(p for p in CLIENT.glob("*.py") if p.name != "blocking.py")
ALLOWED_PREFIXES = ("raftkafka.client", "wire", "storage.env", "storage.deadline_reaper", "trio", "__future__")
STDLIB = {"collections", "dataclasses", "enum", "functools", "inspect", "itertools", "math", "random", "struct", "typing", "zlib"}


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_client_uses_only_the_env(path):
    assert scan(path.read_text()) == []


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_client_imports_only_lower_layers(path):
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        for name in names:
            assert name.startswith(ALLOWED_PREFIXES) or name.split(".")[0] in STDLIB, f"{path.name} imports {name}"
