"""The README's quickstart, run as written.

The test runs the fenced blocks of the README's "Quickstart" section in order (fence info strings:
tests/docs/doc_blocks.py):
- ```bash background``` starts a long-running command (a node, a dev cluster) in a fresh
  process group and waits until it says it is serving; starting the next one first stops the
  previous one with Ctrl-C (SIGINT), as the README tells the reader to;
- ```bash``` runs the block with bash (errexit, pipefail) and requires exit status 0;
- ```text``` right after a bash block is that block's exact standard output.

Everything runs in an empty temporary directory with this checkout's Python first on PATH, so
`python -m raftkafka` is the command a new user types. The quickstart uses Kafka's ports
(9092-9097), so they must be free.
"""
from __future__ import annotations

import pytest

from tests.docs.doc_blocks import Background, Block, page_blocks, quickstart_range, run_block, shell_env
from tests.e2e.procs import REPO, ports_free

pytestmark = pytest.mark.e2e


def quickstart_blocks() -> list[Block]:
    readme = REPO / "README.md"
    lines = quickstart_range(readme)
    return [b for b in page_blocks(readme) if b.line in lines and b.lang in ("bash", "text")]


def test_readme_has_a_quickstart_with_servers_commands_and_expected_output():
    kinds = [(b.lang, b.mode) for b in quickstart_blocks()]
    assert kinds.count(("bash", "background")) == 2  # the single node, then the 3-node cluster
    assert ("text", "") in kinds and kinds.count(("bash", "run")) >= 5
    assert {mode for lang, mode in kinds if lang == "bash"} == {"run", "background"}


def test_quickstart_runs_as_written(tmp_path):
    assert ports_free(range(9092, 9098)), "the quickstart needs ports 9092-9097 free"
    env = shell_env()
    background: list[Background] = []
    try:
        last_stdout = None
        for block in quickstart_blocks():
            if block.mode == "background":
                if background:
                    background[-1].ctrl_c()
                background.append(Background(block.body, tmp_path, env))
                background[-1].wait_serving()
                last_stdout = None
            elif block.lang == "bash":
                done = run_block(block.body, tmp_path, env, timeout=180)
                assert done.returncode == 0, f"{block.body}\nexit {done.returncode}\n{done.stdout}\n{done.stderr}"
                last_stdout = done.stdout
            else:
                assert last_stdout is not None, "a text block must follow a command block"
                assert last_stdout == block.body, f"expected:\n{block.body}\ngot:\n{last_stdout}"
                last_stdout = None
    finally:
        for proc in background:
            proc.kill()
