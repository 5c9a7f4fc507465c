"""Every shell block in README.md, docs/*.md and ops/*.md is run by a test or says why not.

The README's Quickstart is run by tests/e2e/test_readme_quickstart.py; every other `bash` block
runs here, page by page, in an empty directory (holding only a link to the checkout's tests/,
for the files the pages name), in the order of the page (fence info strings:
tests/docs/doc_blocks.py). `bash background` blocks keep running until the page is done. The
pages use fixed ports below the ephemeral range (19092-19093, 19192-19193, 19464, 29092-29097),
which must be free.
"""
from __future__ import annotations


import pytest

from tests.docs.doc_blocks import (Background, doc_pages, page_blocks, quickstart_range, run_block,
                                   shell_env)
from tests.e2e.procs import REPO, ports_free

MODES = {"run", "background", "smoke", "norun"}
PAGE_PORTS = [*range(19092, 19094), *range(19192, 19194), 19464, *range(29092, 29098)]


def _bash_blocks():
    for page in doc_pages():
        quickstart = quickstart_range(page)
        for block in page_blocks(page):
            if block.lang == "bash":
                yield block, block.line in quickstart


def _runnable_pages() -> list[str]:
    return sorted({b.page for b, in_quickstart in _bash_blocks() if not in_quickstart and b.mode != "norun"})


def test_every_bash_block_is_run_or_says_why_not(capsys):
    not_run, problems = [], []
    for block, in_quickstart in _bash_blocks():
        if block.mode not in MODES:
            problems.append(f"{block.where()}: unknown fence 'bash {block.mode}' (one of: {sorted(MODES)})")
        elif block.mode == "norun":
            if in_quickstart:
                problems.append(f"{block.where()}: the quickstart runs every block; norun is not allowed there")
            if len(block.arg) < 10:
                problems.append(f"{block.where()}: 'bash norun' needs its reason in the fence")
            not_run.append(f"{block.where()}: {block.arg}")
        elif block.mode == "smoke":
            try:
                block.script()
            except ValueError as e:
                problems.append(str(e))
    assert not problems, "\n".join(problems)
    with capsys.disabled():
        print("\nshell blocks in the docs that no test runs:\n  " + "\n  ".join(not_run))


def test_readme_opens_with_the_commands_ci_runs():
    """The README's first block: set up and run a node, then run the tests: what .ci/run does."""
    first = page_blocks(REPO / "README.md")[0]
    assert first.lang == "bash" and first.mode == "norun"
    commands = [line for line in first.body.splitlines() if line and not line.startswith("#")]
    setup, tests = commands
    assert setup.endswith(" && python -m raftkafka") and "pip install -e ." in setup
    ci = (REPO / ".ci" / "run").read_text().replace("pip install -q -e", "pip install -e")
    venv_steps = setup.split(" && ")[:2]  # python3 -m venv .venv, . .venv/bin/activate
    for step in venv_steps + tests.split(" && "):
        assert step in ci, f".ci/run lacks the README's step {step!r}"
    assert ci.rstrip().endswith("python -m pytest -q -n 2 tests")


@pytest.mark.e2e
@pytest.mark.parametrize("page", _runnable_pages())
def test_page_commands_run(page, tmp_path):
    assert ports_free(PAGE_PORTS), f"the docs' commands need ports {PAGE_PORTS} free"
    env = shell_env()
    (tmp_path / "tests").symlink_to(REPO / "tests")
    background: list[Background] = []
    try:
        last_stdout = None
        for block in page_blocks(REPO / page):
            if block.lang == "text" and last_stdout is not None:
                assert last_stdout == block.body, f"{block.where()}: expected:\n{block.body}\ngot:\n{last_stdout}"
            last_stdout = None
            if block.lang != "bash" or block.mode == "norun":
                continue
            if block.mode == "background":
                background.append(Background(block.script(), tmp_path, env))
                background[-1].wait_serving()
                continue
            done = run_block(block.script(), tmp_path, env)
            assert done.returncode == 0, (f"{block.where()}:\n{block.script()}\nexit {done.returncode}\n"
                                          f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
            last_stdout = done.stdout
        for proc in background:
            proc.ctrl_c()
    finally:
        for proc in background:
            proc.kill()
