"""A node stops because a directory it must write failed (Kafka's `Exit.halt` on a disk error).

Kafka halts a broker whose only log dir failed, and any node whose metadata
log dir failed: with the disk gone nothing it could still do is safe, and
the rest of the cluster fences it and moves leadership. The exception ends
the node's run; the command line prints its one line (no traceback) and
exits 1. It stays an OSError carrying the cause's errno, so a simulation can
tell an injected disk fault from a bug.
"""
from __future__ import annotations

import errno

__all__ = ["DirectoryHalt"]


class DirectoryHalt(OSError):
    """The node halts because `directory` (a `kind`, e.g. "log dir") failed with `cause`."""

    def __init__(self, kind: str, directory: str, cause: OSError):
        detail = cause.strerror or str(cause) or type(cause).__name__
        prefix = f"{kind} {directory} failed: "
        if detail.startswith(prefix):  # the cause may already name the dir: say it once
            detail = detail[len(prefix):]
        super().__init__(cause.errno if cause.errno is not None else errno.EIO,
                         f"{prefix}{detail}; halting")
        self.directory = directory

    def __str__(self) -> str:
        return self.strerror  # one line, without the "[Errno n]" prefix
