"""Append unique values to the metadata log through the controllers' diagnostic append RPC.

The client runs on its own simulated host ("client") and uses the real RPC client
(raft.node_client) over the simulated network, like the CLI would. Each attempt
carries a fresh value, so an answer that never comes (timeout, reset) is simply
indeterminate: the value may or may not be committed, and no check depends on it.
An OK answer is an acknowledgement: the checker then requires that value at the
returned offset forever.
"""
from __future__ import annotations

import random

import trio

from raft.codec import DiagAppendRequest
from raft.node_client import ConnectionLost, open_client
from simulations.checkers.raft import RaftChecker
from simulations.cluster import CLUSTER_ID
from simulations.trace import Trace
from wire.error_codes import ErrorCode

__all__ = ["AppendWorkload"]

CALL_TIMEOUT = 3.0


class AppendWorkload:
    def __init__(self, env, cluster, checker: RaftChecker, trace: Trace, rng: random.Random,
                 *, mean_gap: float = 0.05, batch_max: int = 3):
        self.env = env
        self.cluster = cluster
        self.checker = checker
        self.trace = trace
        self.rng = rng
        self.mean_gap = mean_gap
        self.batch_max = batch_max
        self.sent = 0
        self.acked = 0
        self.failed = 0
        self.indeterminate = 0
        self._target = rng.choice(cluster.voters)
        self._seq = 0

    async def run(self, until: float) -> None:
        """Keep appending until sim time `until`."""
        while trio.current_time() < until:
            await self._session(until, stop_after_ack=False)

    async def append_until_acked(self, deadline: float) -> float | None:
        """Liveness probe: keep trying until one append is acknowledged; its offset, or None."""
        while trio.current_time() < deadline:
            offset = await self._session(deadline, stop_after_ack=True)
            if offset is not None:
                return offset
        return None

    async def _session(self, until: float, *, stop_after_ack: bool) -> int | None:
        """One connection to the current target; returns an acked offset if stop_after_ack."""
        host, port = self.cluster.address(self._target)
        acked_offset = None
        try:
            with trio.move_on_at(until):
                async with open_client(self.env, host, port, connect_timeout=1.0) as client:
                    while trio.current_time() < until:
                        outcome, offset = await self._append_one(client)
                        if outcome == "ok" and stop_after_ack:
                            acked_offset = offset
                            break
                        if outcome != "ok":
                            break
                        await trio.sleep(self.rng.expovariate(1.0 / self.mean_gap))
        except (OSError, trio.TooSlowError, ConnectionLost):
            self._rotate(None)
        if acked_offset is None:
            await trio.sleep(0.05 + 0.1 * self.rng.random())
        return acked_offset

    async def _append_one(self, client) -> tuple[str, int]:
        count = self.rng.randint(1, self.batch_max)
        payloads = []
        for _ in range(count):
            self._seq += 1
            payloads.append(b"v%d" % self._seq)
        self.sent += count
        try:
            reply = await client.call(DiagAppendRequest(CLUSTER_ID, payloads), timeout=CALL_TIMEOUT)
        except (trio.TooSlowError, ConnectionLost, OSError):
            self.indeterminate += count
            self.trace.record("client", "append_unknown", first=self._seq - count + 1, count=count)
            self._rotate(None)
            return "unknown", -1
        error = getattr(reply, "error", ErrorCode.INVALID_REQUEST)
        if error == ErrorCode.NONE:
            first = reply.last_offset - count + 1
            for i, payload in enumerate(payloads):
                self.checker.on_ack(payload, first + i)
            self.acked += count
            self.trace.record("client", "append_ok", first=self._seq - count + 1, count=count,
                              offset=reply.last_offset, epoch=reply.epoch)
            return "ok", reply.last_offset
        self.failed += count
        self.trace.record("client", "append_error", error=error, leader=getattr(reply, "leader_id", None))
        self._rotate(getattr(reply, "leader_id", None))
        return "error", -1

    def _rotate(self, hint: int | None) -> None:
        voters = self.cluster.voters
        if hint in voters and hint != self._target:
            self._target = hint
        else:
            self._target = voters[(voters.index(self._target) + 1) % len(voters)]
