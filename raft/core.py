"""RaftCore: the sans-IO quorum state machine (KIP-595 / KIP-630 / KIP-996).

Inputs are messages, timer ticks, appends and flush notifications, each with the
current monotonic `now`; the output of every call is one `Actions` for the driver
(raft/actions.py says in which order to carry it out). The core never touches I/O,
clocks or randomness other than the `now` it is given and its seeded `rng`.

Construction may already need durable work (e.g. an epoch learned from the log, or
EndQuorumEpoch after a leader restarts Resigned): it is returned by the first call,
so a driver calls `tick(now)` right after constructing the core.

This module holds the public API, the role transitions and the election messages;
replication (fetch, snapshots) is in raft/replication.py. What each role does on its timers
is in the role's class (raft/roles.py, raft/leader.py): `tick` and the next deadline ask it.
"""
from __future__ import annotations

import random
from collections.abc import Sequence

from raft.actions import Actions
from raft.config import RaftConfig
from raft.election import (
    VoteTally,
    can_grant_vote,
    log_is_up_to_date,
    lost_election_backoff,
    random_election_timeout,
    successor_backoff,
)
from raft.entry import Entry, LeaderChange, encode_leader_change
from raft.membership import Membership
from raft.errors import LogInvariantError, NotLeaderError
from raft.leader import LeaderState
from raft.log import RaftLog
from raft.messages import (
    MAX_EPOCH,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    VoteRequest,
    VoteResponse,
    well_formed,
)
from raft.quorum_state import QuorumState, Role
from raft.replication import Replication
from raft.roles import (
    CandidateState,
    FollowerState,
    ProspectiveState,
    ResignedState,
    RoleState,
    UnattachedState,
)
from raft.state import ElectionState
from raft.status import QuorumStatus, ReplicaStatus, RoleSummary
from raft.voter_set import Voter, VoterHistory
from wire.error_codes import ErrorCode

__all__ = ["RaftCore"]


class RaftCore(Membership, Replication):
    def __init__(
        self,
        *,
        node_id: int,
        voters: Sequence[int],
        cluster_id: str,
        config: RaftConfig,
        state: ElectionState,
        log: RaftLog,
        now: float,
        rng: random.Random,
        observer: bool = False,
        directory_id: str = "",
        voter_directories: dict[int, str] | None = None,
        voter_addresses: dict[int, tuple[str, int]] | None = None,
    ):
        self.node_id = node_id
        self.directory_id = directory_id  # sent with every fetch (KIP-853 replica key)
        if not voters:
            raise ValueError("raft: the voter set is empty")
        directories, addresses = voter_directories or {}, voter_addresses or {}
        # The static set (kraft.version 0); the log and snapshots may replace it (raft/voter_set.py).
        self.voter_history = VoterHistory(
            Voter(v, directories.get(v) or "", *addresses.get(v, ("", 0))) for v in sorted(set(voters))
        )
        self.learned_endpoints: dict[int, tuple[str, int]] = {}  # leaders' endpoints from fetch answers
        # The controller endpoint this node listens on, once bound (membership.endpoint_update).
        self.own_endpoint: tuple[str, int] | None = None
        self.never_vote = observer  # a broker-only node: an observer whatever the voter set says
        self.cluster_id = cluster_id
        self.config = config
        self.log = log
        self.rng = rng
        self._load_voter_history()
        # The state machine starts from the snapshot: that much is known committed.
        self.high_watermark = log.snapshot_id[0]
        self._delivered = log.snapshot_id[0]
        self.quorum = QuorumState(node_id=node_id, observer=not self.may_campaign)
        self._actions = Actions()
        # The leader we followed until our link to it broke, while nothing has come from it
        # since (`_lost_leader`); once a new connection to it is refused as well, nothing
        # listens at its address: its process is gone (`departed_leader`). A reset link alone
        # proves nothing (a middlebox, a stopped or cut-off process). The metadata controller
        # takes the departed leader as the previous controller's death
        # (metadata.controller.service).
        self._lost_leader: int | None = None
        self.departed_leader: int | None = None
        self._restart(state, now)

    # ================================================================ public API

    def handle(self, src: int, msg: object, now: float) -> Actions:
        if src == self._lost_leader:
            self._lost_leader = self.departed_leader = None  # it lives
        handler = self._HANDLERS.get(type(msg))
        if handler is not None and well_formed(msg):
            if msg.cluster_id != self.cluster_id:
                self._reject_foreign_cluster(src, msg)
            else:
                handler(self, src, msg, now)
        return self._finish(now)

    def tick(self, now: float) -> Actions:
        self.quorum.role_state.tick(self, now)
        return self._finish(now)

    def link_lost(self, peer: int, now: float) -> Actions:
        """The connection to `peer` broke. A follower of `peer` stops counting its leader as
        alive (it grants pre-votes) and campaigns within half an election timeout instead of
        waiting out the fetch timeout: a dead process closes its connections at once. When the
        leader lives, pre-vote keeps this harmless: the voters still fetching from it refuse,
        and a fetch answered meanwhile puts the deadline back."""
        st = self.quorum.role_state
        if self.quorum.role is Role.FOLLOWER and st.leader_id == peer:
            self._lost_leader = peer
            st.has_fetched = False
            delay = self.rng.uniform(0.0, self.config.election_timeout / 2)
            st.fetch_deadline = min(st.fetch_deadline, now + delay)
        return self._finish(now)

    def connect_refused(self, peer: int, now: float) -> Actions:
        """A new connection to `peer` was refused: nothing listens at its address. If it is
        the leader whose link broke with nothing from it since, its process is gone."""
        if peer == self._lost_leader:
            self.departed_leader = peer
        return self._finish(now)

    def append(self, payloads: list[bytes], now: float) -> tuple[int, Actions]:
        """Leader only: append payloads in the current epoch; returns the last offset."""
        if self.quorum.role is not Role.LEADER:
            raise NotLeaderError(self._visible_leader(), self.quorum.epoch)
        self._leader_append([Entry(0, 0, bytes(p)) for p in payloads], now)
        return self.log.end_offset - 1, self._finish(now)

    def on_flushed(self, end_offset: int, now: float) -> Actions:
        """The driver fsynced the log up to end_offset (exclusive)."""
        if self.quorum.role is Role.LEADER:
            self.quorum.role_state.record_flushed(min(end_offset, self.log.end_offset), now)
            self._advance_leader_hw(now)
        return self._finish(now)

    def snapshot_written(self, snapshot_id: tuple[int, int], data: bytes, now: float) -> Actions:
        """The state machine wrote a snapshot of everything below snapshot_id's end offset.

        Raises LogInvariantError if that offset was not yet delivered as committed.
        """
        end = snapshot_id[0]
        if end > self._delivered or end < self.log.snapshot_id[0]:
            raise LogInvariantError(
                f"snapshot at {end}: must be committed and delivered ({self._delivered}) "
                f"and not older than {self.log.snapshot_id}"
            )
        self.log.set_snapshot((end, snapshot_id[1]), data)
        self.voter_history.compact(end)
        # Log cleaning: the snapshot now covers everything before it.
        if end > self.log.start_offset:
            self.log.delete_before(end)
            self._actions.delete_before = end
        return self._finish(now)

    def resign(self, now: float) -> Actions:
        """Graceful handover: EndQuorumEpoch naming the best successors first."""
        if self.quorum.role is not Role.LEADER:
            raise NotLeaderError(self._visible_leader(), self.quorum.epoch)
        self._become_resigned(now, self.quorum.role_state.preferred_successors())
        return self._finish(now)

    def role_summary(self) -> RoleSummary:
        """status()'s role, epoch, leader_id, high_watermark and log_end_offset, cheaply."""
        return RoleSummary(self.quorum.role, self.quorum.epoch, self._visible_leader(),
                           self.high_watermark, self.log.end_offset)

    def status(self) -> QuorumStatus:
        role, st = self.quorum.role, self.quorum.role_state
        voters: list[ReplicaStatus] = []
        observers: list[ReplicaStatus] = []
        if role is Role.LEADER:
            directories = self.voter_directories_seen()
            voters = [
                ReplicaStatus(v, st.progress[v].end_offset, st.progress[v].last_fetch, directories[v])
                for v in self.voters
            ]
            observers = [
                ReplicaStatus(o, p.end_offset, p.last_fetch, p.directory_id) for o, p in sorted(st.observers.items())
            ]
        return QuorumStatus(
            node_id=self.node_id,
            role=role,
            epoch=self.quorum.epoch,
            leader_id=self._visible_leader(),
            voted_id=self.quorum.voted_id,
            high_watermark=self.high_watermark,
            log_start_offset=self.log.start_offset,
            log_end_offset=self.log.end_offset,
            last_epoch=self.log.last_epoch,
            snapshot_id=self.log.snapshot_id,
            observer=not self.is_voter,
            voters=voters,
            observers=observers,
            departed_leader=self.departed_leader,
        )

    @property
    def role(self) -> Role:
        return self.quorum.role

    @property
    def epoch(self) -> int:
        return self.quorum.epoch

    # ============================================================== restart

    def _restart(self, state: ElectionState, now: float) -> None:
        """Kafka's QuorumState.initialize."""
        self.quorum.restore(state)
        if self.log.last_epoch > state.epoch:
            # quorum-state lagging the log (e.g. a lost write): trust the log's epoch.
            self._become_unattached(self.log.last_epoch, now)
        elif state.leader_id == self.node_id and self.may_campaign:
            # Ex-leaders never lead again in the same epoch: unflushed entries may be lost,
            # and (offset, epoch) must keep naming exactly one entry.
            self._become_resigned(now, [])
            if self._only_voter():
                self.quorum.role_state.election_deadline = now  # nobody to hand over to or wait for
        elif state.leader_id is not None and state.leader_id != self.node_id:
            self._become_follower(state.epoch, state.leader_id, now)
        else:
            self._become_unattached(state.epoch, now)

    # =========================================================== transitions

    def _transition(self, role_state: RoleState, *, epoch: int, **kw) -> None:
        old_state = self.quorum.role_state
        if self.quorum.transition(role_state, epoch=epoch, **kw):
            self._actions.persist_state = self.quorum.election_state()
        if old_state is not None:
            old_state.left(self)

    def _retries(self) -> int:
        """Elections tried in a row, carried from the role we leave (none at start)."""
        return 0 if self.quorum.role_state is None else self.quorum.role_state.retries

    def _only_voter(self) -> bool:
        return self.may_campaign and self.voters == [self.node_id]

    def _become_unattached(self, epoch: int, now: float, voted_id: int | None = None) -> None:
        retries = self._retries()
        # The only voter needs no one's vote and can split none: it campaigns at once, as
        # Kafka's KafkaRaftClient.initialize has it, not after an election timeout.
        timeout = 0.0 if self._only_voter() else random_election_timeout(self.config.election_timeout, self.rng)
        # At MAX_EPOCH no election can start: the node looks for a leader as an observer does.
        campaigns = self.may_campaign and epoch < MAX_EPOCH
        self._transition(
            UnattachedState(campaigns, now + timeout, discover_at=now, retries=retries),
            epoch=epoch,
            voted_id=voted_id,
        )

    def _become_follower(self, epoch: int, leader_id: int, now: float) -> None:
        if leader_id == self.node_id:
            return
        st = FollowerState(leader_id, fetch_deadline=now + self.config.fetch_timeout)
        self._transition(st, epoch=epoch, leader_id=leader_id)
        self._send_fetch(st, now)

    def _become_prospective(self, now: float) -> None:
        if self.quorum.epoch >= MAX_EPOCH:  # an election would need an epoch past int32
            self._become_unattached(self.quorum.epoch, now)
            return
        retries = self._retries() + 1
        timeout = random_election_timeout(self.config.election_timeout, self.rng)
        st = ProspectiveState(
            VoteTally(self.node_id, self.voters),
            election_deadline=now + timeout,
            resend_at=now,
            last_known_leader=self.quorum.leader_id,
            retries=retries,
        )
        # Memory-only: the durable election state stays exactly as it was.
        self._transition(st, epoch=self.quorum.epoch, leader_id=self.quorum.leader_id)
        if st.tally.won():
            self._become_candidate(now)
        else:
            self._send_vote_requests(now, pre_vote=True)

    def _prospective_lost(self, now: float) -> None:
        leader = self.quorum.role_state.last_known_leader
        if leader is not None and leader != self.node_id:
            self._become_follower(self.quorum.epoch, leader, now)
        else:
            self._become_unattached(self.quorum.epoch, now)

    def _become_candidate(self, now: float) -> None:
        retries = self.quorum.role_state.retries
        timeout = random_election_timeout(self.config.election_timeout, self.rng)
        st = CandidateState(VoteTally(self.node_id, self.voters), now + timeout, now, retries)
        self._transition(st, epoch=self.quorum.epoch + 1, voted_id=self.node_id)
        if st.tally.won():
            self._become_leader(now)
        else:
            self._send_vote_requests(now, pre_vote=False)

    def _become_leader(self, now: float) -> None:
        granted = sorted(self.quorum.role_state.tally.granted)
        st = LeaderState(
            node_id=self.node_id,
            voters=self.voters,
            epoch_start_offset=self.log.end_offset,
            granting_voters=granted,
            now=now,
            config=self.config,
        )
        self._transition(st, epoch=self.quorum.epoch, leader_id=self.node_id)
        self._note_leader_standing(st)
        # Raft §5.4.2: commit an entry of our own epoch before exposing older ones.
        record = LeaderChange(self.node_id, self.voters, granted)
        self._leader_append([Entry(0, 0, encode_leader_change(record), control=True)], now)
        self._send_begin_quorum_epoch(st, now)

    def _become_resigned(self, now: float, successors: list[int]) -> None:
        timeout = random_election_timeout(self.config.election_timeout, self.rng)
        others = {v for v in self.voters if v != self.node_id}
        st = ResignedState(now + timeout, others, list(successors), resend_at=now)
        self._transition(st, epoch=self.quorum.epoch, leader_id=self.node_id)
        self._send_end_quorum_epoch(now)

    # ============================================================== elections

    def _send_vote_requests(self, now: float, *, pre_vote: bool) -> None:
        st = self.quorum.role_state
        st.resend_at = now + self.config.request_timeout
        directories = self.voter_directories
        for voter in st.tally.unanswered():
            request = VoteRequest(
                self.cluster_id,
                self.quorum.epoch,
                self.node_id,
                self.log.end_offset,
                self.log.last_epoch,
                pre_vote,
                voter,
                directories.get(voter, ""),
            )
            self._send(voter, request)

    def _on_vote_request(self, src: int, req: VoteRequest, now: float) -> None:
        def reply(error: int, granted: bool = False) -> None:
            self._send(
                src,
                VoteResponse(
                    self.cluster_id, error, self.quorum.epoch, self._visible_leader(), granted, req.pre_vote,
                    *self._leader_endpoint(),
                ),
            )

        bad_epoch = req.last_epoch > req.epoch or (not req.pre_vote and req.last_epoch >= req.epoch)
        if req.last_offset < 0 or req.last_epoch < 0 or bad_epoch:
            return reply(ErrorCode.INVALID_REQUEST)
        if req.epoch < self.quorum.epoch:
            return reply(ErrorCode.FENCED_LEADER_EPOCH)
        if req.voter_id >= 0 and not (req.voter_id == self.node_id and req.voter_directory_id in ("", self.directory_id)):
            return reply(ErrorCode.INVALID_VOTER_KEY)
        # KIP-853: the candidate may hold a newer voter set than ours (in which it may be, and
        # which may name us): a replica it names as a voter votes, whatever its own log says.
        named = req.voter_id == self.node_id and not self.never_vote
        if not (self.is_voter or named) or req.candidate_id == self.node_id:
            return reply(ErrorCode.INCONSISTENT_VOTER_SET)
        if not req.pre_vote and req.epoch > self.quorum.epoch:
            self._become_unattached(req.epoch, now)
        st = self.quorum.role_state
        grant = can_grant_vote(
            role=self.quorum.role,
            candidate_id=req.candidate_id,
            pre_vote=req.pre_vote,
            up_to_date=log_is_up_to_date(
                req.last_epoch, req.last_offset, self.log.last_epoch, self.log.end_offset
            ),
            voted_id=self.quorum.voted_id,
            leader_id=self.quorum.leader_id,
            has_fetched_from_leader=st.has_fetched_from_leader,
        )
        if grant and not req.pre_vote and self.quorum.voted_id is None:
            # Durable before the reply leaves (persist_state precedes send in Actions).
            self._become_unattached(self.quorum.epoch, now, voted_id=req.candidate_id)
        reply(ErrorCode.NONE, grant)

    def _on_vote_response(self, src: int, resp: VoteResponse, now: float) -> None:
        if self._handle_common_response(resp, now):
            return
        role, st = self.quorum.role, self.quorum.role_state
        if resp.pre_vote and role is Role.PROSPECTIVE:
            st.tally.record(src, resp.granted and resp.error == ErrorCode.NONE)
            if st.tally.won():
                self._become_candidate(now)
            elif st.tally.lost():
                self._prospective_lost(now)
        elif not resp.pre_vote and role is Role.CANDIDATE and st.backoff_until is None:
            st.tally.record(src, resp.granted and resp.error == ErrorCode.NONE)
            if st.tally.won():
                self._become_leader(now)
            elif st.tally.lost():
                backoff = lost_election_backoff(st.retries, self.config.election_backoff_max, self.rng)
                st.backoff_until = now + backoff

    def _send_begin_quorum_epoch(self, st: LeaderState, now: float) -> None:
        st.begin_resend_at = now + st.begin_interval
        request = BeginQuorumEpochRequest(self.cluster_id, self.quorum.epoch, self.node_id, *self._leader_endpoint())
        for voter in st.begin_quorum_targets(now):
            self._send(voter, request)

    def _leader_claim_error(self, epoch: int, leader_id: int) -> int:
        """Begin/EndQuorumEpoch come from a leader of `epoch`: refuse stale, foreign or rival claims."""
        if epoch < self.quorum.epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if leader_id == self.node_id:
            return ErrorCode.INVALID_REQUEST
        if epoch == self.quorum.epoch and self.quorum.leader_id not in (None, leader_id):
            return ErrorCode.INVALID_REQUEST  # a second leader for one epoch: refuse, never follow
        return ErrorCode.NONE

    def _on_begin_quorum_epoch(self, src: int, req: BeginQuorumEpochRequest, now: float) -> None:
        error = self._leader_claim_error(req.epoch, req.leader_id)
        if error == ErrorCode.NONE:
            self._learn_endpoint(req.leader_id, req.leader_host, req.leader_port)
        if error == ErrorCode.NONE and not (self.quorum.role is Role.FOLLOWER and req.epoch == self.quorum.epoch):
            self._become_follower(req.epoch, req.leader_id, now)
        self._send(
            src,
            BeginQuorumEpochResponse(self.cluster_id, error, self.quorum.epoch, self._visible_leader()),
        )

    def _on_begin_quorum_epoch_response(self, src: int, resp: BeginQuorumEpochResponse, now: float) -> None:
        if self._handle_common_response(resp, now):
            return
        if self.quorum.role is Role.LEADER and resp.error == ErrorCode.NONE:
            self.quorum.role_state.begin_unacked.discard(src)

    def _send_end_quorum_epoch(self, now: float) -> None:
        st = self.quorum.role_state
        st.resend_at = now + self.config.request_timeout
        request = EndQuorumEpochRequest(
            self.cluster_id, self.quorum.epoch, self.node_id, list(st.preferred_successors)
        )
        for voter in sorted(st.unacked):
            self._send(voter, request)

    def _on_end_quorum_epoch(self, src: int, req: EndQuorumEpochRequest, now: float) -> None:
        error = self._leader_claim_error(req.epoch, req.leader_id)
        if error == ErrorCode.NONE:
            if req.epoch > self.quorum.epoch or self.quorum.leader_id is None:
                self._become_follower(req.epoch, req.leader_id, now)
            st = self.quorum.role_state
            if self.quorum.role is Role.FOLLOWER and st.leader_id == req.leader_id:
                # The leader gave up its lease: pre-votes may be granted, and the best
                # successor campaigns at once while the others wait their turn.
                st.has_fetched = False
                successors = [v for v in req.preferred_successors if v in self.voters]
                cap = self.config.election_backoff_max
                delay = (
                    successor_backoff(successors.index(self.node_id), len(successors), cap)
                    if self.node_id in successors
                    else cap
                )
                st.fetch_deadline = min(st.fetch_deadline, now + delay)
        self._send(
            src,
            EndQuorumEpochResponse(self.cluster_id, error, self.quorum.epoch, self._visible_leader()),
        )

    def _on_end_quorum_epoch_response(self, src: int, resp: EndQuorumEpochResponse, now: float) -> None:
        if self._handle_common_response(resp, now):
            return
        if self.quorum.role is Role.RESIGNED:
            self.quorum.role_state.unacked.discard(src)

    # ======================================================= common plumbing

    def _handle_common_response(self, resp, now: float) -> bool:
        """Learn epochs and leaders from any response; True when it is stale or consumed.

        Kafka's maybeHandleCommonResponse: an older epoch is dropped; a newer one moves us
        to it (following its leader if it names one); a leader newly named for our own
        epoch is followed.
        """
        epoch = self.quorum.epoch
        if resp.epoch < epoch:
            return True
        leader = resp.leader_id
        self._learn_endpoint(leader, getattr(resp, "leader_host", ""), getattr(resp, "leader_port", 0))
        known_leader = leader is not None and leader != self.node_id
        if resp.epoch > epoch:
            if known_leader:
                self._become_follower(resp.epoch, leader, now)
            else:
                self._become_unattached(resp.epoch, now)
            return True
        if (
            known_leader
            and self.quorum.leader_id is None
            and self.quorum.role not in (Role.LEADER, Role.RESIGNED)
        ):
            self._become_follower(epoch, leader, now)
            return True
        return False

    def _visible_leader(self) -> int | None:
        """The leader we tell others about (a resigned leader no longer claims the role)."""
        return None if self.quorum.role is Role.RESIGNED else self.quorum.leader_id

    def _reject_foreign_cluster(self, src: int, msg: object) -> None:
        response = self._error_response_for(msg, ErrorCode.INCONSISTENT_CLUSTER_ID)
        if response is not None:
            self._send(src, response)

    def _send(self, dst: int, msg: object) -> None:
        self._actions.send.append((dst, msg))

    def _finish(self, now: float) -> Actions:
        self._standing_changed(now)
        self._maybe_resign_removed_leader(now)
        if self.high_watermark > self._delivered:
            self._actions.committed.extend(self.log.entries_between(self._delivered, self.high_watermark))
            self._delivered = self.high_watermark
        actions, self._actions = self._actions, Actions()
        actions.high_watermark = self.high_watermark
        actions.deadline = self.quorum.role_state.deadline()
        return actions


RaftCore._HANDLERS = {
    VoteRequest: RaftCore._on_vote_request,
    VoteResponse: RaftCore._on_vote_response,
    BeginQuorumEpochRequest: RaftCore._on_begin_quorum_epoch,
    BeginQuorumEpochResponse: RaftCore._on_begin_quorum_epoch_response,
    EndQuorumEpochRequest: RaftCore._on_end_quorum_epoch,
    EndQuorumEpochResponse: RaftCore._on_end_quorum_epoch_response,
    **Replication.HANDLERS,
}
