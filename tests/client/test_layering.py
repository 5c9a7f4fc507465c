"""The client runs inside the simulation: apart from the blocking wrappers it reaches time,
randomness and the network only through the Env, and of the standard library and third-party
packages imports only trio and a few pure modules (ssl: the TLS contexts the Env's network
takes). That of ours it imports only wire, storage.env, the Env's timers (storage.deadline_reaper)
and storage.tls is checked with every other layer in tests/test_import_direction.py."""
import ast
import pathlib

import pytest

from tests.test_determinism_scan import scan
from tests.test_import_direction import layer_of_module

CLIENT = pathlib.Path(__file__).resolve().parents[2] / "raftkafka" / "client"
SOURCES = sorted(p for p in CLIENT.glob("*.py") if p.name != "blocking.py")
ALLOWED_PREFIXES = ("trio", "__future__")
STDLIB = {"bisect", "collections", "dataclasses", "enum", "functools", "inspect", "itertools", "math", "random", "ssl", "struct",
          "typing", "zlib"}


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_client_uses_only_the_env(path):
    assert scan(path.read_text()) == []


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_client_imports_only_trio_and_pure_stdlib(path):
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        for name in names:
            if layer_of_module(name) is None:  # ours: tests/test_import_direction.py
                assert name.startswith(ALLOWED_PREFIXES) or name.split(".")[0] in STDLIB, f"{path.name} imports {name}"
