"""When the active controller moves leadership back to preferred replicas (KRaft's automatic
preferred-leader election, KAFKA-13682).

With `auto.leader.rebalance.enable` (default true) the controller checks every
`leader.imbalance.check.interval.seconds` (default 300) and elects the preferred replica of
every partition whose preferred replica is alive and in the ISR but does not lead
(elect_leaders.rebalance_preferred_leaders), at most MAX_PARTITION_CHANGES_PER_BATCH per pass;
when more remain it runs again at the next tick. As in Kafka's KRaft controller,
`leader.imbalance.per.broker.percentage` is accepted but not consulted: any imbalanced
partition is balanced.
"""
from __future__ import annotations

from typing import Mapping

__all__ = ["LeaderBalanceSchedule"]


class LeaderBalanceSchedule:
    def __init__(self, static: Mapping[str, str] | None = None):
        static = static or {}
        self.enabled = str(static.get("auto.leader.rebalance.enable", "true")).strip().lower() == "true"
        try:
            self.interval = max(1.0, float(static.get("leader.imbalance.check.interval.seconds", 300)))
        except ValueError:
            self.interval = 300.0
        self.next_at = float("inf")

    def activated(self, now: float) -> None:
        """A new term: the first check one interval from now."""
        self.next_at = now + self.interval if self.enabled else float("inf")

    def due(self, now: float) -> bool:
        return now >= self.next_at

    def ran(self, now: float, more_to_do: bool) -> None:
        self.next_at = now if more_to_do else now + self.interval
