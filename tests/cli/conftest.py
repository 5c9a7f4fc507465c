"""Fixtures for the command tests: real brokers with their group coordinator
(tests/broker/harness.py's ThreadedCluster, three of them, shared by the package's tests), a
one-broker mini cluster (for what needs a small cluster), and `cli`, which runs `python -m raftkafka ...`
in-process."""
from __future__ import annotations

import io
import itertools
import sys

import pytest

from raftkafka.cli.main import main
from tests.broker.harness import ThreadedCluster
from tests.client.served import ServedMiniCluster


# Package scope: they stop when tests/cli is done. Alive for the whole session, they ran in a
# thread of the pytest process beside later tests that patch node code in that process (the
# simulation's mutations).
@pytest.fixture(scope="package")
def brokers():
    # No initial rebalance delay: a console consumer joining an empty group starts at once.
    cluster = ThreadedCluster(3, static={"group.initial.rebalance.delay.ms": "0"})
    bootstrap = cluster.start()
    yield bootstrap
    cluster.stop()


@pytest.fixture(scope="package")
def mini():
    with ServedMiniCluster(node_ids=(1,)) as served:
        yield served


_names = itertools.count()


@pytest.fixture
def topic_name(request):
    """A topic name no other test uses."""
    return f"{request.node.name.replace('[', '-').replace(']', '')[:40]}-{next(_names)}"


class Run:
    def __init__(self, code: int, out: str, err: str):
        self.code, self.out, self.err = code, out, err

    def __repr__(self):
        return f"Run(code={self.code}, out={self.out!r}, err={self.err!r})"


@pytest.fixture
def cli(capsys, monkeypatch):
    """cli("topics", "--list", ..., stdin=b"...") → Run(code, out, err)."""

    def run(*argv: str, stdin: bytes = b"") -> Run:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        capsys.readouterr()
        try:
            main([str(a) for a in argv])
            code = 0
        except SystemExit as e:
            code = e.code
        out, err = capsys.readouterr()
        assert "Traceback" not in err
        return Run(code, out, err)

    return run
