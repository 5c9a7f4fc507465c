"""The shell blocks of the README and docs/ pages, and how a test runs them.

A ```bash fence's info string says what the tests do with the block:
- `bash`: run it with bash (errexit, pipefail); it must exit 0;
- `bash background`: a long-running command (a node, a dev cluster), started in its own process
  group; the test waits until it says it is serving;
- `bash smoke OLD => NEW; OLD2 => NEW2`: run it after replacing each OLD by NEW (a benchmark run
  with its smallest parameters); each OLD must occur in the block;
- `bash norun REASON`: not run, for the reason given (required).
A ```text block right after a bash block is that block's exact standard output.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.e2e.procs import REPO, wait_until

FENCE = re.compile(r"^```(\w*)([^\n]*)\n(.*?)^```", re.S | re.M)
SERVING = re.compile(r"serving (Kafka clients|controllers)|^ready\b", re.M)
QUICKSTART = "\n## Quickstart"


@dataclass(frozen=True)
class Block:
    page: str  # path relative to the repository
    line: int
    lang: str  # "bash", "text", "python", ...
    mode: str  # for bash: "run", "background", "smoke" or "norun"; "" otherwise
    arg: str  # norun: the reason; smoke: the substitutions
    body: str

    def where(self) -> str:
        return f"{self.page}:{self.line}"

    def substitutions(self) -> list[tuple[str, str]]:
        pairs = []
        for item in self.arg.split(";"):
            old, arrow, new = item.partition("=>")
            if not arrow or not old.strip():
                raise ValueError(f"{self.where()}: smoke substitution {item.strip()!r} is not 'OLD => NEW'")
            pairs.append((old.strip(), new.strip()))
        return pairs

    def script(self) -> str:
        """The text to run: the body, with a smoke block's substitutions applied."""
        body = self.body
        if self.mode == "smoke":
            for old, new in self.substitutions():
                if old not in body:
                    raise ValueError(f"{self.where()}: smoke substitution {old!r} does not occur in the block")
                body = body.replace(old, new)
        return body


def doc_pages() -> list[Path]:
    """README.md, docs/*.md and ops/*.md."""
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "ops").glob("*.md"))]


def page_blocks(path: Path) -> list[Block]:
    text = path.read_text()
    blocks = []
    for m in FENCE.finditer(text):
        lang, info = m.group(1), m.group(2).strip()
        mode, arg = "", ""
        if lang == "bash":
            word, _, rest = info.partition(" ")
            mode, arg = {"": ("run", ""), "background": ("background", "")}.get(word, (word, rest.strip()))
        blocks.append(Block(str(path.relative_to(REPO)), text.count("\n", 0, m.start()) + 1, lang, mode, arg,
                            m.group(3)))
    return blocks


def quickstart_range(path: Path) -> range:
    """The lines of the README's Quickstart section (tests/e2e/test_readme_quickstart.py runs them)."""
    if path.name != "README.md" or path.parent != REPO:
        return range(0)
    text = path.read_text()
    start = text.index(QUICKSTART)
    end = text.find("\n## ", start + 1)
    end = len(text) if end == -1 else end
    return range(text.count("\n", 0, start) + 1, text.count("\n", 0, end) + 1)


def shell_env() -> dict:
    """This checkout's Python first on PATH and on PYTHONPATH: `python -m raftkafka` is this tree."""
    return {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"],
            "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}


def run_block(script: str, cwd: Path, env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


class Background:
    """A `bash background` block: its own process group, output in a log file in cwd."""

    def __init__(self, script: str, cwd: Path, env: dict):
        self.log = cwd / f"background-{time.monotonic_ns()}.log"
        self._out = open(self.log, "wb")
        self.popen = subprocess.Popen(["bash", "-c", script], cwd=cwd, env=env, stdout=self._out,
                                      stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_serving(self, timeout: float = 120.0) -> None:
        def serving():
            if self.popen.poll() is not None:
                raise AssertionError(f"exited with {self.popen.returncode}:\n{self.output()[-3000:]}")
            return SERVING.search(self.output())

        wait_until(serving, timeout, "the command to start serving")

    def ctrl_c(self, timeout: float = 60.0) -> None:
        os.killpg(self.popen.pid, signal.SIGINT)
        self.popen.wait(timeout)

    def kill(self) -> None:
        try:
            os.killpg(self.popen.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.popen.wait(10)
        self._out.close()
