"""Raft timing and size settings, in seconds and bytes (Kafka's defaults)."""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RaftConfig", "CHECK_QUORUM_FACTOR"]

# A leader resigns when no majority has fetched within this many fetch timeouts (KAFKA-15489).
CHECK_QUORUM_FACTOR = 1.5


@dataclass(slots=True, frozen=True)
class RaftConfig:
    election_timeout: float = 1.0  # randomized in [T, 2T)
    fetch_timeout: float = 2.0  # follower without a good fetch this long starts an election
    election_backoff_max: float = 1.0  # cap on the backoff after a lost election
    append_linger: float = 0.025  # used by the driver to batch appends
    fetch_max_wait: float = 0.5  # long-poll wait a follower asks for
    fetch_max_bytes: int = 1 << 20
    snapshot_chunk_bytes: int = 1 << 20
    request_timeout: float = 1.0  # resend a request (beyond its long-poll wait) after this

    def __post_init__(self) -> None:
        for name in ("election_timeout", "fetch_timeout", "fetch_max_wait", "request_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"raft config: {name} must be > 0, got {getattr(self, name)!r}")
        for name in ("election_backoff_max", "append_linger"):
            if getattr(self, name) < 0:
                raise ValueError(f"raft config: {name} must be >= 0, got {getattr(self, name)!r}")
        for name in ("fetch_max_bytes", "snapshot_chunk_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"raft config: {name} must be >= 1, got {getattr(self, name)!r}")
