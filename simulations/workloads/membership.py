"""Controller membership changes (KIP-853) under faults: add and remove voters through the real
AddVoter/RemoveVoter RPCs while the append workload and the nemesis run.

The quorum starts as the cluster's initial voters, with spare controllers fetching as
observers. Every round the workload reads the voter set of whoever leads now (read-only, as
the checkers read roles) and asks a random controller to change it by one: add a controller
that is not a voter (by its current directory id, so a wiped voter comes back as the new
replica it is), or remove a voter (the leader too), keeping between `min_voters` and every
controller: a removal is asked only while the set keeps `min_voters` after every removal still
unanswered (two asked of one set of three would leave two voters; if one of them is a wiped
voter's old replica, no node can be elected). Refusals (not caught up, previous change
uncommitted, no leader) and lost answers are expected: the next round decides again from what
the leader holds.
"""
from __future__ import annotations

import random

import trio

from raft.codec import AddVoterRequest, RemoveVoterRequest
from raft.node_client import ConnectionLost, open_client
from raft.quorum_state import Role
from simulations.cluster import CLUSTER_ID, CONTROLLER_PORT
from simulations.trace import Trace
from wire.error_codes import ErrorCode

__all__ = ["MembershipWorkload"]

CALL_TIMEOUT = 5.0


class MembershipWorkload:
    def __init__(self, env, cluster, trace: Trace, rng: random.Random, *, mean_gap: float = 0.5,
                 min_voters: int = 3):
        self.env = env
        self.cluster = cluster
        self.trace = trace
        self.rng = rng
        self.mean_gap = mean_gap
        self.min_voters = min_voters
        self.counts = {"asked": 0, "done": 0, "refused": 0, "unknown": 0}
        self.removals_unanswered = 0

    async def run(self, until: float) -> None:
        """Changes are asked without waiting for the previous answer (operators retry, tools
        overlap): the quorum must refuse a change while another is pending."""
        with trio.move_on_at(until):
            async with trio.open_nursery() as nursery:
                while True:
                    await trio.sleep(self.rng.expovariate(1.0 / self.mean_gap))
                    request = self._next_change()
                    if request is not None:
                        nursery.start_soon(self._ask, request)

    def _leader_voters(self):
        """The voter set (Voter tuples) of the node leading now, or None."""
        for _, host in sorted(self.cluster.hosts.items()):
            if host.up and host.node is not None and host.node.driver is not None:
                core = host.node.driver.core
                if core.role is Role.LEADER:
                    return core.voter_set
        return None

    def _next_change(self):
        voters = self._leader_voters()
        if voters is None:
            return None
        ids = {v.node_id for v in voters}
        outside = [n for n in self.cluster.voters if n not in ids]
        if outside and (len(ids) <= self.min_voters or self.rng.random() < 0.5):
            node_id = self.rng.choice(outside)
            host = self.cluster.hosts[node_id]
            return AddVoterRequest(CLUSTER_ID, int(CALL_TIMEOUT * 1000), node_id,
                                   self.cluster.directory_id(host, host.wipes), host.name, CONTROLLER_PORT)
        if len(ids) - self.removals_unanswered > self.min_voters:
            voter = self.rng.choice(list(voters))
            return RemoveVoterRequest(CLUSTER_ID, voter.node_id, voter.directory_id)
        return None

    async def _ask(self, request) -> None:
        kind = "add" if isinstance(request, AddVoterRequest) else "remove"
        if kind == "remove":
            self.removals_unanswered += 1
            try:
                await self._call(kind, request)
            finally:
                self.removals_unanswered -= 1
        else:
            await self._call(kind, request)

    async def _call(self, kind: str, request) -> None:
        target = self.rng.choice(self.cluster.voters)
        host, port = self.cluster.address(target)
        self.counts["asked"] += 1
        reply = None
        try:
            async with open_client(self.env, host, port, connect_timeout=1.0) as client:
                try:  # inside the block: what the call raises must not reach the client's nursery
                    reply = await client.call(request, timeout=CALL_TIMEOUT + 1.0)
                except (OSError, trio.TooSlowError, ConnectionLost):
                    pass
        except (OSError, trio.TooSlowError, ConnectionLost):
            pass
        if reply is None:
            self.counts["unknown"] += 1
            self.trace.record("client", f"{kind}_voter_unknown", voter=request.voter_id)
            return
        error = getattr(reply, "error", ErrorCode.INVALID_REQUEST)
        if error == ErrorCode.NONE:
            self.counts["done"] += 1
        else:
            self.counts["refused"] += 1
        self.trace.record("client", f"{kind}_voter", voter=request.voter_id, error=int(error))
