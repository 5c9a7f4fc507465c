"""Roles and the one validated transition table (Kafka's QuorumState, post KIP-996).

Every role change goes through `QuorumState.transition`, which refuses moves
outside the table, epochs going back, a second vote or a second leader in one
epoch. It also reports whether the durable election state changed, so the core
persists exactly then (Prospective and Resigned are memory-only).
"""
from __future__ import annotations

import enum
from typing import TYPE_CHECKING

from raft.errors import InvalidTransitionError
from raft.state import ElectionState

if TYPE_CHECKING:
    from raft.roles import RoleState

__all__ = ["Role", "VOTER_TRANSITIONS", "OBSERVER_TRANSITIONS", "QuorumState"]


class Role(enum.Enum):
    """A replica's role: the one identity every layer compares (`status().role is Role.LEADER`);
    str() and .value give Kafka's name ("Leader") for logs, metrics and output."""

    UNATTACHED = "Unattached"
    PROSPECTIVE = "Prospective"
    CANDIDATE = "Candidate"
    LEADER = "Leader"
    FOLLOWER = "Follower"
    RESIGNED = "Resigned"

    def __str__(self) -> str:
        return self.value


U, P, C, L, F, R = (
    Role.UNATTACHED,
    Role.PROSPECTIVE,
    Role.CANDIDATE,
    Role.LEADER,
    Role.FOLLOWER,
    Role.RESIGNED,
)

# from -> allowed targets, with the trigger of each move.
VOTER_TRANSITIONS: dict[Role, frozenset[Role]] = {
    # U: higher epoch / granted a vote; P: election timeout; F: learned a leader
    U: frozenset({U, P, F}),
    # U: higher epoch or lost pre-vote with no known leader; C: pre-vote majority;
    # F: leader learned, or lost pre-vote while a leader was known
    P: frozenset({U, C, F}),
    # U: higher epoch; P: election lost/timed out; L: vote majority; F: the winner told us
    C: frozenset({U, P, L, F}),
    # U: higher epoch; R: resign / check-quorum; F: leader of a higher epoch
    L: frozenset({U, R, F}),
    # U: higher epoch; P: fetch timeout; F: leader of a higher epoch
    F: frozenset({U, P, F}),
    # U: higher epoch or election timeout; F: leader of a higher epoch
    R: frozenset({U, F}),
}
# Observers never vote or lead: they only find and follow the leader.
OBSERVER_TRANSITIONS: dict[Role, frozenset[Role]] = {U: frozenset({U, F}), F: frozenset({U, F})}
START_ROLES = frozenset({U, F, R})


class QuorumState:
    """Role + epoch + leader + vote, changed only through `transition`."""

    def __init__(self, *, node_id: int, observer: bool):
        self.node_id = node_id
        self.observer = observer
        self.role: Role | None = None
        self.epoch = 0
        self.leader_id: int | None = None
        self.voted_id: int | None = None
        self.role_state: RoleState | None = None  # the role's soft state and behaviour
        # The leader and vote of the epoch, remembered even when the role forgets them.
        self._epoch_leader: int | None = None
        self._epoch_vote: int | None = None

    def election_state(self) -> ElectionState:
        return ElectionState(self.epoch, self.leader_id, self.voted_id)

    def transition(
        self,
        role_state: "RoleState",
        *,
        epoch: int,
        leader_id: int | None = None,
        voted_id: int | None = None,
    ) -> bool:
        """Switch to `role_state.role`; True when the durable election state changed (persist it)."""
        role = role_state.role
        if self.role is None:
            if role not in START_ROLES:
                raise InvalidTransitionError(f"cannot start as {role}")
        elif role not in self._allowed_from(self.role):
            raise InvalidTransitionError(f"{self.role} -> {role} is not a valid transition")
        if epoch < self.epoch:
            raise InvalidTransitionError(f"epoch going back {self.epoch} -> {epoch}")
        if role is Role.CANDIDATE and epoch <= self.epoch:
            raise InvalidTransitionError("a candidate must bump the epoch")
        if epoch > self.epoch:
            self._epoch_leader = None
            self._epoch_vote = None
        if leader_id is not None:
            if self._epoch_leader not in (None, leader_id):
                raise InvalidTransitionError(
                    f"second leader {leader_id} in epoch {epoch} (had {self._epoch_leader})"
                )
            self._epoch_leader = leader_id
        if voted_id is not None:
            if self._epoch_vote not in (None, voted_id):
                raise InvalidTransitionError(
                    f"second vote {voted_id} in epoch {epoch} (had {self._epoch_vote})"
                )
            self._epoch_vote = voted_id
        before = self.election_state()
        self.role = role
        self.role_state = role_state
        self.epoch = epoch
        self.leader_id = leader_id
        # A vote lasts for the whole epoch, whatever the role says.
        self.voted_id = self._epoch_vote
        return self.election_state() != before

    def _allowed_from(self, role: Role) -> frozenset[Role]:
        """An observer (never a voter, or one removed from the set) neither campaigns nor leads;
        a removed leader may still resign."""
        if not self.observer:
            return VOTER_TRANSITIONS[role]
        return OBSERVER_TRANSITIONS.get(role, VOTER_TRANSITIONS[role] - {P, C, L})

    def restore(self, state: ElectionState) -> None:
        """Load the persisted epoch/vote/leader before the first transition."""
        self.epoch = state.epoch
        self.leader_id = state.leader_id
        self.voted_id = state.voted_id
        self._epoch_leader = state.leader_id
        self._epoch_vote = state.voted_id
