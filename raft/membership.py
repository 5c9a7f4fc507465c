"""Voter-set changes for RaftCore (KIP-853): AddVoter, RemoveVoter, UpdateVoter, and what a
change does to the roles.

A change is one `Voters` control entry naming the whole new set; every replica uses the
latest set in its log from the moment the entry is appended, committed or not, and drops it
again if the entry is truncated away. Votes, the commit quorum (HW), check-quorum and who may
campaign all follow that set. Only one voter is added or removed at a time (old and new
majorities always overlap), and the leader accepts a change only when

- it has committed an entry of its own epoch (its HW is established), and
- the previous change is committed,

as Kafka's AddVoterHandler/RemoveVoterHandler. A voter is added only once it has caught up
as an observer (its fetches reached the leader's end within the fetch timeout), so the new
majority can commit at once. A leader that removes itself keeps leading until the change
commits (counting only the new set), then resigns.

Mixed into RaftCore; uses its `quorum`, `log`, `config`, `voter_history`, `_leader_append`.
"""
from __future__ import annotations

from dataclasses import dataclass

from raft.entry import Entry
from raft.leader import LeaderState
from raft.quorum_state import Role
from raft.voter_set import Voter, decode_voters, encode_voters, unwrap_snapshot, wrap_snapshot
from wire.endpoints import endpoint_ok
from wire.error_codes import ErrorCode

__all__ = ["Membership", "VoterChange"]


@dataclass(slots=True, frozen=True)
class VoterChange:
    """The leader's answer to a change: an error, or the offset of the appended Voters entry
    (-1 when nothing needed appending), which answers the request once committed."""

    error: int
    message: str = ""
    offset: int = -1
    epoch: int = -1


class Membership:
    # ================================================================ the set

    @property
    def voters(self) -> list[int]:
        return [v.node_id for v in self.voter_history.latest()]

    @property
    def voter_set(self) -> tuple[Voter, ...]:
        return self.voter_history.latest()

    @property
    def voter_directories(self) -> dict[int, str]:
        return {v.node_id: v.directory_id for v in self.voter_history.latest() if v.directory_id}

    def voter_directories_seen(self) -> dict[int, str]:
        """The leader's view of each voter's directory: as the set records it, else (a static
        voter) as its fetches name it; "" when not known yet."""
        recorded, st = self.voter_directories, self.quorum.role_state
        return {v: self.directory_id if v == self.node_id else recorded.get(v) or st.directory_of(v)
                for v in self.voters}

    @property
    def is_voter(self) -> bool:
        return not self.never_vote and any(
            v.key_matches(self.node_id, self.directory_id) for v in self.voter_history.latest()
        )

    @property
    def may_campaign(self) -> bool:
        """A voter of the latest set campaigns; so does one that the latest change removed
        while the change is not known committed (its HW not past it; after a restart the HW
        starts low): until then the removed voter may be the only one holding it, needed to
        elect the leader that commits it (Raft dissertation §4.1; Kafka lets only voters of the
        latest set campaign, and stalls there). It counts votes in the set it holds, without
        its own, and resigns once the removal commits."""
        if self.is_voter:
            return True
        change = self.voter_history.last_change_offset()
        if self.never_vote or change < self.high_watermark:
            return False
        return any(v.key_matches(self.node_id, self.directory_id) for v in self.voter_history.at(change))

    def endpoint_update(self) -> Voter | None:
        """This voter as it listens now, when the latest voter set records another endpoint for
        it: what it sends the leader as UpdateRaftVoter (Kafka's controllers do so after a
        restart on a new listener). Only once the set is recorded in the log (kraft.version 1):
        a static set lives in every node's controller.quorum.voters instead."""
        if self.own_endpoint is None or not self.voter_history.dynamic or not self.is_voter:
            return None
        me = next(v for v in self.voter_set if v.key_matches(self.node_id, self.directory_id))
        if (me.host, me.port) == self.own_endpoint:
            return None
        return Voter(me.node_id, me.directory_id or self.directory_id, *self.own_endpoint)

    def peer_endpoints(self) -> dict[int, tuple[str, int]]:
        """Controller endpoints to reach peers on: leaders named in fetch answers, then the
        latest voter set's (which wins)."""
        endpoints = dict(self.learned_endpoints)
        endpoints.update((v.node_id, (v.host, v.port)) for v in self.voter_history.latest() if v.host)
        return endpoints

    def _leader_endpoint(self) -> tuple[str, int]:
        """The controller endpoint of the leader we name in answers ("", 0 if unknown)."""
        leader = self._visible_leader()
        if leader == self.node_id:
            me = next((v for v in self.voter_set if v.node_id == self.node_id), None)
            return (me.host, me.port) if me is not None else ("", 0)
        return self.peer_endpoints().get(leader, ("", 0))

    def _learn_endpoint(self, node_id: int | None, host: str, port: int) -> None:
        if node_id is not None and node_id != self.node_id and endpoint_ok(host, port):
            self.learned_endpoints[node_id] = (host, port)

    def _load_voter_history(self) -> None:
        base, _ = unwrap_snapshot(self.log.snapshot)
        if base is not None:
            self.voter_history.reset(base)
        self._note_entries(self.log.entries_between(self.log.start_offset, self.log.end_offset))

    def _note_entries(self, entries: list[Entry]) -> bool:
        changed = False
        for e in entries:
            if e.control:
                voters = decode_voters(e.payload)
                if voters is not None:
                    self.voter_history.record(e.offset, voters)
                    changed = True
        return changed

    # ================================================================ snapshots

    def snapshot_bytes(self, end_offset: int, state_machine_data: bytes) -> bytes:
        """What the snapshot ending at end_offset holds: the voter set once it is dynamic."""
        if not self.voter_history.dynamic:
            return state_machine_data
        return wrap_snapshot(self.voter_history.at(end_offset), state_machine_data)

    # ============================================================== role effects

    def _membership_changed(self, now: float) -> None:
        """The latest set changed (appended, truncated or installed): roles follow it."""
        was_observer = self.quorum.observer
        self.quorum.observer = not self.may_campaign
        role = self.quorum.role
        if role is Role.LEADER:
            st: LeaderState = self.quorum.role_state
            st.set_voters(self.voters, now)
            self._note_leader_standing(st)
            self._advance_leader_hw(now)
        elif self.quorum.observer and role in (Role.PROSPECTIVE, Role.CANDIDATE):
            self._become_unattached(self.quorum.epoch, now)
        elif role is Role.UNATTACHED and was_observer != self.quorum.observer:
            self._become_unattached(self.quorum.epoch, now)  # re-armed as voter or observer

    def _note_leader_standing(self, st: LeaderState) -> None:
        """A leader outside its latest set leads only until that set's change commits."""
        st.resign_after = None if self.node_id in self.voters else self.voter_history.last_change_offset()

    def _standing_changed(self, now: float) -> None:
        """The HW passed this node's own removal: it no longer campaigns."""
        if self.quorum.observer == self.may_campaign:
            self._membership_changed(now)

    def _maybe_resign_removed_leader(self, now: float) -> None:
        st = self.quorum.role_state
        if self.quorum.role is Role.LEADER and st.resign_after is not None and self.high_watermark > st.resign_after:
            self._become_resigned(now, st.preferred_successors())

    # ============================================================ leader requests

    def _change_refused(self) -> VoterChange | None:
        """Kafka's common checks before any voter change."""
        if self.quorum.role is not Role.LEADER:
            return VoterChange(ErrorCode.NOT_LEADER_OR_FOLLOWER, "not the leader of the metadata quorum")
        st: LeaderState = self.quorum.role_state
        if self.high_watermark <= st.epoch_start_offset:
            return VoterChange(ErrorCode.REQUEST_TIMED_OUT,
                               "the leader has not yet committed an entry in its epoch; retry")
        if self.voter_history.last_change_offset() >= self.high_watermark:
            return VoterChange(ErrorCode.REQUEST_TIMED_OUT, "the previous voter change is not committed yet; retry")
        return None

    def change_allowed(self) -> bool:
        return self._change_refused() is None

    def add_voter(self, voter: Voter, now: float) -> tuple[VoterChange, object]:
        refused = self._change_refused()
        if refused is None:
            refused = self._add_refused(voter, now)
        if refused is not None:
            return refused, self._finish(now)
        return self._append_voters([*self.voter_set, voter], now)

    def _add_refused(self, voter: Voter, now: float) -> VoterChange | None:
        if voter.node_id in self.voters:
            return VoterChange(ErrorCode.DUPLICATE_VOTER, f"node {voter.node_id} is already a voter")
        if not voter.directory_id or not endpoint_ok(voter.host, voter.port):
            return VoterChange(ErrorCode.INVALID_REQUEST, "a new voter needs its directory id and a controller endpoint")
        st: LeaderState = self.quorum.role_state
        progress = st.observers.get(voter.node_id)
        if progress is None or progress.directory_id != voter.directory_id:
            return VoterChange(ErrorCode.REQUEST_TIMED_OUT,
                               f"replica {voter.node_id} ({voter.directory_id}) is not fetching from the leader")
        if not st.caught_up(progress, now):
            return VoterChange(ErrorCode.REQUEST_TIMED_OUT,
                               f"replica {voter.node_id} has not caught up with the leader yet; retry")
        return None

    def remove_voter(self, node_id: int, directory_id: str, now: float) -> tuple[VoterChange, object]:
        refused = self._change_refused()
        if refused is None:
            match = [v for v in self.voter_set if v.key_matches(node_id, directory_id)]
            if not match:
                refused = VoterChange(ErrorCode.VOTER_NOT_FOUND, f"({node_id}, {directory_id}) is not a voter")
            elif len(self.voter_set) == 1:
                refused = VoterChange(ErrorCode.VOTER_NOT_FOUND, "cannot remove the only voter")
        if refused is not None:
            return refused, self._finish(now)
        return self._append_voters([v for v in self.voter_set if v.node_id != node_id], now)

    def update_voter(self, voter: Voter, now: float) -> tuple[VoterChange, object]:
        """A voter's new endpoint (Kafka's UpdateRaftVoter); nothing appended if it is unchanged."""
        refused = self._change_refused()
        current = next((v for v in self.voter_set if v.key_matches(voter.node_id, voter.directory_id)), None)
        if refused is None and current is None:
            refused = VoterChange(ErrorCode.VOTER_NOT_FOUND, f"({voter.node_id}, {voter.directory_id}) is not a voter")
        if refused is None and not endpoint_ok(voter.host, voter.port):
            refused = VoterChange(ErrorCode.INVALID_REQUEST, "a voter needs a controller endpoint")
        if refused is None and voter.node_id == self.node_id and self.own_endpoint is not None \
                and (voter.host, voter.port) != self.own_endpoint:
            refused = VoterChange(ErrorCode.INVALID_REQUEST, f"the leader listens on {self.own_endpoint[0]}:"
                                                             f"{self.own_endpoint[1]}; it records its own endpoint")
        if refused is not None:
            return refused, self._finish(now)
        updated = Voter(current.node_id, current.directory_id or voter.directory_id, voter.host, voter.port)
        if updated == current:
            return VoterChange(ErrorCode.NONE, epoch=self.quorum.epoch), self._finish(now)
        return self._append_voters([updated if v is current else v for v in self.voter_set], now)

    def _append_voters(self, voters: list[Voter], now: float) -> tuple[VoterChange, object]:
        st: LeaderState = self.quorum.role_state
        # A static voter's directory id is learnt from its fetches when the set is first recorded.
        def directory(v: Voter) -> str:
            return self.directory_id if v.node_id == self.node_id else st.directory_of(v.node_id)

        filled = [v if v.directory_id else Voter(v.node_id, directory(v), v.host, v.port) for v in voters]
        self._leader_append([Entry(0, 0, encode_voters(filled), control=True)], now)
        offset = self.log.end_offset - 1
        return VoterChange(ErrorCode.NONE, offset=offset, epoch=self.quorum.epoch), self._finish(now)
