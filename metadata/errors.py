"""Kafka error codes the metadata layer answers with, and the typed errors it raises.

A minimal local map (values are Kafka's, from Errors.java); it can be swapped for
wire.error_codes once that exists without changing any caller, since both are IntEnums.
"""
from __future__ import annotations

import enum

__all__ = ["Errors", "ApiError", "InvalidRecordError"]


class Errors(enum.IntEnum):
    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    UNKNOWN_TOPIC_OR_PARTITION = 3
    NOT_LEADER_OR_FOLLOWER = 6
    INVALID_TOPIC_EXCEPTION = 17
    NOT_ENOUGH_REPLICAS = 19
    NOT_CONTROLLER = 41
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    INVALID_REQUEST = 42
    POLICY_VIOLATION = 44
    OPERATION_NOT_ATTEMPTED = 55
    REASSIGNMENT_IN_PROGRESS = 60
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    STALE_BROKER_EPOCH = 77
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    INVALID_UPDATE_VERSION = 95
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_TOPIC_ID = 103
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108


class ApiError(Exception):
    """A request the controller refuses: carries the Kafka error code and a readable message."""

    def __init__(self, code: Errors, message: str = ""):
        super().__init__(f"{code.name}: {message}" if message else code.name)
        self.code = code
        self.message = message or None


class InvalidRecordError(ValueError):
    """A committed record that does not fit the image it is replayed onto (a controller bug)."""
