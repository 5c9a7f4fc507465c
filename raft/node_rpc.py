"""Client RPCs a controller answers about its quorum: DescribeQuorum, the voter changes
(AddRaftVoter, RemoveRaftVoter, UpdateRaftVoter) and the diagnostic append.

The diagnostic append writes opaque entries into the log, so it is served only by a node
that merely replicates (`diagnostic_append`: the recording state machine of Raft-only
tests and benchmarks, `controller.state.machine=recording`); a node whose log is the
cluster metadata refuses it with INVALID_REQUEST.

Both are meant for the leader. A follower that knows the leader relays the
request there once (the relayed form is never relayed again, so two nodes with
stale views cannot bounce a request between them) and passes the answer back;
otherwise it answers NOT_LEADER with the leader it knows, like Kafka.
"""
from __future__ import annotations

import dataclasses
import logging

import trio

from raft import codec
from raft.driver import ProposalFailed, RaftDriver
from raft.messages import DescribeQuorumRequest, DescribeQuorumResponse, ReplicaState
from raft.node_client import ConnectionLost, RpcClient
from raft.quorum_state import Role
from raft.rpc_authentication import open_rpc_stream
from raft.voter_set import Voter
from storage.env import Env
from storage.raft_log import MAX_ENTRY_BYTES
from wire.error_codes import ErrorCode

__all__ = ["QuorumService", "describe_from_status"]

log = logging.getLogger("raftkafka.raft.rpc")

FORWARD_TIMEOUT = 10.0
MAX_APPEND_PAYLOADS = 10_000
VOTER_CHANGE_TIMEOUT = 5.0  # when the request names none (Kafka's AddRaftVoter carries TimeoutMs)
UPDATE_VOTER_PERIOD = 1.0  # s between UpdateRaftVoter attempts while the set records another endpoint


def voter_change(request):
    """The core call a voter-change request asks for, or None if its fields are out of range."""
    if not (0 <= request.voter_id < 2**31 and request.directory_id and len(request.directory_id) < 64):
        return None
    if isinstance(request, codec.RemoveVoterRequest):
        return lambda core, now: core.remove_voter(request.voter_id, request.directory_id, now)
    if not (0 < request.port < 65536 and 0 < len(request.host) < 256):
        return None
    voter = Voter(request.voter_id, request.directory_id, request.host, request.port)
    if isinstance(request, codec.AddVoterRequest):
        return lambda core, now: core.add_voter(voter, now)
    return lambda core, now: core.update_voter(voter, now)


def describe_from_status(status, cluster_id: str, now: float) -> DescribeQuorumResponse:
    def replica(r) -> ReplicaState:
        if r.replica_id == status.node_id:
            age = 0  # the leader is always caught up with itself
        else:
            age = -1 if r.last_fetch_time is None else max(0, int((now - r.last_fetch_time) * 1000))
        return ReplicaState(r.replica_id, r.log_end_offset, age, r.directory_id)

    return DescribeQuorumResponse(
        cluster_id,
        ErrorCode.NONE,
        status.epoch,
        status.leader_id,
        status.high_watermark,
        voters=[replica(r) for r in status.voters],
        observers=[replica(r) for r in status.observers],
    )


class QuorumService:
    def __init__(self, env: Env, driver: RaftDriver, *, cluster_id: str, node_id: int, addresses: dict,
                 diagnostic_append: bool = False, tls=None, login=None):
        self.env = env
        self.diagnostic_append = diagnostic_append
        self.driver = driver
        self.cluster_id = cluster_id
        self.node_id = node_id
        self.addresses = addresses  # node id -> (host, port) of its controller listener
        self.tls = tls  # storage.tls.TlsContext to reach them with, if the listener is TLS
        self.login = login  # SaslCredentials when the controller listener is SASL
        self._clients: dict[int, RpcClient] = {}
        self._nursery: trio.Nursery | None = None
        self._updating_endpoint = False  # _record_own_endpoint is running

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    def recheck_own_endpoint(self) -> None:
        """The node's endpoint became known, or the voter set changed: if the set in our log
        records another controller endpoint for this voter (RaftCore.endpoint_update), send
        UpdateRaftVoter until it records this one. Nothing runs while they agree."""
        if not self._updating_endpoint and self._nursery is not None \
                and self.driver.core.endpoint_update() is not None:
            self._updating_endpoint = True
            self._nursery.start_soon(self._record_own_endpoint)

    async def _record_own_endpoint(self) -> None:
        """Through the leader's core like an operator's request; again every UPDATE_VOTER_PERIOD
        while our log's set does not have it (no leader yet, the change not fetched yet)."""
        try:
            while (voter := self.driver.core.endpoint_update()) is not None:
                request = codec.UpdateVoterRequest(self.cluster_id, self.driver.status().epoch, voter.node_id,
                                                   voter.directory_id, voter.host, voter.port)
                reply = await self.handle(request)
                log.info("node %d: asked the leader to record controller endpoint %s:%d for it: %s %s",
                         self.node_id, voter.host, voter.port, ErrorCode.of(reply.error).name,
                         getattr(reply, "message", ""))
                await self.env.sleep(UPDATE_VOTER_PERIOD)
        finally:
            self._updating_endpoint = False

    async def handle(self, request):
        status = self.driver.status()
        if isinstance(request, codec.ForwardedDescribeQuorum) or (
            isinstance(request, DescribeQuorumRequest) and status.leader_id in (None, self.node_id)
        ):
            return self._describe(status)
        if isinstance(request, DescribeQuorumRequest):
            return await self._forward(status, codec.ForwardedDescribeQuorum(self.cluster_id), request)
        if isinstance(request, codec.DiagAppendRequest) and self.diagnostic_append:
            return await self._append(status, request)
        if isinstance(request, codec.VOTER_CHANGE_REQUESTS):
            return await self._change_voters(status, request)
        return codec.ErrorResponse(ErrorCode.INVALID_REQUEST, f"{type(request).__name__} is not served here")

    def _describe(self, status):
        if status.role is not Role.LEADER:
            return codec.error_response_for(
                DescribeQuorumRequest(self.cluster_id), ErrorCode.NOT_LEADER_OR_FOLLOWER,
                cluster_id=self.cluster_id, epoch=status.epoch, leader_id=status.leader_id,
            )
        return describe_from_status(status, self.cluster_id, self.env.now())

    async def _append(self, status, request: codec.DiagAppendRequest):
        def fail(error: int, why: str, epoch=status.epoch, leader=status.leader_id):
            return codec.DiagAppendResponse(self.cluster_id, error, epoch, leader, -1, why)

        payloads = request.payloads
        if not payloads or len(payloads) > MAX_APPEND_PAYLOADS:
            return fail(ErrorCode.INVALID_REQUEST, f"1..{MAX_APPEND_PAYLOADS} payloads per append")
        if max(map(len, payloads)) > MAX_ENTRY_BYTES:
            return fail(ErrorCode.INVALID_REQUEST, f"an entry holds at most {MAX_ENTRY_BYTES} bytes")
        if status.role is not Role.LEADER:
            if request.forwarded or status.leader_id is None or status.leader_id == self.node_id:
                return fail(ErrorCode.NOT_LEADER_OR_FOLLOWER, "not the leader")
            relayed = codec.DiagAppendRequest(self.cluster_id, payloads, forwarded=True)
            return await self._forward(status, relayed, request)
        try:
            _, last = await self.driver.propose(payloads)
        except ProposalFailed as e:
            return fail(ErrorCode.NOT_LEADER_OR_FOLLOWER, str(e), e.epoch, e.leader_id)
        return codec.DiagAppendResponse(self.cluster_id, ErrorCode.NONE, status.epoch, self.node_id, last)

    async def _change_voters(self, status, request):
        """AddRaftVoter / RemoveRaftVoter / UpdateRaftVoter: decided by the leader's core
        (raft/membership.py), answered once the change committed or `timeout` passed."""
        def fail(error: int, why: str, epoch=status.epoch, leader=status.leader_id):
            return codec.VoterChangeResponse(self.cluster_id, error, epoch, leader, why)

        if status.role is not Role.LEADER:
            if request.forwarded or status.leader_id is None or status.leader_id == self.node_id:
                return fail(ErrorCode.NOT_LEADER_OR_FOLLOWER, "not the leader of the metadata quorum")
            return await self._forward(status, dataclasses.replace(request, forwarded=True), request)
        change = voter_change(request)
        if change is None:
            return fail(ErrorCode.INVALID_REQUEST, "a voter id in 0..2^31-1, a directory id and a port in 1..65535")
        timeout = min(max(getattr(request, "timeout_ms", 0), 0) / 1000 or VOTER_CHANGE_TIMEOUT, FORWARD_TIMEOUT)
        try:
            with self.env.fail_after(timeout):
                result = await self.driver.change_voters(change)
        except trio.TooSlowError:
            return fail(ErrorCode.REQUEST_TIMED_OUT, "the voter change did not commit in time")
        except trio.WouldBlock:
            return fail(ErrorCode.REQUEST_TIMED_OUT, "the quorum is busy; retry")
        except ProposalFailed as e:
            return fail(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"the voter change was lost: {e}", e.epoch, e.leader_id)
        return fail(result.error, result.message, result.epoch if result.epoch >= 0 else status.epoch, self.node_id)

    async def _forward(self, status, relayed, original):
        leader = status.leader_id
        not_leader = codec.error_response_for(
            original, ErrorCode.NOT_LEADER_OR_FOLLOWER, cluster_id=self.cluster_id, epoch=status.epoch, leader_id=leader
        )
        if leader not in self.addresses:
            return not_leader
        try:
            client = await self._client(leader)
            return await client.call(relayed, timeout=FORWARD_TIMEOUT)
        except (OSError, ConnectionLost, trio.TooSlowError) as e:
            log.info("forwarding %s to leader %d failed: %s", type(original).__name__, leader, e)
            broken = self._clients.pop(leader, None)
            if broken is not None:
                await trio.aclose_forcefully(broken.stream)  # ends its reader task
            return not_leader

    async def _client(self, node_id: int) -> RpcClient:
        """A shared connection to `node_id`, opened on first use and dropped once it breaks."""
        client = self._clients.get(node_id)
        if client is not None and not client.lost:
            return client
        host, port = self.addresses[node_id]
        with self.env.fail_after(FORWARD_TIMEOUT):
            stream = await open_rpc_stream(self.env, host, port, tls=self.tls, login=self.login)
        client = self._clients[node_id] = RpcClient(self.env, stream)
        self._nursery.start_soon(client.run)
        return client
