"""Broker session checker: fencing and re-registration keep the promises brokers rely on.

- LeasedBrokerFenced: the committed metadata never shows a broker fenced at the epoch of a
  session lease it holds (metadata.broker_lifecycle.holds_session_lease). The controller may
  fence a broker early when its controller connection closes (connection_grace), but only
  once that broker had a grace to heartbeat again: a broker that did so on a new connection
  holds a lease the controller must honour. (A broker that asked to be fenced or to shut
  down is fenced at its own request.)
- LiveRegistrationReplaced: a broker's registration is replaced by another incarnation only
  when the registered incarnation no longer runs (its restart proves it with the data dir
  lock: metadata.data_dir_lock; or its session lapsed). The simulation knows which
  processes run, including a duplicate started on the same disk (the "duplicate" fault).
"""
from __future__ import annotations

from simulations.checkers.metadata import MetadataChecker
from simulations.checkers.raft import RaftChecker

__all__ = ["SessionChecker"]


class SessionChecker:
    def __init__(self, raft: RaftChecker, metadata: MetadataChecker):
        self.raft = raft
        self.metadata = metadata
        self._registered: dict[int, object] = {}  # broker -> incarnation id last seen committed
        self.replacements = 0

    def observe(self, cluster) -> None:
        image = self.metadata.committed_image
        running: dict[int, set] = {}
        for node_id, host in sorted(cluster.hosts.items()):
            if not host.up or not host.is_broker:
                continue
            nodes = [host.node, *host.duplicates]
            running[node_id] = {n.app.broker.lifecycle.incarnation_id for n in nodes
                                if n.app is not None and n.app.broker is not None
                                and n.app.broker.lifecycle is not None}
            role = host.broker_role()
            lifecycle = role.lifecycle if role is not None else None
            if (lifecycle is None or lifecycle.want_fence or lifecycle.shutting_down
                    or not lifecycle.holds_session_lease()):
                continue
            reg = image.brokers.get(node_id)
            if reg is not None and reg.epoch == lifecycle.broker_epoch and reg.fenced:
                self.raft.violate("LeasedBrokerFenced", f"broker {node_id} epoch {reg.epoch} is fenced in the "
                                  f"committed metadata while it holds its session lease")
        for broker_id, reg in sorted(image.brokers.items()):
            before = self._registered.get(broker_id)
            self._registered[broker_id] = reg.incarnation_id
            if before is None or before == reg.incarnation_id:
                continue
            self.replacements += 1
            if before in running.get(broker_id, ()):
                self.raft.violate("LiveRegistrationReplaced", f"broker {broker_id}: incarnation {before} was "
                                  f"replaced by {reg.incarnation_id} while it still runs")
