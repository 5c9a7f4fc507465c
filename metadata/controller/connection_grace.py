"""Fencing a broker whose controller connection closed (soft state of the active controller).

A broker process that dies (kill -9, a crash) has its TCP connections closed by the OS at
once; waiting out a whole session (`broker.session.timeout.ms`) before fencing it stalls
acks=all writes on every partition it was in the ISR of. So the active controller remembers
which broker epoch each of its open connections carried (the last registration or accepted
heartbeat on it) and, when such a connection closes and no other open connection carried
that broker at that epoch or a newer one, fences the broker unless a heartbeat of that
broker epoch arrives within `broker.connection.close.grace.ms` (a live broker whose
connection broke reconnects and retries at once: metadata.controller.client). Every open
connection counts, not only the one heard last: a heartbeat the broker sent on a connection
it has since left may arrive after one on its new connection (a segment retransmitted), and
the broker's lease is on the new one, which is still open.

Fencing early is safe for data (it only moves leadership and shrinks ISRs, as a lapsed
session does); a wrongly fenced broker is unfenced by its next caught-up heartbeat. A
broker's session lease (metadata.broker_lifecycle) ends with the connection it was earned
on, so a broker never relies on a lease whose connection the controller may act on.

Only this controller's own connections count: a newly active controller knows none, and a
silent broker whose connection stays open (SIGSTOP, a partition) still takes the session
timeout (metadata.controller.heartbeats). One exception: a controller activated after its
predecessor's process died (`expect`, decided by metadata.controller.service) gives every
unfenced broker the grace from its activation. Each live broker's connection closed with the
predecessor (ending its lease), and it heartbeats again at once.
"""
from __future__ import annotations

from typing import Hashable, Mapping

__all__ = ["ConnectionGrace", "DEFAULT_CLOSE_GRACE"]

DEFAULT_CLOSE_GRACE = 0.5  # broker.connection.close.grace.ms = 500


class ConnectionGrace:
    def __init__(self, grace: float = DEFAULT_CLOSE_GRACE):
        self.grace = grace
        self._carried: dict[Hashable, tuple[int, int]] = {}  # open connection -> (broker, epoch)
        self._deadlines: dict[int, tuple[int, float]] = {}  # broker -> (epoch, fence at)
        self._expected: set[int] = set()  # deadlines set by `expect`, not by a closed connection

    def reset(self) -> None:
        """Forget everything (on becoming the active controller)."""
        self._carried.clear()
        self._deadlines.clear()
        self._expected.clear()

    def expect(self, brokers: Mapping[int, int], now: float) -> None:
        """Each broker (id -> epoch) must heartbeat within the grace from `now`."""
        for broker_id, epoch in brokers.items():
            if broker_id not in self._deadlines:
                self._deadlines[broker_id] = (epoch, now + self.grace)
                self._expected.add(broker_id)

    def withdraw_expected(self) -> list[int]:
        """Drop the deadlines `expect` set and not yet met or due; the brokers they were for."""
        withdrawn = sorted(self._expected)
        for broker_id in withdrawn:
            del self._deadlines[broker_id]
        self._expected.clear()
        return withdrawn

    def heard(self, connection: Hashable | None, broker_id: int, broker_epoch: int) -> None:
        """An accepted registration or heartbeat of `broker_epoch` (on `connection`, if known)."""
        self._deadlines.pop(broker_id, None)
        self._expected.discard(broker_id)
        if connection is not None:
            self._carried[connection] = (broker_id, broker_epoch)

    def closed(self, connection: Hashable, now: float) -> int | None:
        """`connection` closed: start the grace of the broker it carried, unless another open
        connection carried that broker at that epoch or a newer one (the broker may hold its
        session lease on that one)."""
        carried = self._carried.pop(connection, None)
        if carried is None:
            return None
        broker_id, epoch = carried
        if any(b == broker_id and e >= epoch for b, e in self._carried.values()):
            return None
        self._deadlines[broker_id] = (epoch, now + self.grace)
        return broker_id

    def next_due(self, now: float) -> tuple[int, int] | None:
        """(broker, epoch) whose grace ran out longest ago, removed from the pending set."""
        due = [(at, bid) for bid, (_, at) in self._deadlines.items() if at <= now]
        if not due:
            return None
        bid = min(due)[1]
        epoch, _ = self._deadlines.pop(bid)
        self._expected.discard(bid)
        return bid, epoch

    def pending(self) -> dict[int, tuple[int, float]]:
        return dict(self._deadlines)
