"""Fetch sessions (KIP-227), the fetcher side: Kafka's FetchSessionHandler, sans-IO.

Each round the fetcher says which partitions it wants and with what
(`PartitionRequest`: fetch offset, log start, leader epoch, max bytes);
`build` turns that into the request's session fields and partition lists:
every partition in a full request, else only those added or changed since
the last request, plus the dropped ones as forgotten. The answer then decides
the next request (`handle_response`):

    full request answered with a session id      -> incremental requests, epoch 1, 2, ...
    full request answered with session id 0      -> the broker keeps no session: full again
    incremental request answered                 -> the next epoch
    FETCH_SESSION_ID_NOT_FOUND                   -> full request opening a new session
    any other top-level error, a lost answer     -> full request that closes ours and opens a new one
    (`handle_error`, `force_full`)

An incremental answer lists only partitions with news; the others are as the
last answer left them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from broker.fetch_session import INITIAL_EPOCH, INVALID_SESSION_ID, next_epoch
from wire.error_codes import ErrorCode

__all__ = ["FetchSessionClient", "FetchPlan", "PartitionRequest"]

Key = tuple  # (topic name or id, partition): the fetcher's choice, the same in every round


class PartitionRequest(NamedTuple):
    fetch_offset: int
    log_start_offset: int
    current_leader_epoch: int
    partition_max_bytes: int
    last_fetched_epoch: int = -1  # the epoch of the fetcher's last record (Fetch v12+)


@dataclass(frozen=True)
class FetchPlan:
    session_id: int
    epoch: int
    partitions: dict[Key, PartitionRequest]  # what this request lists
    forgotten: list[Key]

    @property
    def full(self) -> bool:
        return self.epoch == INITIAL_EPOCH


class FetchSessionClient:
    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self._sent: dict[Key, PartitionRequest] = {}  # the session's partitions as the broker knows them
        self.full_requests = 0
        self.incremental_requests = 0

    def build(self, wanted: dict[Key, PartitionRequest]) -> FetchPlan:
        """The next request for fetching exactly `wanted`."""
        if self.epoch == INITIAL_EPOCH:
            self._sent = dict(wanted)
            self.full_requests += 1
            return FetchPlan(self.session_id, INITIAL_EPOCH, dict(wanted), [])
        changed = {key: data for key, data in wanted.items() if self._sent.get(key) != data}
        forgotten = [key for key in self._sent if key not in wanted]
        self._sent = dict(wanted)
        self.incremental_requests += 1
        return FetchPlan(self.session_id, self.epoch, changed, forgotten)

    def handle_response(self, plan: FetchPlan, error_code: int, session_id: int) -> bool:
        """Take the answer to `plan`; False if it carries a top-level error (no partition data)."""
        if error_code != ErrorCode.NONE:
            if error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
                self.session_id = INVALID_SESSION_ID
            self.epoch = INITIAL_EPOCH
            return False
        if session_id == INVALID_SESSION_ID:  # no session (cache full) or it was closed
            self.session_id, self.epoch = INVALID_SESSION_ID, INITIAL_EPOCH
        elif plan.full:
            self.session_id, self.epoch = session_id, next_epoch(INITIAL_EPOCH)
        else:
            self.epoch = next_epoch(self.epoch)
        return True

    def handle_error(self) -> None:
        """The answer was lost (connection, timeout): the broker may have moved on without us."""
        self.force_full()

    def force_full(self) -> None:
        """Next request is full: it closes our session and opens a new one, so the broker
        forgets what it believes it told us."""
        self.epoch = INITIAL_EPOCH
