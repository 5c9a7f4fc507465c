"""Which APIs and versions this build implements.

`API_VERSIONS` is derived from the definitions, so what the broker advertises
in ApiVersions is exactly what the codecs can parse — never more.
"""
from __future__ import annotations

import enum

from wire.errors import UnsupportedVersionError
from wire.protocol.apis import acls, admin, data, groups, operations, quotas, session, transactions
from wire.protocol.message import Message

__all__ = ["ApiKey", "REQUESTS", "RESPONSES", "API_VERSIONS", "request_class", "response_class", "lookup"]


class ApiKey(enum.IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_QUORUM = 55
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    UNREGISTER_BROKER = 64
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    DESCRIBE_TOPIC_PARTITIONS = 75
    ADD_RAFT_VOTER = 80
    REMOVE_RAFT_VOTER = 81


def _collect(kind: str) -> dict[int, type[Message]]:
    table: dict[int, type[Message]] = {}
    for module in (data, groups, admin, acls, session, operations, transactions, quotas):
        for name in module.__all__:
            cls = getattr(module, name)
            if cls.KIND == kind:
                if cls.API_KEY in table:
                    raise RuntimeError(f"api key {cls.API_KEY} defined twice")
                table[cls.API_KEY] = cls
    return dict(sorted(table.items()))


REQUESTS: dict[int, type[Message]] = _collect("request")
RESPONSES: dict[int, type[Message]] = _collect("response")


def _versions() -> dict[int, tuple[int, int]]:
    table = {}
    for key, req in REQUESTS.items():
        resp = RESPONSES[key]
        if (req.VERSIONS.lo, req.VERSIONS.hi) != (resp.VERSIONS.lo, resp.VERSIONS.hi):
            raise RuntimeError(f"api {key}: request and response version ranges differ")
        if ApiKey(key).value != key:  # every defined key has a name
            raise RuntimeError(f"api {key} has no ApiKey name")
        table[key] = (req.VERSIONS.lo, req.VERSIONS.hi)
    return table


# api_key -> (min_version, max_version), ascending by key.
API_VERSIONS: dict[int, tuple[int, int]] = _versions()


def request_class(api_key: int) -> type[Message] | None:
    return REQUESTS.get(api_key)


def response_class(api_key: int) -> type[Message] | None:
    return RESPONSES.get(api_key)


def lookup(api_key: int, version: int) -> tuple[type[Message], type[Message]]:
    """(request class, response class) for a supported (api_key, version)."""
    req = REQUESTS.get(api_key)
    if req is None:
        raise UnsupportedVersionError(f"unknown api key {api_key}", api_key=api_key, version=version)
    if version not in req.VERSIONS:
        raise req._unsupported(version)
    return req, RESPONSES[api_key]
