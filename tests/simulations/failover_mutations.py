"""Deliberate bugs in fast failover (docs/failover.md), patched into the real node code:
fencing on a closed controller connection, replacing the registration of a dead
incarnation, and shrinking the ISR when a follower's fetch connection closes.

Each is a function taking a monkeypatch; tests/simulations/catalogue.py lists them with
the rule each breaks.
"""
from __future__ import annotations

import metadata.data_dir_lock
import raftkafka.node.assembly
from broker.isr import IsrState
from broker.partition import Partition
from metadata.controller.connection_grace import ConnectionGrace


def reconnect_keeps_close_fence(monkeypatch) -> None:
    """A heartbeat of the broker on a new connection does not cancel the fence its closed
    connection started: a broker that reconnected within the grace is fenced anyway."""
    original = ConnectionGrace.heard

    def heard(self, connection, broker_id, broker_epoch):
        pending = self._deadlines.get(broker_id)
        original(self, connection, broker_id, broker_epoch)
        if pending is not None:
            self._deadlines[broker_id] = pending

    monkeypatch.setattr(ConnectionGrace, "heard", heard)


class _UnlockedFileSystem:
    """A FileSystem whose lock never refuses (the file is opened, not locked)."""

    def __init__(self, fs):
        self._fs = fs

    def lock(self, path):
        return self._fs.open(path, create=True)

    def __getattr__(self, name):
        return getattr(self._fs, name)


def data_dir_lock_not_exclusive(monkeypatch) -> None:
    """A node starts on log dirs another running process holds (the lock is read, not
    required): it presents that live incarnation as the dead one it replaces."""
    original = metadata.data_dir_lock.lock_data_dirs
    monkeypatch.setattr(raftkafka.node.assembly, "lock_data_dirs",
                        lambda fs, dirs: original(_UnlockedFileSystem(fs), dirs))


def close_shrink_skips_controller(monkeypatch) -> None:
    """A leader whose follower's fetch connection closed drops it from its ISR at once,
    as if the controller had committed the shrink (no AlterPartition)."""

    def on_follower_connection_closed(self, replica_id):
        state = self.followers.get(replica_id)
        if not self.is_leader or state is None or replica_id not in self.isr_state.isr:
            return []
        state.connection_closed = True
        self.isr_state = IsrState(tuple(r for r in self.isr_state.isr if r != replica_id))
        self.maybe_advance_high_watermark()
        return [replica_id]

    monkeypatch.setattr(Partition, "on_follower_connection_closed", on_follower_connection_closed)


FAILOVER_MUTATIONS = {f.__name__: f for f in (
    reconnect_keeps_close_fence, data_dir_lock_not_exclusive, close_shrink_skips_controller)}
