"""Runs every scenario in tests/raft/testdata/*.txt; REWRITE=1 regenerates the outputs.

Rewritten files must be reviewed as a diff: every expected output is a claim
about the protocol that someone checked.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.raft.transcript import Transcript, parse_blocks, render

TESTDATA = Path(__file__).parent / "testdata"
FILES = sorted(TESTDATA.glob("*.txt"))


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_transcript(path: Path) -> None:
    blocks = parse_blocks(path.read_text())
    transcript = Transcript()
    actual = [(comment, cmd, transcript.run(cmd)) for comment, cmd, _ in blocks]
    if os.environ.get("REWRITE"):
        path.write_text(render(actual))
        return
    for (_, cmd, expected), (_, _, got) in zip(blocks, actual):
        assert got == expected, f"{path.name}: output of {cmd!r} differs:\n{got}"


def test_testdata_present() -> None:
    assert len(FILES) >= 6
