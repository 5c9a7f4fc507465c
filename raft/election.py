"""Elections: vote bookkeeping, the vote-granting rule, and election timing.

Pure functions and a small tally; the core decides what to do with the answers.
"""
from __future__ import annotations

import random
from collections.abc import Iterable

from raft.commit import quorum_size
from raft.quorum_state import Role

__all__ = [
    "VoteTally",
    "log_is_up_to_date",
    "can_grant_vote",
    "random_election_timeout",
    "lost_election_backoff",
    "successor_backoff",
]


class VoteTally:
    """Granted/rejected votes of one (pre-)election; the local replica votes for itself when it
    is one of the voters (a voter removed by an uncommitted change campaigns without its own)."""

    def __init__(self, self_id: int, voters: Iterable[int]):
        self.voters = sorted(voters)
        self.granted: set[int] = {self_id} & set(self.voters)
        self.rejected: set[int] = set()

    def record(self, voter: int, granted: bool) -> None:
        if voter not in self.voters or voter in self.granted or voter in self.rejected:
            return
        (self.granted if granted else self.rejected).add(voter)

    def won(self) -> bool:
        return len(self.granted) >= quorum_size(len(self.voters))

    def lost(self) -> bool:
        """Enough rejections that a majority is out of reach."""
        return len(self.voters) - len(self.rejected) < quorum_size(len(self.voters))

    def unanswered(self) -> list[int]:
        return [v for v in self.voters if v not in self.granted and v not in self.rejected]


def log_is_up_to_date(
    candidate_last_epoch: int, candidate_end: int, my_last_epoch: int, my_end: int
) -> bool:
    """Raft §5.4.1, compared epoch first (Kafka's OffsetAndEpoch ordering)."""
    return (candidate_last_epoch, candidate_end) >= (my_last_epoch, my_end)


def can_grant_vote(
    *,
    role: Role,
    candidate_id: int,
    pre_vote: bool,
    up_to_date: bool,
    voted_id: int | None,
    leader_id: int | None,
    has_fetched_from_leader: bool,
) -> bool:
    """Whether a replica in `role` (same epoch as the request) grants this vote.

    Leaders, candidates and resigned leaders never grant: a candidate's vote for itself
    is implicit, and a resigned leader must not help elect someone in its own epoch.
    A follower grants pre-votes only until it has heard from its leader (KIP-996): that
    is what stops a rejoining, partitioned replica from disrupting a healthy quorum.
    """
    if role in (Role.LEADER, Role.CANDIDATE, Role.RESIGNED):
        return False
    if role is Role.FOLLOWER:
        return pre_vote and not has_fetched_from_leader and up_to_date
    # Unattached or Prospective
    if pre_vote:
        return up_to_date
    if voted_id is not None:
        return voted_id == candidate_id
    return leader_id is None and up_to_date


def random_election_timeout(base: float, rng: random.Random) -> float:
    """Uniform in [T, 2T): spreads candidates apart so split votes are rare."""
    return base + rng.random() * base


def lost_election_backoff(retries: int, cap: float, rng: random.Random) -> float:
    """Kafka's binary exponential backoff: 100 ms × rand(1..2^retries), capped."""
    return min(cap, 0.1 * rng.randint(1, 1 << min(retries, 20)))


def successor_backoff(position: int, count: int, cap: float) -> float:
    """Stagger successors after EndQuorumEpoch: the best one campaigns at once.

    Kafka's strictExponentialElectionBackoffMs: position 0 → 0, else cap/2^(n-1) · 2^(p-1).
    """
    if position <= 0:
        return 0.0
    return cap / (1 << (count - 1)) * (1 << (position - 1))
