"""AddRaftVoter v0 / RemoveRaftVoter v0 (KIP-853) on the Kafka port, for AdminClients.

As Kafka's brokers, ours pass them on to the controllers: the metadata quorum's Raft leader
decides (raft/membership.py) and answers once the change committed. ALTER on the cluster
(CLUSTER_AUTHORIZATION_FAILED); a request naming another cluster is INCONSISTENT_CLUSTER_ID;
a new voter needs a directory id and a listener (INVALID_REQUEST); Kafka's DUPLICATE_VOTER,
VOTER_NOT_FOUND and REQUEST_TIMED_OUT (not caught up yet, the previous change not committed,
no leader in time) come back from the leader as they are.
"""
from __future__ import annotations

from broker.authorization import cluster_allowed
from broker.controller_channel import ControllerUnavailableError
from metadata.acls import AclOperation
from raft.codec import AddVoterRequest, RemoveVoterRequest
from storage.meta_properties import uuid_to_str
from wire.error_codes import ErrorCode
from wire.protocol import AddRaftVoterResponse, RemoveRaftVoterResponse
from wire.protocol.schema import ZERO_UUID

__all__ = ["handle_add", "add_error", "handle_remove", "remove_error"]

DEFAULT_TIMEOUT_MS = 30_000
MAX_TIMEOUT_MS = 120_000


async def handle_add(broker, header, request) -> AddRaftVoterResponse:
    refused = _refused(broker, request)
    if refused is not None:
        return add_error(broker, header, request, *refused)
    listener = _controller_listener(broker)
    endpoint = next((l for l in request.listeners if l.name == listener), None) or \
        (request.listeners[0] if request.listeners else None)
    if endpoint is None or not endpoint.host or not endpoint.port:
        return add_error(broker, header, request, ErrorCode.INVALID_REQUEST, "the new voter names no listener")
    timeout_ms = request.timeout_ms if 0 < request.timeout_ms <= MAX_TIMEOUT_MS else DEFAULT_TIMEOUT_MS
    change = AddVoterRequest(broker.cluster_id, timeout_ms, request.voter_id, uuid_to_str(request.voter_directory_id),
                             endpoint.host, endpoint.port)
    return add_error(broker, header, request, *await _decide(broker, change, timeout_ms / 1000))


async def handle_remove(broker, header, request) -> RemoveRaftVoterResponse:
    refused = _refused(broker, request)
    if refused is not None:
        return remove_error(broker, header, request, *refused)
    change = RemoveVoterRequest(broker.cluster_id, request.voter_id, uuid_to_str(request.voter_directory_id))
    return remove_error(broker, header, request, *await _decide(broker, change, DEFAULT_TIMEOUT_MS / 1000))


def _refused(broker, request) -> tuple[int, str | None] | None:
    if not cluster_allowed(broker, AclOperation.ALTER):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None
    if request.cluster_id not in (None, "", broker.cluster_id):
        return ErrorCode.INCONSISTENT_CLUSTER_ID, f"this is cluster {broker.cluster_id}"
    if request.voter_id < 0 or request.voter_directory_id == ZERO_UUID:
        return ErrorCode.INVALID_REQUEST, "a voter is a node id and a (non-zero) directory id"
    return None


async def _decide(broker, change, timeout_s: float) -> tuple[int, str | None]:
    try:
        error, message = await broker.controller.change_voters(change, timeout_s=timeout_s)
    except ControllerUnavailableError as exc:
        return ErrorCode.REQUEST_TIMED_OUT, str(exc)
    return error, message or None


def _controller_listener(broker) -> str:
    return (broker.static.get("controller.listener.names") or "CONTROLLER").split(",")[0].strip()


def add_error(broker, header, request, code: int, message: str | None = None) -> AddRaftVoterResponse:
    return AddRaftVoterResponse(throttle_time_ms=0, error_code=code, error_message=message)


def remove_error(broker, header, request, code: int, message: str | None = None) -> RemoveRaftVoterResponse:
    return RemoveRaftVoterResponse(throttle_time_ms=0, error_code=code, error_message=message)
