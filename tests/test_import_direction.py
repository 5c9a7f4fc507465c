"""Imports flow one way (DESIGN §2), checked on every module of every package with `ast`.

    metrics, process                       the floor: import none of ours
    wire ← storage ← raft ← metadata ← broker
         ← raftkafka.client                 (only wire and the Env, see below)
         ← raftkafka.node                   (a node uses the client for its group-lag metric)
         ← spark_source (and pyspark_raftkafka.py, its Spark discovery hook)
         ← simulations
         ← raftkafka.cli, raftkafka.bench, raftkafka.connect  (the top: they may import each other)

A layer may import its own layer and any layer below it, never one above. `raftkafka.client`
is narrower still: only `wire` and the Env (`storage.env`, its timers in `storage.deadline_reaper`,
and `storage.tls`: the TLS contexts the Env's network takes), so the CLI, the Spark source and the
simulation workloads share one client that runs anywhere an Env does. Imports inside
functions and under `if TYPE_CHECKING:` count like any other: a lazy import is still a
dependency. Tests are not checked (they may import anything).
"""
from __future__ import annotations

import ast
import pathlib
from dataclasses import dataclass

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

# Layer name -> rank; a module may import ranks <= its own (and its siblings never).
RANKS = {
    "metrics": 0, "process": 0,
    "wire": 1, "storage": 2, "raft": 3, "metadata": 4, "broker": 5,
    "raftkafka.client": 6, "raftkafka.node": 7,
    "spark_source": 8,
    "simulations": 9,
    "raftkafka.cli": 10, "raftkafka.bench": 10, "raftkafka.connect": 10, "raftkafka": 10,
}
# Pairs of distinct layers allowed to import each other although of the same rank.
PEERS = {frozenset({"raftkafka.cli", "raftkafka.bench"}), frozenset({"raftkafka", "raftkafka.cli"}),
         frozenset({"raftkafka.cli", "raftkafka.connect"}), frozenset({"raftkafka.bench", "raftkafka.connect"})}
# What raftkafka.client may import besides itself (module names or their prefixes).
CLIENT_ALLOWED = ("wire", "storage.env", "storage.deadline_reaper", "storage.tls")  # the Env, its timers, TLS
TOP_LEVEL = {name.split(".")[0] for name in RANKS}
# A root-level module that belongs to a layer.
ROOT_MODULES = {"pyspark_raftkafka.py": "spark_source"}


def layer_of_module(name: str) -> str | None:
    """The layer of a dotted module name of ours, or None for stdlib and third-party modules."""
    parts = name.split(".")
    if parts[0] not in TOP_LEVEL:
        return None
    if parts[0] == "raftkafka" and len(parts) > 1 and f"raftkafka.{parts[1]}" in RANKS:
        return f"raftkafka.{parts[1]}"
    return parts[0]


def layer_of_path(rel: str) -> str | None:
    if rel in ROOT_MODULES:
        return ROOT_MODULES[rel]
    return layer_of_module(rel.removesuffix(".py").replace("/", "."))


def _package_of(rel: str) -> list[str]:
    """The package a module's relative imports start from (a package's own, for __init__)."""
    return rel.removesuffix(".py").split("/")[:-1]


def imported_names(tree: ast.AST, rel: str):
    """(line, dotted name) for every import in the module, relative ones resolved."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = _package_of(rel)
                package = package[: len(package) - (node.level - 1)]
                base = ".".join(package + ([base] if base else []))
            for alias in node.names:
                # `from raftkafka import cli` imports raftkafka.cli; `from wire.rpc import Frame`
                # imports wire.rpc (the extra part then names no layer of its own).
                yield node.lineno, f"{base}.{alias.name}" if alias.name != "*" else base


def allowed(importer: str, name: str) -> bool:
    target = layer_of_module(name)
    if target is None or target == importer:
        return True
    if importer == "raftkafka.client":
        return any(name == p or name.startswith(p + ".") for p in CLIENT_ALLOWED)
    if frozenset({importer, target}) in PEERS:
        return True
    return RANKS[target] < RANKS[importer]


@dataclass(frozen=True)
class Problem:
    where: str
    name: str
    importer: str
    target: str

    def __str__(self) -> str:
        return f"{self.where}: {self.importer} imports {self.name} ({self.target}) against the direction"


def check_source(rel: str, source: str) -> list[Problem]:
    importer = layer_of_path(rel)
    if importer is None:
        return []
    problems = []
    for line, name in imported_names(ast.parse(source, rel), rel):
        if not allowed(importer, name):
            problems.append(Problem(f"{rel}:{line}", name, importer, layer_of_module(name)))
    return problems


def _sources():
    for top in sorted(TOP_LEVEL):
        for path in sorted((ROOT / top).rglob("*.py")):
            yield path.relative_to(ROOT).as_posix()
    yield from ROOT_MODULES


def test_every_import_follows_the_direction():
    problems = []
    sources = list(_sources())
    assert {layer_of_path(rel) for rel in sources} == set(RANKS)  # every layer was found
    for rel in sources:
        problems += check_source(rel, (ROOT / rel).read_text())
    assert not problems, "imports against the layer direction:\n" + "\n".join(map(str, problems))


@pytest.mark.parametrize("rel, source, offending", [
    ("storage/log/log.py", "import broker.server\n", "broker.server"),
    ("raft/core.py", "def f():\n    from metadata.image import MetadataImage\n", "metadata.image.MetadataImage"),
    ("metrics/registry.py", "from wire.protocol import ApiKey\n", "wire.protocol.ApiKey"),
    ("broker/server.py", "from raftkafka import cli\n", "raftkafka.cli"),
    ("broker/server.py", "from simulations.env import SimEnv\n", "simulations.env.SimEnv"),
    ("raftkafka/client/producer.py", "from storage.log.log import PartitionLog\n",
     "storage.log.log.PartitionLog"),
    ("raftkafka/client/producer.py", "import metrics.registry\n", "metrics.registry"),
    ("raftkafka/client/admin.py", "from raftkafka.node import run_node\n", "raftkafka.node.run_node"),
    ("raftkafka/node/assembly.py", "from spark_source.options import parse\n", "spark_source.options.parse"),
    ("spark_source/readers.py", "from simulations.runner import run\n", "simulations.runner.run"),
    ("simulations/runner.py", "from raftkafka.cli.simulate import run\n", "raftkafka.cli.simulate.run"),
    ("pyspark_raftkafka.py", "import simulations\n", "simulations"),
    ("metadata/controller/rpc.py", "from ...broker import server\n", "broker.server"),
    ("wire/rpc.py", "if TYPE_CHECKING:\n    from storage.env import Env\n", "storage.env.Env"),
])
def test_an_import_against_the_direction_is_reported(rel, source, offending):
    problems = check_source(rel, source)
    assert [p.name for p in problems] == [offending]
    line = source[: source.index(offending.split(".")[0])].count("\n") + 1
    assert str(problems[0]).startswith(f"{rel}:{line}: ")


@pytest.mark.parametrize("rel, source", [
    ("broker/server.py", "from storage.log.log import PartitionLog\nimport trio\n"),
    ("raftkafka/client/producer.py", "from storage.env import Env\nfrom wire.records import build\n"),
    ("raftkafka/client/producer.py", "from storage import env\nfrom raftkafka.client.errors import KafkaError\n"),
    ("raftkafka/node/assembly.py", "from broker.broker import Broker\nfrom metrics.registry import MetricsRegistry\n"),
    ("spark_source/readers.py", "from raftkafka.client import Admin\n"),
    ("simulations/cluster.py", "from raftkafka.node import ControllerNode\nfrom spark_source import options\n"),
    ("raftkafka/cli/bench.py", "from raftkafka.bench import perf\nfrom simulations.runner import run\n"),
    ("raftkafka/bench/scenarios.py", "from raftkafka.cli.common import run_client\n"),
    ("raftkafka/__main__.py", "from raftkafka.cli.main import main\n"),
    ("metadata/controller/rpc.py", "from ..records import Record\nfrom . import client\n"),
])
def test_an_import_along_the_direction_passes(rel, source):
    assert check_source(rel, source) == []
