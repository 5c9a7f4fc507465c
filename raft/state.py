"""The durable election state (Kafka's `quorum-state` file).

Written with fsync + rename before any message that depends on it is sent:
a vote granted, an epoch bumped, a leader learned. `voted_id` is kept for the
whole epoch so a replica never votes twice in one epoch, even across restarts.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ElectionState"]


@dataclass(slots=True, frozen=True)
class ElectionState:
    epoch: int = 0
    leader_id: int | None = None
    voted_id: int | None = None

    def to_dict(self) -> dict:
        return {"epoch": self.epoch, "leader_id": self.leader_id, "voted_id": self.voted_id}

    @classmethod
    def from_dict(cls, data: dict) -> "ElectionState":
        """Raises ValueError on a malformed record (the driver reports it as a corrupt file)."""
        try:
            epoch = data["epoch"]
            leader = data.get("leader_id")
            voted = data.get("voted_id")
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"malformed quorum-state: {data!r}") from exc
        for value in (epoch, leader, voted):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                raise ValueError(f"malformed quorum-state: {data!r}")
        if epoch < 0:
            raise ValueError(f"malformed quorum-state: negative epoch {epoch}")
        return cls(epoch, leader, voted)
