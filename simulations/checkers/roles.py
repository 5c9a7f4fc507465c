"""The Raft checker's in-memory poll: every live node's role, epoch and high watermark.

It runs every 20 ms of simulated time (or after every task step), so it reads each
node's `RaftCore.role_summary()` — a five-field tuple — rather than `status()`, which
builds a frozen dataclass with per-replica lists the checker never looks at. A node's
role change is recorded in the trace (once per change, so the trace tells who led when).
"""
from __future__ import annotations

import trio

from raft.quorum_state import Role

__all__ = ["RolePoller"]


class RolePoller:
    def __init__(self, cluster):
        self.cluster = cluster  # simulations.cluster.SimCluster: its hosts, checker and trace
        self._roles: dict[int, tuple] = {}  # node -> (incarnation, role, epoch, leader) last traced

    def poll(self) -> None:
        cluster = self.cluster
        checker, trace = cluster.checker, cluster.trace
        checker.now = trio.current_time()
        for node_id, host in sorted(cluster.hosts.items()):
            if not host.up or host.node is None:
                continue
            driver = host.node.driver
            if driver is None:
                continue
            st = driver.core.role_summary()
            checker.observe(node_id, host.incarnation, st.role, st.epoch, st.high_watermark)
            changes = driver.core.voter_history.changes
            if changes and st.role is Role.LEADER:
                checker.observe_leader_voter_changes(node_id, st.high_watermark, [o for o, _ in changes])
            role = (host.incarnation, st.role, st.epoch, st.leader_id)
            if self._roles.get(node_id) != role:
                self._roles[node_id] = role
                trace.record(host.name, "role", role=st.role.value, epoch=st.epoch, leader=st.leader_id,
                             hw=st.high_watermark, end=st.log_end_offset)
