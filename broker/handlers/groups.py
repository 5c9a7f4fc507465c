"""FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups, ListGroups,
DeleteGroups: thin translations between the wire classes and the group coordinator
(broker.groups through broker.group_driver). Offsets are in handlers/offsets.py.

The coordinator of a group is the leader of `__consumer_offsets` partition
hash(group), that of a transactional id the leader of `__transaction_state` partition
hash(id); FindCoordinator creates the topic on first use (as Kafka does).
"""
from __future__ import annotations

from broker.authorization import allowed, authorized_operations, cluster_allowed, group_allowed
from broker.groups import JoinResult, LeaveResult, SyncResult
from metadata.acls import AclOperation, ResourceType
from metadata.authorizer import AUTHORIZED_OPERATIONS_OMITTED
from wire.error_codes import ErrorCode
from wire.protocol import (
    DeleteGroupsResponse, DescribeGroupsResponse, FindCoordinatorResponse, HeartbeatResponse,
    JoinGroupResponse, LeaveGroupResponse, ListGroupsResponse, SyncGroupResponse,
)

__all__ = [
    "handle_find_coordinator", "find_coordinator_error", "handle_join", "join_error", "handle_sync",
    "sync_error", "handle_heartbeat", "heartbeat_error", "handle_leave", "leave_error",
    "handle_describe", "describe_error", "handle_list", "list_error", "handle_delete", "delete_error",
]

GROUP_KEY = 0
TRANSACTION_KEY = 1
NOT_AUTHORIZED = ErrorCode.GROUP_AUTHORIZATION_FAILED


# -- FindCoordinator -------------------------------------------------------------------
def _coordinator_answer(code: int, message: str | None = None, node=None) -> FindCoordinatorResponse:
    if node is None:
        return FindCoordinatorResponse(throttle_time_ms=0, error_code=code, error_message=message,
                                       node_id=-1, host="", port=-1)
    return FindCoordinatorResponse(throttle_time_ms=0, error_code=code, error_message=message,
                                   node_id=node.node_id, host=node.host, port=node.port)


async def handle_find_coordinator(broker, header, request) -> FindCoordinatorResponse:
    if request.key_type == TRANSACTION_KEY:
        if not allowed(broker, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, request.key):
            return _coordinator_answer(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if not request.key:
            return _coordinator_answer(ErrorCode.INVALID_REQUEST, "empty transactional id")
        driver = broker.transactions
    elif request.key_type == GROUP_KEY:
        if not group_allowed(broker, AclOperation.DESCRIBE, request.key):
            return _coordinator_answer(NOT_AUTHORIZED)
        driver = broker.groups
    else:
        return _coordinator_answer(ErrorCode.INVALID_REQUEST, f"unknown key type {request.key_type}")
    error, reg = driver.coordinator_for(request.key)
    if error != ErrorCode.NONE:
        return _coordinator_answer(error)
    node = next((b for b in broker.metadata.alive_brokers() if b.node_id == reg.leader), None)
    if node is None:
        return _coordinator_answer(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return _coordinator_answer(ErrorCode.NONE, None, node)


def find_coordinator_error(broker, header, request, code: int) -> FindCoordinatorResponse:
    return _coordinator_answer(code)


# -- JoinGroup ---------------------------------------------------------------------------
def _join_response(result: JoinResult) -> JoinGroupResponse:
    R = JoinGroupResponse
    return R(throttle_time_ms=0, error_code=result.error, generation_id=result.generation_id,
             protocol_name=result.protocol_name or "", leader=result.leader, member_id=result.member_id,
             members=[R.JoinGroupResponseMember(member_id=m.member_id, group_instance_id=m.group_instance_id,
                                                metadata=m.metadata) for m in result.members])


async def handle_join(broker, header, request) -> JoinGroupResponse:
    if not group_allowed(broker, AclOperation.READ, request.group_id):
        return join_error(broker, header, request, NOT_AUTHORIZED)
    coordinator = broker.groups.coordinator
    protocols = [(p.name, bytes(p.metadata)) for p in request.protocols]
    result = await broker.groups.call(lambda token, now: coordinator.join(
        token, request.group_id, member_id=request.member_id, protocol_type=request.protocol_type,
        protocols=protocols, session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=request.rebalance_timeout_ms, group_instance_id=request.group_instance_id,
        client_id=header.client_id or "", client_host="",
        require_known_member_id=header.api_version >= 4, now=now))
    return _join_response(result)


def join_error(broker, header, request, code: int) -> JoinGroupResponse:
    return _join_response(JoinResult(ErrorCode(code), member_id=request.member_id))


# -- SyncGroup ---------------------------------------------------------------------------
def _sync_response(result: SyncResult) -> SyncGroupResponse:
    return SyncGroupResponse(throttle_time_ms=0, error_code=result.error, assignment=result.assignment)


async def handle_sync(broker, header, request) -> SyncGroupResponse:
    if not group_allowed(broker, AclOperation.READ, request.group_id):
        return sync_error(broker, header, request, NOT_AUTHORIZED)
    coordinator = broker.groups.coordinator
    assignments = [(a.member_id, bytes(a.assignment)) for a in request.assignments]
    result = await broker.groups.call(lambda token, now: coordinator.sync(
        token, request.group_id, generation_id=request.generation_id, member_id=request.member_id,
        assignments=assignments, group_instance_id=request.group_instance_id, now=now))
    return _sync_response(result)


def sync_error(broker, header, request, code: int) -> SyncGroupResponse:
    return _sync_response(SyncResult(ErrorCode(code)))


# -- Heartbeat ---------------------------------------------------------------------------
async def handle_heartbeat(broker, header, request) -> HeartbeatResponse:
    if not group_allowed(broker, AclOperation.READ, request.group_id):
        return heartbeat_error(broker, header, request, NOT_AUTHORIZED)
    driver = broker.groups
    result = driver.coordinator.heartbeat(request.group_id, generation_id=request.generation_id,
                                          member_id=request.member_id,
                                          group_instance_id=request.group_instance_id, now=driver.now())
    # Only pushes this member's session deadline later: the timer task needs no wake-up.
    return HeartbeatResponse(throttle_time_ms=0, error_code=result.error)


def heartbeat_error(broker, header, request, code: int) -> HeartbeatResponse:
    return HeartbeatResponse(throttle_time_ms=0, error_code=code)


# -- LeaveGroup --------------------------------------------------------------------------
def _leaving(header, request) -> list[tuple[str, str | None]]:
    if header.api_version >= 3:
        return [(m.member_id, m.group_instance_id) for m in request.members]
    return [(request.member_id, None)]


def _leave_response(version: int, result: LeaveResult) -> LeaveGroupResponse:
    R = LeaveGroupResponse
    error = result.error
    if version < 3 and error == ErrorCode.NONE and result.members:
        error = result.members[0].error  # v0-2 carry one member: its error is the answer
    return R(throttle_time_ms=0, error_code=error, members=[
        R.MemberResponse(member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=m.error)
        for m in result.members])


async def handle_leave(broker, header, request) -> LeaveGroupResponse:
    if not group_allowed(broker, AclOperation.READ, request.group_id):
        return leave_error(broker, header, request, NOT_AUTHORIZED)
    coordinator = broker.groups.coordinator
    leaving = _leaving(header, request)
    result: LeaveResult = await broker.groups.call(lambda token, now: coordinator.leave(
        token, request.group_id, leaving, now=now))
    return _leave_response(header.api_version, result)


def leave_error(broker, header, request, code: int) -> LeaveGroupResponse:
    return _leave_response(header.api_version, LeaveResult(ErrorCode(code)))


# -- DescribeGroups / ListGroups / DeleteGroups -------------------------------------------
async def handle_describe(broker, header, request) -> DescribeGroupsResponse:
    R = DescribeGroupsResponse
    wanted = list(request.groups)
    allowed = [g for g in wanted if group_allowed(broker, AclOperation.DESCRIBE, g)]
    described = {g.group_id: g for g in broker.groups.coordinator.describe(allowed)}
    with_ops = header.api_version >= 3 and request.include_authorized_operations
    groups = []
    for name in wanted:
        g = described.get(name)
        if g is None:
            groups.append(_described_error(name, NOT_AUTHORIZED))
            continue
        ops = (authorized_operations(broker, ResourceType.GROUP, name) if with_ops
               else AUTHORIZED_OPERATIONS_OMITTED)
        groups.append(R.DescribedGroup(
            error_code=g.error, group_id=g.group_id, group_state=g.state, protocol_type=g.protocol_type,
            protocol_data=g.protocol, authorized_operations=ops,
            members=[R.DescribedGroupMember(member_id=m.member_id, group_instance_id=m.group_instance_id,
                                            client_id=m.client_id, client_host=m.client_host,
                                            member_metadata=m.metadata, member_assignment=m.assignment)
                     for m in g.members]))
    return R(throttle_time_ms=0, groups=groups)


def _described_error(group: str, code: int):
    return DescribeGroupsResponse.DescribedGroup(error_code=code, group_id=group, group_state="", protocol_type="",
                                                 protocol_data="", members=[])


def describe_error(broker, header, request, code: int) -> DescribeGroupsResponse:
    return DescribeGroupsResponse(throttle_time_ms=0, groups=[_described_error(g, code) for g in request.groups])


CLASSIC_GROUP_TYPE = "classic"  # every group here speaks the classic rebalance protocol


async def handle_list(broker, header, request) -> ListGroupsResponse:
    """ListGroups v0-5: v4 filters by state (KIP-518, case-insensitive), v5 by type (KIP-848)."""
    R = ListGroupsResponse
    types = {t.lower() for t in getattr(request, "types_filter", None) or ()}
    if types and CLASSIC_GROUP_TYPE not in types:
        return R(throttle_time_ms=0, error_code=0, groups=[])
    result = broker.groups.coordinator.list_groups(getattr(request, "states_filter", None) or None)
    # DESCRIBE on the cluster lists every group; otherwise those the caller may describe.
    everything = cluster_allowed(broker, AclOperation.DESCRIBE)
    return R(throttle_time_ms=0, error_code=result.error,
             groups=[R.ListedGroup(group_id=g.group_id, protocol_type=g.protocol_type, group_state=g.state,
                                   group_type=CLASSIC_GROUP_TYPE) for g in result.groups
                     if everything or group_allowed(broker, AclOperation.DESCRIBE, g.group_id)])


def list_error(broker, header, request, code: int) -> ListGroupsResponse:
    return ListGroupsResponse(throttle_time_ms=0, error_code=code, groups=[])


async def handle_delete(broker, header, request) -> DeleteGroupsResponse:
    R = DeleteGroupsResponse
    coordinator = broker.groups.coordinator
    names = list(request.group_names)
    allowed = [g for g in names if group_allowed(broker, AclOperation.DELETE, g)]
    codes = {g: NOT_AUTHORIZED for g in names}
    if allowed:
        result = await broker.groups.call(lambda token, now: coordinator.delete_groups(token, allowed, now=now))
        codes.update(result.results)
    return R(throttle_time_ms=0, results=[R.DeletableGroupResult(group_id=g, error_code=codes[g])
                                          for g in names])


def delete_error(broker, header, request, code: int) -> DeleteGroupsResponse:
    R = DeleteGroupsResponse
    return R(throttle_time_ms=0, results=[R.DeletableGroupResult(group_id=g, error_code=code)
                                          for g in request.group_names])
