"""What a client is told when the coordinator's `__consumer_offsets` append fails.

Kafka's GroupMetadataManager maps the log's errors to ones a group client
acts on: retry later, find the coordinator again, or give up on this commit.
"""
from __future__ import annotations

from wire.error_codes import ErrorCode

__all__ = ["commit_error", "store_group_error"]

_UNAVAILABLE = {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT}
_MOVED = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR}
_TOO_LARGE = {ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE}


def commit_error(error: ErrorCode) -> ErrorCode:
    """For OffsetCommit / OffsetDelete / DeleteGroups answers."""
    if error in _UNAVAILABLE:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in _MOVED:
        return ErrorCode.NOT_COORDINATOR
    if error in _TOO_LARGE:
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    return error


def store_group_error(error: ErrorCode) -> ErrorCode:
    """For SyncGroup / JoinGroup answers held on a group-metadata append."""
    if error in _UNAVAILABLE:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in _MOVED:
        return ErrorCode.NOT_COORDINATOR
    if error in _TOO_LARGE:
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return error
