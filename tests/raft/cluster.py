"""An in-process Raft cluster for tests: real RaftCores over a modelled disk and network.

`SimNode` plays the driver: it carries out each `Actions` in the contract's order
against `SimDisk`, which keeps only what was fsynced (the quorum-state and the log;
a crash loses whatever was queued but not yet carried out). `Network` is a plain
message queue with partitions; the transcript and random-cluster tests decide when
messages are delivered and when time passes.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

from raft.actions import Actions
from raft.config import RaftConfig
from raft.core import RaftCore
from raft.entry import Entry
from raft.log import NO_SNAPSHOT, RaftLog
from raft.state import ElectionState

CLUSTER_ID = "test-cluster"


@dataclass
class SimDisk:
    """What survives a crash: fsynced quorum-state, log entries and the latest snapshot."""

    state: ElectionState = field(default_factory=ElectionState)
    entries: list[Entry] = field(default_factory=list)
    snapshot_id: tuple[int, int] = NO_SNAPSHOT
    snapshot: bytes | None = None

    def end_offset(self) -> int:
        return self.entries[-1].offset + 1 if self.entries else self.snapshot_id[0]

    def truncate_to(self, end: int) -> None:
        self.entries = [e for e in self.entries if e.offset < end]

    def append(self, entries: list[Entry]) -> None:
        assert not entries or entries[0].offset == self.end_offset(), (entries[0], self.end_offset())
        self.entries.extend(entries)

    def delete_before(self, offset: int) -> None:
        self.entries = [e for e in self.entries if e.offset >= offset]


class StateMachine:
    """Applies committed payloads in order; a snapshot is the list of payloads so far."""

    def __init__(self, snapshot_id: tuple[int, int] = NO_SNAPSHOT, snapshot: bytes | None = None):
        # (offset, epoch, payload or None for control entries) after the base snapshot
        self.applied: list[tuple[int, int, bytes | None]] = []
        self.base: tuple[int, int] = snapshot_id
        self.base_data = snapshot or b""

    def apply(self, entries: list[Entry]) -> None:
        for e in entries:
            expected = self.applied[-1][0] + 1 if self.applied else self.base[0]
            assert e.offset == expected, f"applied {e.offset}, expected {expected}"
            self.applied.append((e.offset, e.epoch, None if e.control else e.payload))

    def reset(self, snapshot_id: tuple[int, int], data: bytes) -> None:
        self.applied = []
        self.base, self.base_data = snapshot_id, data

    def applied_end(self) -> int:
        return self.applied[-1][0] + 1 if self.applied else self.base[0]

    def snapshot_bytes(self) -> bytes:
        parts = [self.base_data] if self.base_data else []
        parts += [p for _, _, p in self.applied if p is not None]
        return b"|".join(parts)


class Network:
    """Queued messages (src, dst, msg) and a set of cut links."""

    def __init__(self) -> None:
        self.queue: list[tuple[int, int, object]] = []
        self.cut: set[tuple[int, int]] = set()

    def connected(self, a: int, b: int) -> bool:
        return (a, b) not in self.cut

    def send(self, src: int, dst: int, msg: object) -> None:
        # Cut links drop at delivery time, so transcripts show what was attempted.
        self.queue.append((src, dst, msg))

    def partition(self, groups: list[list[int]]) -> None:
        self.cut.clear()
        for i, g in enumerate(groups):
            for j, h in enumerate(groups):
                if i != j:
                    self.cut.update((a, b) for a in g for b in h)

    def isolate(self, node: int, others: list[int]) -> None:
        for o in others:
            if o != node:
                self.cut.update({(node, o), (o, node)})

    def heal(self) -> None:
        self.cut.clear()


class SimNode:
    def __init__(self, node_id: int, voters: list[int], config: RaftConfig, seed: int, observer=False,
                 directory_id: str = ""):
        self.node_id = node_id
        self.directory_id = directory_id
        self.voters = voters
        self.config = config
        self.observer = observer
        self.rng = random.Random(seed)
        self.disk = SimDisk()
        self.core: RaftCore | None = None
        self.sm = StateMachine()
        self.deadline = float("inf")
        self.incarnation = 0
        self.events: list[str] = []  # what the driver did, for transcripts
        # async_io: Actions wait in `pending` until the modelled disk gets to them, so a
        # crash loses work the core already believes in (unfsynced appends, unsent messages).
        self.async_io = False
        self.pending: list[Actions] = []

    @property
    def alive(self) -> bool:
        return self.core is not None

    def start(self, now: float, net: Network) -> None:
        log = RaftLog(list(self.disk.entries), self.disk.snapshot_id, self.disk.snapshot)
        self.sm = StateMachine(self.disk.snapshot_id, self.disk.snapshot)
        self.incarnation += 1
        self.core = RaftCore(
            node_id=self.node_id,
            voters=self.voters,
            cluster_id=CLUSTER_ID,
            config=self.config,
            state=self.disk.state,
            log=log,
            now=now,
            rng=self.rng,
            observer=self.observer,
            directory_id=self.directory_id,
        )
        self.submit(self.core.tick(now), now, net)

    def crash(self) -> None:
        self.core = None
        self.pending = []
        self.deadline = float("inf")

    def run(self, actions: Actions, now: float, net: Network) -> None:
        """Carry out one Actions in contract order (the driver's job)."""
        nid = self.node_id
        if actions.persist_state is not None:
            self.disk.state = actions.persist_state
            s = actions.persist_state
            self.events.append(f"{nid} persist epoch={s.epoch} leader={s.leader_id} voted={s.voted_id}")
        if actions.truncate_to is not None:
            self.disk.truncate_to(actions.truncate_to)
            self.events.append(f"{nid} truncate to {actions.truncate_to}")
        if actions.install_snapshot is not None:
            sid, data = actions.install_snapshot
            self.disk.snapshot_id, self.disk.snapshot, self.disk.entries = sid, data, []
            self.sm.reset(sid, data)
            self.events.append(f"{nid} install snapshot {sid[0]}@{sid[1]}")
        flushed = None
        if actions.append:
            self.disk.append(actions.append)
            flushed = self.disk.end_offset()
        for dst, msg in actions.send:
            net.send(nid, dst, msg)
        if actions.committed:
            self.sm.apply(actions.committed)
            first, last = actions.committed[0].offset, actions.committed[-1].offset
            self.events.append(f"{nid} commit {first}..{last} hw={actions.high_watermark}")
        if actions.delete_before is not None:
            self.disk.delete_before(actions.delete_before)
        if not self.async_io:
            self.deadline = actions.deadline  # (async: the latest submitted Actions decides)
        if flushed is not None and self.core is not None:
            self.submit(self.core.on_flushed(flushed, now), now, net)

    def submit(self, actions: Actions, now: float, net: Network) -> None:
        """Hand an Actions to the (possibly slow) driver."""
        if self.async_io:
            self.pending.append(actions)
            self.deadline = actions.deadline
        else:
            self.run(actions, now, net)

    def take_events(self) -> list[str]:
        out, self.events = self.events, []
        return out
