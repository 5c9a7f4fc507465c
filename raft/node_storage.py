"""The durable state of one Raft replica, under `<data-dir>/__cluster_metadata-0/`:

    quorum-state                                 election state (storage.quorum_state_file)
    <20-digit base offset>.log                   log segments   (storage.raft_log)
    <20-digit end offset>-<10-digit epoch>.checkpoint   snapshots (storage.raft_snapshots)

`NodeStorage.load()` reads it back into the core's starting state (ElectionState +
RaftLog) and reconciles the pieces after a crash: a log that no longer fits the
latest snapshot (a crash between installing a snapshot and dropping the old log)
is reset to start at the snapshot.

Damage is never trusted and never papered over. A snapshot that fails its CRC is
removed with a warning when the log still holds what it covers (an older good
snapshot, or offset 0, plus the log from there). When it does not — the log was
trimmed up to that snapshot — the state it held exists only on the other nodes:
an observer (a broker-only node, which has no vote) starts empty and fetches the
leader's snapshot; a voter refuses to start with one line naming the file (a voter
that forgot its log could help elect a leader lacking committed entries). Damage
inside the log itself is handled the same way (storage.raft_log).
"""
from __future__ import annotations

import logging
import posixpath

from raft.entry import Entry
from raft.log import NO_SNAPSHOT, RaftLog
from raft.state import ElectionState
from storage.env import FileSystem
from storage.meta_properties import DataDirError
from storage.quorum_state_file import QuorumStateFile
from storage.raft_log import DEFAULT_SEGMENT_BYTES, RaftLogStore, records_from
from storage.raft_snapshots import SnapshotStore

__all__ = ["NodeStorage", "METADATA_DIR"]

log = logging.getLogger(__name__)

METADATA_DIR = "__cluster_metadata-0"


class NodeStorage:
    def __init__(self, fs: FileSystem, data_dir: str, *, segment_bytes: int = DEFAULT_SEGMENT_BYTES):
        self.fs = fs
        self.directory = posixpath.join(data_dir, METADATA_DIR)
        self.segment_bytes = segment_bytes
        self.quorum_state = QuorumStateFile(fs, self.directory)
        self.snapshots = SnapshotStore(fs, self.directory)
        self.log: RaftLogStore | None = None

    async def load(self, *, refetch_damaged: bool = False) -> tuple[ElectionState, RaftLog]:
        """Open everything (recovering torn tails) and build the core's starting state.

        Raises storage errors (CorruptQuorumStateError, DataDirError, ...) for a damaged
        directory. `refetch_damaged` (observers only): state lost to a damaged snapshot is
        fetched again from the leader instead of refused.
        """
        self.fs.makedirs(self.directory)
        stored = self.quorum_state.read()
        state = ElectionState() if stored is None else ElectionState(*stored)
        latest = self.snapshots.latest()
        snapshot_id, snapshot = (tuple(latest[0]), latest[1]) if latest else (NO_SNAPSHOT, None)
        damaged = [sid for sid in self.snapshots.ids() if tuple(sid) > snapshot_id]
        self.log, records = await RaftLogStore.open(
            self.fs, self.directory, start_offset=snapshot_id[0], segment_bytes=self.segment_bytes,
            cut_damage=refetch_damaged,
        )
        if self.log.start_offset > snapshot_id[0]:
            # Offsets [snapshot end, log start) are neither in a snapshot nor in the log.
            what = (f"metadata snapshot {self.snapshots.path(damaged[-1])} is damaged" if damaged else
                    f"no metadata snapshot covers offsets {snapshot_id[0]}..{self.log.start_offset - 1}")
            if not refetch_damaged:
                raise DataDirError(f"{what} and the metadata log no longer holds those entries: refusing to "
                                   "start (restore the file, or re-create this node's metadata from a healthy quorum)")
            log.warning("%s and the metadata log no longer holds those entries: fetching the metadata "
                        "again from the leader", what)
            await self.log.reset(0)
            for sid in self.snapshots.ids():
                self.fs.remove(self.snapshots.path(sid))
            await self.fs.sync_dir(self.directory)
            records, snapshot_id, snapshot, damaged = [], NO_SNAPSHOT, None, []
        for sid in damaged:
            log.warning("metadata snapshot %s is damaged; removed (the metadata log still holds its entries)",
                        self.snapshots.path(sid))
            self.fs.remove(self.snapshots.path(sid))
        entries = [Entry(r.offset, r.epoch, r.payload, r.control) for r in records]
        raft_log = RaftLog(entries, snapshot_id=snapshot_id, snapshot=snapshot)
        if (raft_log.start_offset, raft_log.end_offset) != (self.log.start_offset, self.log.end_offset):
            # The snapshot supersedes the log on disk: make the files agree with memory.
            await self.log.reset(raft_log.start_offset)
            raft_log = RaftLog([], snapshot_id=snapshot_id, snapshot=snapshot)
        if damaged:
            await self.fs.sync_dir(self.directory)
        if snapshot_id != NO_SNAPSHOT:
            await self.snapshots.delete_older_than(snapshot_id)
        return state, raft_log

    # Mirrors of the core's Actions, each durable when it returns.
    async def persist_state(self, state: ElectionState) -> None:
        await self.quorum_state.write(state.epoch, state.leader_id, state.voted_id)

    async def truncate_to(self, end_offset: int) -> None:
        await self.log.truncate_to(end_offset)

    async def install_snapshot(self, snapshot_id: tuple[int, int], data: bytes) -> None:
        # Snapshot first: a crash after it leaves a log that load() resets to the snapshot.
        await self.snapshots.write(snapshot_id, data)
        await self.log.reset(snapshot_id[0])
        await self.snapshots.delete_older_than(snapshot_id)

    async def append(self, entries: list[Entry]) -> int:
        self.log.append(records_from(entries))
        await self.log.flush()
        return self.log.end_offset

    async def write_snapshot(self, snapshot_id: tuple[int, int], data: bytes) -> None:
        await self.snapshots.write(snapshot_id, data)

    async def delete_before(self, offset: int) -> None:
        await self.log.delete_before(offset)
        ids = [s for s in self.snapshots.ids() if s[0] <= offset]
        if ids:
            await self.snapshots.delete_older_than(ids[-1])

    def close(self) -> None:
        if self.log is not None:
            self.log.close()
