"""The broker side of the metadata log: a Raft observer's state machine feeding MetadataLoader.

`MetadataFollower` is what the broker's Raft driver applies committed entries to. It turns
them into whole batches (metadata.log_format) and hands them to the `MetadataLoader`, which
publishes (delta, image) pairs to the broker's publishers — but only once the loader has
caught up to the *leader's* high watermark. A follower's own Raft HW is capped at its log
end, so it cannot say how far behind we are; the leader's HW comes from the Fetch responses
themselves, read on their way into the driver by `LeaderHighWatermarkTap`. On the leader
itself (a combined node) the committed HW is the leader's.
"""
from __future__ import annotations

import logging
from typing import Callable, Sequence

from metadata.image import MetadataImage
from metadata.loader import MetadataLoader, MetadataPublisher
from metadata.log_format import (
    BatchAssembler, CommittedBatch, ControlEntry, decode_snapshot, encode_snapshot,
)
from metadata.controller.state_machine import SnapshotSchedule
from raft.entry import Entry
from raft.messages import FetchResponse

__all__ = ["MetadataFollower", "LeaderHighWatermarkTap"]

log = logging.getLogger("raftkafka.metadata.follower")


class MetadataFollower:
    def __init__(self, loader: MetadataLoader | None = None, *,
                 is_leader: Callable[[], bool] = lambda: False,
                 schedule: SnapshotSchedule | None = None):
        self.loader = loader or MetadataLoader()
        self.is_leader = is_leader
        self.schedule = schedule
        self._assembler = BatchAssembler()
        self.leader_high_watermark = -1
        self.loaded_snapshot: tuple[int, int] | None = None  # the last snapshot restored

    # ------------------------------------------------------------ public API
    def add_publisher(self, publisher: MetadataPublisher) -> None:
        """Install a publisher: once caught up it gets the full state, then every change."""
        self.loader.install(publisher)

    @property
    def image(self) -> MetadataImage:
        """The last published image."""
        return self.loader.image

    @property
    def metadata_offset(self) -> int:
        """Offset of the last committed metadata record applied (what heartbeats report)."""
        return self.loader.last_offset

    @property
    def caught_up(self) -> bool:
        return self.loader.caught_up

    def observe_leader_high_watermark(self, high_watermark: int) -> None:
        if high_watermark > self.leader_high_watermark:
            self.leader_high_watermark = high_watermark
            self.loader.set_high_watermark(high_watermark)

    # ------------------------------------------------------------ StateMachine
    def restore(self, snapshot_id: tuple[int, int], data: bytes | None) -> None:
        if not data:
            self._assembler.reset()
            return
        contents = decode_snapshot(data)
        self.loader.load_snapshot(contents.image_offset + 1, contents.image_epoch,
                                  contents.records)
        self._assembler.reset(contents.open_epoch, contents.open_records)
        self.loaded_snapshot = tuple(snapshot_id)
        log.info("metadata loaded from snapshot %s (image offset %d)", tuple(snapshot_id),
                 contents.image_offset)

    def apply(self, entries: list[Entry], high_watermark: int) -> None:
        self.apply_items(self._assembler.feed(entries), high_watermark)

    def apply_items(self, items: Sequence[CommittedBatch | ControlEntry],
                    high_watermark: int) -> None:
        records = 0
        for item in items:
            if isinstance(item, CommittedBatch):
                self.loader.handle_commit(item.last_offset, item.epoch, item.records)
                records += len(item.records)
            else:  # control entries move the offset too: the HW is often right after one
                self.loader.handle_commit(item.offset, item.epoch, [])
        if self.is_leader():
            self.observe_leader_high_watermark(high_watermark)
        if self.schedule is not None and records:
            self.schedule.count(records)

    def snapshot(self) -> bytes:
        data = encode_snapshot(self._current_image(), self._assembler.open_epoch,
                               self._assembler.open_records)
        if self.schedule is not None:
            self.schedule.snapshot_taken()
        return data

    def _current_image(self) -> MetadataImage:
        # Everything delivered, published or not (the loader holds back until caught up).
        pending = getattr(self.loader, "_pending", None)
        return self.loader.image if pending is None else pending.apply()


class LeaderHighWatermarkTap:
    """Stands in for the driver's inbox channel: notes the leader's HW from each Fetch
    response, then passes every message on unchanged."""

    def __init__(self, inbox, follower: MetadataFollower):
        self.inbox = inbox
        self.follower = follower

    def send_nowait(self, item) -> None:
        self.inbox.send_nowait(item)  # first, so a full inbox drops the note with the message
        msg = item[1]
        if type(msg) is FetchResponse and msg.error == 0 and msg.high_watermark >= 0:
            self.follower.observe_leader_high_watermark(msg.high_watermark)
