"""Pull replication for RaftCore: Fetch, long-poll, divergence, snapshots, DescribeQuorum.

Followers fetch `(fetch_offset, last_fetched_epoch)`; the leader answers with entries,
a `diverging_epoch` to truncate to, or a `snapshot_id` to download (KIP-595 §Fetch,
KIP-630). A voter's fetch offset is its durable ack, so followers only fetch again
after the driver has fsynced what the last answer appended (send follows append in
Actions). Mixed into RaftCore; uses its `quorum`, `log`, `config` and `_send`.
"""
from __future__ import annotations

from raft import errors
from raft.entry import Entry
from raft.leader import LeaderState
from raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    ReplicaState,
    VoteRequest,
    VoteResponse,
)
from raft.quorum_state import Role
from raft.roles import FollowerState, SnapshotDownload
from raft.voter_set import unwrap_snapshot
from wire.error_codes import ErrorCode

__all__ = ["Replication"]


class Replication:
    # ========================================================== follower side

    def _send_fetch(self, st: FollowerState, now: float) -> None:
        st.in_flight = (self.log.end_offset, self.log.last_epoch)
        st.resend_at = now + self.config.fetch_max_wait + self.config.request_timeout
        self._send(
            st.leader_id,
            FetchRequest(
                self.cluster_id,
                self.node_id,
                self.quorum.epoch,
                self.log.end_offset,
                self.log.last_epoch,
                int(self.config.fetch_max_wait * 1000),
                self.config.fetch_max_bytes,
                self.directory_id,
            ),
        )

    def _send_snapshot_fetch(self, st: FollowerState, now: float) -> None:
        st.resend_at = now + self.config.request_timeout
        self._send(
            st.leader_id,
            FetchSnapshotRequest(
                self.cluster_id,
                self.node_id,
                self.quorum.epoch,
                st.download.snapshot_id,
                len(st.download.data),
                self.config.snapshot_chunk_bytes,
            ),
        )

    def _send_discovery_fetch(self, now: float) -> None:
        others = [v for v in self.voters if v != self.node_id]
        if not others:
            return
        voter = others[self.rng.randrange(len(others))]
        self._send(
            voter,
            FetchRequest(
                self.cluster_id,
                self.node_id,
                self.quorum.epoch,
                self.log.end_offset,
                self.log.last_epoch,
                0,
                self.config.fetch_max_bytes,
                self.directory_id,
            ),
        )

    def _on_fetch_response(self, src: int, resp: FetchResponse, now: float) -> None:
        if self._handle_common_response(resp, now):
            return
        st = self.quorum.role_state
        if self.quorum.role is not Role.FOLLOWER or src != st.leader_id or st.download is not None:
            return
        if resp.error != ErrorCode.NONE:
            st.in_flight = None
            st.resend_at = min(st.resend_at, now + self.config.request_timeout)
            return
        if st.in_flight != (self.log.end_offset, self.log.last_epoch):
            return  # an answer to an older fetch: the log has moved since
        st.in_flight = None
        st.has_fetched = True
        st.fetch_deadline = now + self.config.fetch_timeout
        if resp.diverging_epoch is not None:
            if not self._truncate_to_leader(tuple(resp.diverging_epoch)):
                st.resend_at = now + self.config.request_timeout
                return
            if self.voter_history.truncate_to(self.log.end_offset):
                self._membership_changed(now)
        elif resp.snapshot_id is not None:
            st.download = SnapshotDownload((resp.snapshot_id[0], resp.snapshot_id[1]))
            self._send_snapshot_fetch(st, now)
            return
        elif resp.entries:
            if not self._valid_new_entries(resp.entries, resp.epoch):
                st.resend_at = now + self.config.request_timeout
                return
            self.log.append(resp.entries)
            self._actions.append.extend(resp.entries)
            if self._note_entries(resp.entries):
                self._membership_changed(now)
        # The leader validated our whole log up to its end: its HW applies to it.
        self.high_watermark = max(self.high_watermark, min(resp.high_watermark, self.log.end_offset))
        self._send_fetch(st, now)

    def _truncate_to_leader(self, diverging: tuple[int, int]) -> bool:
        """Kafka's truncateToEndOffset; refuses (False) to go below the HW."""
        epoch, leader_end = diverging
        my_epoch, my_end = self.log.end_offset_for_epoch(epoch)
        target = min(my_end, leader_end)
        if target < self.high_watermark or target < self.log.snapshot_id[0]:
            return False  # would lose committed entries: never (a bug elsewhere if it happens)
        if target < self.log.end_offset:
            if self._actions.append:
                raise errors.LogInvariantError("truncation after an append in one Actions")
            self.log.truncate_to(target)
            self._actions.truncate_to = target
        return True

    def _valid_new_entries(self, entries: list[Entry], leader_epoch: int) -> bool:
        expected, last_epoch = self.log.end_offset, self.log.last_epoch
        for e in entries:
            if e.offset != expected or e.epoch < last_epoch or e.epoch > leader_epoch:
                return False
            expected, last_epoch = expected + 1, e.epoch
        return True

    def _on_fetch_snapshot_response(self, src: int, resp: FetchSnapshotResponse, now: float) -> None:
        if self._handle_common_response(resp, now):
            return
        st = self.quorum.role_state
        if self.quorum.role is not Role.FOLLOWER or src != st.leader_id or st.download is None:
            return
        download = st.download
        if resp.error != ErrorCode.NONE or resp.snapshot_id is None:
            # The leader has moved on to a newer snapshot (or lost ours): start over.
            st.download = None
            self._send_fetch(st, now)
            return
        if tuple(resp.snapshot_id) != download.snapshot_id or resp.position != len(download.data):
            return  # a stale or duplicated chunk
        download.data += resp.chunk
        st.fetch_deadline = now + self.config.fetch_timeout
        st.has_fetched = True
        if len(download.data) < resp.size and resp.chunk:
            self._send_snapshot_fetch(st, now)
            return
        st.download = None
        snapshot_end = download.snapshot_id[0]
        if len(download.data) == resp.size and snapshot_end >= self.high_watermark:
            data = bytes(download.data)
            self.log.reset_to_snapshot(download.snapshot_id, data)
            self._actions.install_snapshot = (download.snapshot_id, data)
            self.voter_history.reset(unwrap_snapshot(data)[0])
            self._membership_changed(now)
            self.high_watermark = snapshot_end
            self._delivered = snapshot_end  # the state machine resets to the snapshot
        self._send_fetch(st, now)

    # ============================================================ leader side

    def _leader_append(self, entries: list[Entry], now: float) -> None:
        epoch, offset = self.quorum.epoch, self.log.end_offset
        stamped = [Entry(offset + i, epoch, e.payload, e.control) for i, e in enumerate(entries)]
        self.log.append(stamped)
        self._actions.append.extend(stamped)
        if self._note_entries(stamped):
            self._membership_changed(now)
        st: LeaderState = self.quorum.role_state
        # Parked long-polls waiting at the old end can now be answered.
        waiting = [r for r in st.parked_ids() if st.parked[r].request.fetch_offset < self.log.end_offset]
        for replica, request in st.take_parked(waiting):
            self._reply_fetch(replica, request)

    def _advance_leader_hw(self, now: float) -> None:
        st: LeaderState = self.quorum.role_state
        new_hw = st.high_watermark(self.high_watermark)
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
            # Followers learn the new HW from their parked fetches.
            for replica, request in st.take_parked(st.parked_ids()):
                self._reply_fetch(replica, request)

    def _on_fetch_request(self, src: int, req: FetchRequest, now: float) -> None:
        if self.quorum.role is not Role.LEADER:
            return self._send(src, self._fetch_error_response(req))
        if req.fetch_offset < 0 or req.last_fetched_epoch < 0 or req.last_fetched_epoch > req.epoch:
            return self._send(src, self._fetch_error_response(req, ErrorCode.INVALID_REQUEST))
        if req.epoch != self.quorum.epoch or req.replica_id == self.node_id:
            return self._send(src, self._fetch_error_response(req))
        st: LeaderState = self.quorum.role_state
        response = self._leader_fetch_response(req)
        expected = self.voter_directories.get(req.replica_id)
        voter = not expected or req.replica_directory_id == expected  # else a wiped voter: an observer
        if response.diverging_epoch is None and response.snapshot_id is None:
            # A valid position: everything below fetch_offset is fsynced on that replica.
            st.record_fetch(req.replica_id, req.fetch_offset, now, voter=voter,
                            directory_id=req.replica_directory_id, leader_end=self.log.end_offset)
            self._advance_leader_hw(now)
            response = self._leader_fetch_response(req)
            # Park only when there is nothing new for it: no entries and no HW it lacks.
            hw_known = st.sent_hw.get(req.replica_id) == self.high_watermark
            if not response.entries and req.max_wait_ms > 0 and hw_known:
                st.park(req.replica_id, req, now)
                return
        elif voter:
            st.record_fetch_time(req.replica_id, now)
        self._send(src, response)
        st.sent_hw[req.replica_id] = response.high_watermark

    def _reply_fetch(self, replica: int, request: FetchRequest) -> None:
        response = self._leader_fetch_response(request)
        self._send(replica, response)
        self.quorum.role_state.sent_hw[replica] = response.high_watermark

    def _leader_fetch_response(self, req: FetchRequest) -> FetchResponse:
        log = self.log
        response = FetchResponse(
            self.cluster_id, ErrorCode.NONE, self.quorum.epoch, self.node_id,
            self.high_watermark, log.start_offset,
        )
        snap_end, snap_epoch = log.snapshot_id
        if req.fetch_offset < log.start_offset or (
            log.has_snapshot and req.fetch_offset <= snap_end and req.last_fetched_epoch < snap_epoch
        ):
            response.snapshot_id = log.snapshot_id
            return response
        epoch, end = log.end_offset_for_epoch(req.last_fetched_epoch)
        if epoch != req.last_fetched_epoch or end < req.fetch_offset:
            if end < log.start_offset or (log.has_snapshot and end < snap_end):
                response.snapshot_id = log.snapshot_id
            else:
                response.diverging_epoch = (epoch, end)
            return response
        response.entries = log.read(req.fetch_offset, req.max_bytes)
        return response

    def _fetch_error_response(self, req: FetchRequest, error: int | None = None) -> FetchResponse:
        if error is None:
            if req.epoch < self.quorum.epoch:
                error = ErrorCode.FENCED_LEADER_EPOCH
            elif req.epoch > self.quorum.epoch:
                error = ErrorCode.UNKNOWN_LEADER_EPOCH
            else:
                error = ErrorCode.NOT_LEADER_OR_FOLLOWER
        host, port = self._leader_endpoint()
        return FetchResponse(
            self.cluster_id, error, self.quorum.epoch, self._visible_leader(),
            self.high_watermark, self.log.start_offset, leader_host=host, leader_port=port,
        )

    def _on_fetch_snapshot_request(self, src: int, req: FetchSnapshotRequest, now: float) -> None:
        error, chunk, size = ErrorCode.NONE, b"", 0
        snapshot_id = tuple(req.snapshot_id)
        if self.quorum.role is not Role.LEADER or req.epoch != self.quorum.epoch:
            error = self._fetch_error_response(
                FetchRequest(req.cluster_id, req.replica_id, req.epoch, 0, 0, 0, 0)
            ).error
        elif snapshot_id != self.log.snapshot_id or self.log.snapshot is None:
            error = ErrorCode.SNAPSHOT_NOT_FOUND
        elif not 0 <= req.position <= len(self.log.snapshot):
            error = ErrorCode.POSITION_OUT_OF_RANGE
        else:
            self.quorum.role_state.record_fetch_time(req.replica_id, now)
            data = self.log.snapshot
            size = len(data)
            limit = max(1, min(req.max_bytes, self.config.snapshot_chunk_bytes))
            chunk = data[req.position : req.position + limit]
        self._send(
            src,
            FetchSnapshotResponse(
                self.cluster_id, error, self.quorum.epoch, self._visible_leader(),
                snapshot_id if error == ErrorCode.NONE else None, req.position, size, chunk,
            ),
        )

    # ========================================================= describe quorum

    def describe_quorum(self, now: float) -> DescribeQuorumResponse:
        """The leader's view of every replica (Kafka's DescribeQuorum); NOT_LEADER elsewhere."""
        if self.quorum.role is not Role.LEADER:
            return DescribeQuorumResponse(
                self.cluster_id, ErrorCode.NOT_LEADER_OR_FOLLOWER, self.quorum.epoch, self._visible_leader(),
                self.high_watermark,
            )
        st: LeaderState = self.quorum.role_state

        directories = self.voter_directories_seen()

        def row(replica: int, progress, directory: str) -> ReplicaState:
            age = -1 if progress.last_fetch is None else int((now - progress.last_fetch) * 1000)
            return ReplicaState(replica, progress.end_offset, age, directory)

        return DescribeQuorumResponse(
            self.cluster_id, ErrorCode.NONE, self.quorum.epoch, self.node_id, self.high_watermark,
            [row(v, st.progress[v], directories[v]) for v in self.voters],
            [row(o, p, p.directory_id) for o, p in sorted(st.observers.items())],
        )

    def _on_describe_quorum(self, src: int, req: DescribeQuorumRequest, now: float) -> None:
        self._send(src, self.describe_quorum(now))

    def _ignore(self, src: int, msg: object, now: float) -> None:
        pass

    def _error_response_for(self, msg: object, error: int) -> object | None:
        """The response type matching a request, carrying only an error (None for responses)."""
        epoch, leader = self.quorum.epoch, self._visible_leader()
        cid = self.cluster_id
        if isinstance(msg, VoteRequest):
            return VoteResponse(cid, error, epoch, leader, False, msg.pre_vote)
        if isinstance(msg, BeginQuorumEpochRequest):
            return BeginQuorumEpochResponse(cid, error, epoch, leader)
        if isinstance(msg, EndQuorumEpochRequest):
            return EndQuorumEpochResponse(cid, error, epoch, leader)
        if isinstance(msg, FetchRequest):
            return FetchResponse(cid, error, epoch, leader, self.high_watermark, self.log.start_offset)
        if isinstance(msg, FetchSnapshotRequest):
            return FetchSnapshotResponse(cid, error, epoch, leader, None, msg.position, 0)
        if isinstance(msg, DescribeQuorumRequest):
            return DescribeQuorumResponse(cid, error, epoch, leader, self.high_watermark)
        return None

    HANDLERS = {
        FetchRequest: _on_fetch_request,
        FetchResponse: _on_fetch_response,
        FetchSnapshotRequest: _on_fetch_snapshot_request,
        FetchSnapshotResponse: _on_fetch_snapshot_response,
        DescribeQuorumRequest: _on_describe_quorum,
        DescribeQuorumResponse: _ignore,
    }
