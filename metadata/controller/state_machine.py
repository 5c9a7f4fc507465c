"""The Raft state machine on controllers: committed metadata entries → the committed image.

The Raft driver calls `restore` (at start, and when the leader ships a snapshot), `apply`
(committed entries, in order) and `snapshot`. This keeps `image`, the last committed
image, which the active controller reverts to when it loses leadership, and notes every
LeaderChange so the controller service can tell when a newly elected leader has replayed
the whole log (its own LeaderChange committed and applied).

On a combined node the same decoded batches also feed the broker's metadata follower
(`follower=`), so the log is decoded once.

Snapshots: besides the driver's own byte threshold, `SnapshotSchedule` asks for one after
`max_records` records or `max_interval` seconds with new records since the last one.
"""
from __future__ import annotations

import logging
from typing import Callable

from metadata.delta import MetadataDelta
from metadata.errors import InvalidRecordError
from metadata.image import EMPTY_IMAGE, MetadataImage
from metadata.log_format import (
    BatchAssembler, CommittedBatch, ControlEntry, decode_snapshot, encode_snapshot,
)
from metadata.snapshot import image_from_records
from raft.entry import Entry

__all__ = ["ControllerStateMachine", "SnapshotSchedule"]

log = logging.getLogger("raftkafka.metadata.controller")


class SnapshotSchedule:
    """Asks the Raft driver for a snapshot by record count or by time.

    The driver snapshots after an apply once `snapshot_interval_bytes` of payload have
    committed since the last one; setting that threshold to 0 makes the very next apply
    take one, and `snapshot_taken` puts it back.
    """

    def __init__(self, now: Callable[[], float], *, max_records: int = 20_000,
                 max_interval: float = 3600.0):
        self.now = now
        self.max_records = max_records
        self.max_interval = max_interval
        self.records_since = 0
        self.last_snapshot_at = now()
        self.snapshots_taken = 0
        self._driver = None
        self._bytes_threshold: int | None = None

    def attach(self, driver) -> None:
        self._driver = driver
        self._bytes_threshold = driver.snapshot_interval_bytes

    def count(self, records: int) -> None:
        self.records_since += records
        due = self.records_since >= self.max_records or (
            self.records_since > 0 and self.now() - self.last_snapshot_at >= self.max_interval)
        if due and self._driver is not None:
            self._driver.snapshot_interval_bytes = 0

    def snapshot_taken(self) -> None:
        self.records_since = 0
        self.last_snapshot_at = self.now()
        self.snapshots_taken += 1
        if self._driver is not None:
            self._driver.snapshot_interval_bytes = self._bytes_threshold


class ControllerStateMachine:
    def __init__(self, *, schedule: SnapshotSchedule | None = None, follower=None,
                 on_leader_change: Callable[[int, int | None], None] | None = None):
        self.image: MetadataImage = EMPTY_IMAGE
        self.applied_end = 0  # exclusive end offset of everything applied (incl. control)
        self.leader_change: tuple[int, int | None] | None = None  # last (epoch, leader_id)
        self.replay_errors: list[tuple[int, str]] = []
        self.schedule = schedule
        self.follower = follower  # a MetadataFollower on combined nodes
        self.on_leader_change = on_leader_change
        self.on_restore: Callable[[], None] | None = None
        self._assembler = BatchAssembler()

    # ------------------------------------------------------------ StateMachine
    def restore(self, snapshot_id: tuple[int, int], data: bytes | None) -> None:
        if data:
            contents = decode_snapshot(data)
            self.image = image_from_records(contents.records, offset=contents.image_offset,
                                            epoch=contents.image_epoch)
            self._assembler.reset(contents.open_epoch, contents.open_records)
        else:
            self.image = EMPTY_IMAGE
            self._assembler.reset()
        self.applied_end = snapshot_id[0]
        if self.follower is not None:
            self.follower.restore(snapshot_id, data)
        if self.on_restore is not None:
            self.on_restore()

    def apply(self, entries: list[Entry], high_watermark: int) -> None:
        items = self._assembler.feed(entries)
        delta: MetadataDelta | None = None
        records = 0
        for item in items:
            if isinstance(item, CommittedBatch):
                delta = delta or MetadataDelta(self.image)
                first = item.last_offset - len(item.records) + 1
                for i, rec in enumerate(item.records):
                    try:
                        delta.replay(rec)
                    except InvalidRecordError as e:  # the log wins; a misfit is a controller bug
                        self.replay_errors.append((first + i, str(e)))
                        log.error("committed record at %d does not apply: %s", first + i, e)
                delta.set_provenance(item.last_offset, item.epoch)
                records += len(item.records)
            elif isinstance(item, ControlEntry) and item.leader_id is not None:
                self.leader_change = (item.epoch, item.leader_id)
        if delta is not None:
            self.image = delta.apply()
        self.applied_end = entries[-1].offset + 1
        if self.follower is not None:
            self.follower.apply_items(items, high_watermark)
        if self.schedule is not None and records:
            self.schedule.count(records)
        if self.on_leader_change is not None and self.leader_change is not None and any(
                isinstance(i, ControlEntry) for i in items):
            self.on_leader_change(*self.leader_change)

    def snapshot(self) -> bytes:
        data = encode_snapshot(self.image, self._assembler.open_epoch,
                               self._assembler.open_records)
        if self.schedule is not None:
            self.schedule.snapshot_taken()
        return data

    @property
    def dropped_batches(self) -> int:
        return self._assembler.dropped_batches
