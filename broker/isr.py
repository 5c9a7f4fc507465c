"""Pure ISR and high-watermark math for one leader partition (Kafka's Partition/Replica rules).

No I/O and no clock of its own: callers pass `now` (seconds on the Env's monotonic
clock). The leader keeps a `FollowerState` per remote replica, updated on every
follower Fetch; from those it derives:

- the high watermark: the minimum log end offset over the *maximal* ISR (the
  committed ISR plus a replica whose addition is pending) and over caught-up
  replicas about to join (not one whose fetch connection closed) — never lower
  than the current HW;
- the replicas to drop from the ISR: members that have not caught up to the
  leader's log end within `replica.lag.time.max.ms`, or whose fetch connection closed
  with no fetch since (a dead follower process: broker.server tells);
- whether a fetching replica may join: its end offset has reached the HW and the
  start of the leader's current epoch.

`IsrState` is Kafka's PartitionState: the committed ISR (what the metadata log
says) and at most one change in flight. While an expansion is pending the new
member already counts for the HW (the maximal ISR) but not for
min.insync.replicas; while a shrink is pending the leaving members still count
for the HW, so nothing is acknowledged on the strength of the smaller ISR before
the controller has committed it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

__all__ = ["FollowerState", "IsrState", "high_watermark", "out_of_sync_replicas",
           "may_join_isr", "DEFAULT_LAG_TIME_S", "UNKNOWN_OFFSET"]

DEFAULT_LAG_TIME_S = 30.0  # replica.lag.time.max.ms = 30000
UNKNOWN_OFFSET = -1


@dataclass
class FollowerState:
    """What the leader knows of one follower (Kafka's Replica)."""
    broker_id: int
    log_end_offset: int = UNKNOWN_OFFSET  # unknown until its first fetch in this leader epoch
    last_caught_up_time: float = float("-inf")
    last_fetch_time: float = float("-inf")
    last_fetch_leader_end: int = UNKNOWN_OFFSET
    connection_closed: bool = False  # its fetch connection closed; no fetch since
    log_start_offset: int = UNKNOWN_OFFSET  # as its last fetch said (DeleteRecords' low watermark)

    @classmethod
    def fresh(cls, broker_id: int, *, in_isr: bool, now: float) -> "FollowerState":
        """A new leader gives ISR members a full lag period before they can be dropped."""
        return cls(broker_id, last_caught_up_time=now if in_isr else float("-inf"))

    def on_fetch(self, fetch_offset: int, leader_end: int, now: float) -> None:
        """A fetch at `fetch_offset` proves the follower has everything below it.

        Caught up means: at the leader's end now, or at least at the end the leader
        had at its previous fetch (it then was caught up as of that fetch)."""
        if fetch_offset >= leader_end:
            self.last_caught_up_time = max(self.last_caught_up_time, now)
        elif fetch_offset >= self.last_fetch_leader_end >= 0:
            self.last_caught_up_time = max(self.last_caught_up_time, self.last_fetch_time)
        self.log_end_offset = fetch_offset
        self.connection_closed = False
        self.last_fetch_leader_end = leader_end
        self.last_fetch_time = now

    def is_caught_up(self, leader_end: int, now: float, lag_time_s: float) -> bool:
        return self.log_end_offset == leader_end or now - self.last_caught_up_time <= lag_time_s


@dataclass(frozen=True)
class IsrState:
    """The committed ISR plus at most one in-flight change (Kafka's PendingExpand/ShrinkIsr)."""
    isr: tuple[int, ...]
    adding: int | None = None  # pending expansion
    removing: tuple[int, ...] = ()  # pending shrink
    proposed: tuple[int, ...] | None = field(default=None)  # the ISR sent to the controller

    @property
    def inflight(self) -> bool:
        return self.proposed is not None

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """Everyone who may be in the ISR once the pending change resolves either way."""
        if self.adding is not None and self.adding not in self.isr:
            return self.isr + (self.adding,)
        return self.isr

    def expand(self, replica: int) -> "IsrState":
        return IsrState(self.isr, adding=replica, proposed=tuple(sorted(self.isr + (replica,))))

    def shrink(self, leaving: Iterable[int]) -> "IsrState":
        leaving = tuple(sorted(set(leaving)))
        return IsrState(self.isr, removing=leaving,
                        proposed=tuple(r for r in self.isr if r not in leaving))

    def committed(self, isr: Iterable[int]) -> "IsrState":
        return IsrState(tuple(isr))


def high_watermark(current_hw: int, leader_end: int, followers: Mapping[int, FollowerState],
                   maximal_isr: Iterable[int], now: float, lag_time_s: float,
                   eligible: Iterable[int] = ()) -> int:
    """min LEO over the maximal ISR and over caught-up eligible replicas waiting to join
    (Kafka's maybeIncrementLeaderHW) whose fetch connection is open; the HW never moves
    backward."""
    members = set(maximal_isr)
    joining = set(eligible)
    hw = leader_end
    for broker_id in sorted(followers):
        state = followers[broker_id]
        # A replica whose fetch connection closed (its process is likely gone) is not about to
        # join: waiting for it would hold the HW until its broker is fenced or it fetches again.
        counts = broker_id in members or (
            broker_id in joining and not state.connection_closed
            and state.is_caught_up(leader_end, now, lag_time_s))
        if counts and state.log_end_offset < hw:
            hw = state.log_end_offset
    return max(current_hw, hw)


def out_of_sync_replicas(isr: Iterable[int], leader_id: int, followers: Mapping[int, FollowerState],
                         leader_end: int, now: float, lag_time_s: float) -> list[int]:
    """ISR members (never the leader) that have not caught up within the lag time, or whose
    fetch connection closed."""
    out = []
    for broker_id in sorted(set(isr)):
        if broker_id == leader_id:
            continue
        state = followers.get(broker_id)
        if state is None or state.connection_closed or not state.is_caught_up(leader_end, now, lag_time_s):
            out.append(broker_id)
    return out


def may_join_isr(state: FollowerState, high_watermark_: int, leader_epoch_start: int) -> bool:
    """Kafka's isFollowerInSync: caught up to the HW and into the leader's current epoch,
    so it holds every record the HW has committed, including those of this epoch."""
    return state.log_end_offset >= high_watermark_ and state.log_end_offset >= leader_epoch_start
