"""Broker liveness soft state, kept only by the active controller (never in the log).

Tracks each registered broker's last heartbeat and reported metadata offset. After a
controller failover `activate` restarts every session at "now" (KAFKA-18138), so fencing
a dead broker can take up to one more session timeout, as in Kafka.

Unfencing waits until the broker's metadata reaches its own last fencing (`fenced_at`),
not only its registration (Kafka's rule): a broker cut off from the controller and fenced
meanwhile could otherwise be unfenced — renewing its session lease
(metadata.broker_lifecycle) — while its metadata still shows leaderships the fencing
moved, and answer reads from them.
"""
from __future__ import annotations

from dataclasses import dataclass

from metadata.image import MetadataImage

__all__ = ["BrokerHeartbeatManager", "DEFAULT_SESSION_TIMEOUT"]

DEFAULT_SESSION_TIMEOUT = 9.0  # broker.session.timeout.ms = 9000


@dataclass(slots=True)
class _Session:
    last_contact: float
    fenced: bool
    metadata_offset: int = -1
    controlled_shutdown_offset: int | None = None
    fenced_at: int = -1  # offset of the last record fencing this broker (or a bound above it)


class BrokerHeartbeatManager:
    def __init__(self, session_timeout: float = DEFAULT_SESSION_TIMEOUT):
        self.session_timeout = session_timeout
        self._sessions: dict[int, _Session] = {}

    def activate(self, image: MetadataImage, now: float) -> None:
        """Start over from an image (on becoming the active controller)."""
        # Where a fenced broker's fencing was recorded is not in the image: the image's
        # offset is a bound above it. So it is for where a broker in controlled shutdown had
        # its leaderships moved: it may stop only once every live broker has reached it.
        self._sessions = {
            bid: _Session(now, reg.fenced,
                          controlled_shutdown_offset=image.offset if reg.in_controlled_shutdown else None,
                          fenced_at=image.offset if reg.fenced else -1)
            for bid, reg in sorted(image.brokers.items())
        }

    def touch(self, broker_id: int, now: float, metadata_offset: int | None = None) -> None:
        s = self._sessions.get(broker_id)
        if s is None:
            s = self._sessions[broker_id] = _Session(now, fenced=True)
        s.last_contact = max(s.last_contact, now)
        if metadata_offset is not None:
            s.metadata_offset = max(s.metadata_offset, metadata_offset)

    def register(self, broker_id: int, now: float) -> None:
        """A new incarnation: a fresh, fenced session."""
        self._sessions[broker_id] = _Session(now, fenced=True)

    def remove(self, broker_id: int) -> None:
        self._sessions.pop(broker_id, None)

    def set_fenced(self, broker_id: int, fenced: bool) -> None:
        s = self._sessions.get(broker_id)
        if s is not None:
            s.fenced = fenced
            if fenced:
                s.controlled_shutdown_offset = None

    def has_live_session(self, broker_id: int, now: float) -> bool:
        """Kafka's hasValidSession: a fenced broker (e.g. after a controlled shutdown) has none,
        so its restarted incarnation may register at once."""
        s = self._sessions.get(broker_id)
        return s is not None and not s.fenced and now - s.last_contact < self.session_timeout

    def next_fence(self, now: float) -> int | None:
        """The unfenced broker whose session lapsed longest ago, if any. One per call, so
        each fencing is visible before the next is decided (as in Kafka)."""
        stale = [(s.last_contact, bid) for bid, s in self._sessions.items()
                 if not s.fenced and now - s.last_contact >= self.session_timeout]
        return min(stale)[1] if stale else None

    def next_deadline(self) -> float | None:
        """When the next unfenced session would lapse (to schedule the next check)."""
        contacts = [s.last_contact for s in self._sessions.values() if not s.fenced]
        return min(contacts) + self.session_timeout if contacts else None

    def metadata_offset(self, broker_id: int) -> int:
        s = self._sessions.get(broker_id)
        return -1 if s is None else s.metadata_offset

    def lowest_active_offset(self) -> int | None:
        """The lowest metadata offset any unfenced broker has reported."""
        offsets = [s.metadata_offset for s in self._sessions.values() if not s.fenced]
        return min(offsets) if offsets else None

    def set_controlled_shutdown_offset(self, broker_id: int, offset: int) -> None:
        s = self._sessions.get(broker_id)
        if s is not None:
            s.controlled_shutdown_offset = offset

    def record_fencing(self, broker_id: int, offset: int) -> None:
        """A record at `offset` fences the broker: it stays fenced until its metadata has it."""
        s = self._sessions.get(broker_id)
        if s is not None:
            s.fenced_at = max(s.fenced_at, offset)

    def fenced_at(self, broker_id: int) -> int:
        s = self._sessions.get(broker_id)
        return -1 if s is None else s.fenced_at

    def controlled_shutdown_offset(self, broker_id: int) -> int | None:
        s = self._sessions.get(broker_id)
        return None if s is None else s.controlled_shutdown_offset
