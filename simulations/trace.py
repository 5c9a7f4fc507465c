"""The simulation's event trace: a readable log plus a rolling SHA-256 over it.

Every event is one line `time_us seq node kind key=value ...`. The hash of all
lines is the run's fingerprint: the same seed must give the same hash in any
process, whatever its PYTHONHASHSEED or memory layout. That is why field values
are restricted to plain scalars: a `repr()` of an arbitrary object can carry an
address (`<Foo at 0x7f...>`) and would make the hash differ between processes.
"""
from __future__ import annotations

import contextlib
import hashlib
from collections import deque
from typing import Iterable, Iterator

import trio

from simulations.determinism import SimClock

__all__ = ["Trace"]

_SCALARS = (int, float, str, bool, type(None))
_PLAIN = frozenset(_SCALARS)  # exact types whose str() is their trace form


def _format(value) -> str:
    if isinstance(value, _SCALARS):
        return str(value)
    if isinstance(value, (tuple, list)):
        return "[" + ",".join(_format(v) for v in value) + "]"
    raise TypeError(f"trace fields must be scalars or sequences of scalars, not {type(value).__name__}")


class Trace:
    """Records events; keeps the last `keep_last` lines (and all of them with `full`)."""

    def __init__(self, *, keep_last: int = 200, full: bool = False):
        self._sha = hashlib.sha256()
        self._unhashed: list[str] = []  # lines not yet fed to the hash (fed in bulk: same digest)
        self.seq = 0
        self.tail: deque[str] = deque(maxlen=keep_last)
        self.lines: list[str] | None = [] if full else None
        self.kinds: dict[str, int] = {}
        # The run's SimClock while `reading` it: its time read directly, not through trio.
        self._clock: SimClock | None = None

    @contextlib.contextmanager
    def reading(self, clock: SimClock | None) -> Iterator[None]:
        """Stamp events with `clock`'s time in the block (the current run's clock)."""
        self._clock = clock
        try:
            yield
        finally:
            self._clock = None

    def _now_us(self) -> int:
        clock = self._clock
        if clock is not None:
            return round(clock.now * 1_000_000)
        try:
            return round(trio.current_time() * 1_000_000)
        except RuntimeError:  # outside a trio run (setup, final checks)
            return -1

    def record(self, node: str, kind: str, /, **fields) -> None:
        self.seq += 1
        line = f"{self._now_us()} {self.seq} {node} {kind}"
        if fields:
            # Plain scalars (the common case) format as str(); anything else is checked.
            parts = [line]
            for key, value in fields.items():
                parts.append(f"{key}={value}" if type(value) in _PLAIN else f"{key}={_format(value)}")
            line = " ".join(parts)
        self._add(line, kind)

    def record_io(self, node: str, kind: str, conn: int, nbytes: int) -> None:
        """`record(node, kind, conn=conn, nbytes=nbytes)` (the same line), for the network's
        send and recv events: nine in ten of a run's events, so without the general path."""
        clock = self._clock  # the clock read inlined: this runs ~60k times a simulated minute
        now_us = round(clock.now * 1_000_000) if clock is not None else self._now_us()
        self.seq += 1
        self._add(f"{now_us} {self.seq} {node} {kind} conn={conn} nbytes={nbytes}", kind)

    def _add(self, line: str, kind: str) -> None:
        unhashed = self._unhashed
        unhashed.append(line)
        if len(unhashed) >= 512:
            self._flush()
        self.tail.append(line)
        if self.lines is not None:
            self.lines.append(line)
        kinds = self.kinds
        kinds[kind] = kinds.get(kind, 0) + 1

    def _flush(self) -> None:
        if self._unhashed:
            self._unhashed.append("")  # every line ends with a newline
            self._sha.update("\n".join(self._unhashed).encode())
            self._unhashed = []

    @property
    def hash(self) -> str:
        """First 16 hex digits of the SHA-256 of every line so far."""
        self._flush()
        return self._sha.hexdigest()[:16]

    def last(self, n: int) -> list[str]:
        return list(self.tail)[-n:]

    def write(self, path: str, header: Iterable[str] = ()) -> None:
        """Write the full trace (or the kept tail) to a file. Harness code, not node code."""
        lines = self.lines if self.lines is not None else list(self.tail)
        with open(path, "w", encoding="utf-8") as f:
            for line in header:
                f.write(f"# {line}\n")
            for line in lines:
                f.write(line + "\n")
