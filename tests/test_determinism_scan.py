"""Node code reaches time, randomness, threads, sockets and files only through the Env.

This scans the sources of the node-code packages with `ast` (so comments and
strings never trigger it, and aliases like `import time as t` are resolved) and
fails on any direct use of a forbidden call. The real Env implementation,
`storage/env.py`, is the one place allowed to touch the OS; time, trio's clock included
(`trio.sleep`, `trio.move_on_after`, ...), is the Env's too (`env.sleep`, `env.move_on_after`).
"""
from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
NODE_PACKAGES = ["wire", "metrics", "process", "storage", "raft", "metadata", "broker"]
# storage/memfs.py is the Env's in-memory filesystem for tests and simulations: its slow fsync
# sleeps on trio's clock, which is the simulation's.
ALLOWED_FILES = {"storage/env.py", "storage/memfs.py"}
TRIO_TIME = {"trio.current_time", "trio.sleep", "trio.sleep_until", "trio.move_on_after", "trio.move_on_at",
             "trio.fail_after", "trio.fail_at"}

# Fully-qualified names whose use (call or reference) is forbidden in node code.
FORBIDDEN = {
    "time.time", "time.time_ns", "time.monotonic", "time.monotonic_ns", "time.perf_counter",
    "time.perf_counter_ns", "time.sleep", "time.process_time",
    "datetime.datetime.now", "datetime.datetime.utcnow", "datetime.datetime.today", "datetime.date.today",
    "os.urandom", "os.getrandom", "os.open", "os.pread", "os.pwrite", "os.read", "os.write", "os.fsync",
    "os.listdir", "os.scandir", "os.remove", "os.unlink", "os.rename", "os.replace", "os.makedirs",
    "os.mkdir", "os.rmdir", "os.sendfile", "shutil.rmtree", "shutil.copyfile", "shutil.move",
    "uuid.uuid1", "uuid.uuid4", "secrets.token_bytes", "secrets.token_hex", "secrets.randbelow",
    "trio.to_thread.run_sync", "trio.open_tcp_stream", "trio.open_tcp_listeners", "trio.serve_tcp",
    "trio.socket.socket", "trio.open_file", "trio.Path",
    "io.open", "pathlib.Path.open", "builtins.open",
} | TRIO_TIME
# Every function of the random module except the Random class (a seeded instance is fine).
FORBIDDEN_RANDOM = {
    "random", "randint", "randrange", "choice", "choices", "shuffle", "sample", "uniform",
    "getrandbits", "gauss", "seed", "randbytes", "SystemRandom", "expovariate", "triangular",
}
FORBIDDEN_MODULES = {"threading", "socket", "multiprocessing", "concurrent.futures", "subprocess", "select"}
FORBIDDEN_BUILTINS = {"open"}


def _sources():
    for pkg in NODE_PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel not in ALLOWED_FILES:
                yield rel, path


class _Scanner(ast.NodeVisitor):
    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}  # local name -> fully qualified name
        self.problems: list[str] = []

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name in FORBIDDEN_MODULES or alias.name.split(".")[0] in FORBIDDEN_MODULES:
                self.problems.append(f"line {node.lineno}: import {alias.name}")
            local = alias.asname or alias.name.split(".")[0]
            self.aliases[local] = alias.name if alias.asname else alias.name.split(".")[0]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if module in FORBIDDEN_MODULES or module.split(".")[0] in FORBIDDEN_MODULES:
            self.problems.append(f"line {node.lineno}: from {module} import ...")
        for alias in node.names:
            full = f"{module}.{alias.name}"
            self.aliases[alias.asname or alias.name] = full
            self._check(full, node.lineno)

    def _qualified(self, node: ast.AST) -> str | None:
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        base = self.aliases.get(node.id, node.id)
        return ".".join([base, *reversed(parts)])

    def _check(self, name: str, lineno: int) -> None:
        if name in FORBIDDEN:
            self.problems.append(f"line {lineno}: {name}")
        elif name.startswith("random.") and name.split(".")[1] in FORBIDDEN_RANDOM:
            self.problems.append(f"line {lineno}: {name} (use env.rng)")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        name = self._qualified(node)
        if name:
            self._check(name, node.lineno)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_BUILTINS and node.func.id not in self.aliases:
            self.problems.append(f"line {node.lineno}: builtin {node.func.id}() (use env.fs)")
        self.generic_visit(node)


def scan(source: str) -> list[str]:
    scanner = _Scanner()
    scanner.visit(ast.parse(source))
    return scanner.problems


@pytest.mark.parametrize("rel,path", list(_sources()), ids=lambda v: v if isinstance(v, str) else "")
def test_node_code_uses_only_the_env(rel, path):
    problems = scan(path.read_text())
    assert not problems, f"{rel} bypasses the Env:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize(
    "snippet",
    [
        "import time\nx = time.time()",
        "import time as t\nt.monotonic()",
        "from time import perf_counter\n",
        "import random\nrandom.randint(1, 2)",
        "from random import shuffle\n",
        "import os\nos.urandom(8)",
        "import uuid\nuuid.uuid4()",
        "import threading\n",
        "import trio\ntrio.to_thread.run_sync(f)",
        "f = open('x')",
        "import socket\n",
        "import datetime\ndatetime.datetime.now()",
        "import trio\nnow = trio.current_time()",
        "import trio\nwith trio.move_on_after(1):\n    pass",
        "from trio import fail_after\n",
    ],
)
def test_scanner_catches_forbidden_calls(snippet):
    assert scan(snippet), f"scanner missed: {snippet!r}"


@pytest.mark.parametrize(
    "snippet",
    [
        "import random\nrng = random.Random(42)\nrng.randint(1, 2)",
        "x = env.now()\ny = env.rng.random()",
        "# time.time() in a comment\ns = 'os.urandom'",
        "await env.sleep(1)\nwith env.move_on_at(t):\n    pass",
        "import trio\nawait trio.lowlevel.checkpoint()",
    ],
)
def test_scanner_allows_env_use(snippet):
    assert scan(snippet) == []
