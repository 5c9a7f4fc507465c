"""The pure half of the broker-side MetadataLoader.

Fed committed log batches and snapshots (in log order) by the Raft wiring, it keeps the
current image and hands each publisher (replica manager, metadata cache, group coordinator,
snapshot writer) a (delta, image) pair per committed batch, in order. Nothing is published
until the loader has caught up to the leader's high watermark (Kafka's stillNeedToCatchUp):
until then batches accumulate in one delta. A publisher's first update is always a delta
from the empty image holding the full state, so late-installed publishers miss nothing.
"""
from __future__ import annotations

from typing import Protocol, Sequence

from metadata.delta import MetadataDelta
from metadata.errors import InvalidRecordError
from metadata.image import EMPTY_IMAGE, MetadataImage
from metadata.records import Record
from metadata.snapshot import delta_between, image_from_records, image_to_records

__all__ = ["MetadataPublisher", "MetadataLoader"]


class MetadataPublisher(Protocol):
    name: str

    def publish(self, delta: MetadataDelta, image: MetadataImage) -> None:
        """Must not modify delta or image (both are shared with other publishers)."""


class MetadataLoader:
    def __init__(self, image: MetadataImage = EMPTY_IMAGE):
        self.image = image  # the last published image (or the start image)
        self._pending: MetadataDelta | None = None  # committed, not yet published
        self._high_watermark: int | None = None
        self._publishers: list[MetadataPublisher] = []
        self._initialized: set[int] = set()  # id() of publishers that had their full state
        self.caught_up = False
        self.replay_errors: list[tuple[int, str]] = []  # (offset, message): controller bugs

    @property
    def last_offset(self) -> int:
        return self._pending._offset if self._pending is not None else self.image.offset

    def install(self, publisher: MetadataPublisher) -> None:
        self._publishers.append(publisher)
        if self.caught_up:
            self._initialize(publisher)

    def uninstall(self, publisher: MetadataPublisher) -> None:
        self._publishers.remove(publisher)
        self._initialized.discard(id(publisher))

    def set_high_watermark(self, high_watermark: int) -> None:
        """The leader's HW (exclusive end of the committed log), from Raft."""
        if self._high_watermark is None or high_watermark > self._high_watermark:
            self._high_watermark = high_watermark
        self._maybe_publish()

    def handle_commit(self, last_offset: int, epoch: int, records: Sequence[Record]) -> None:
        """One committed batch ending at `last_offset` (records may be empty for a batch
        that held only Raft control records). Batches at or below the current offset are
        ignored, so a re-delivery is harmless."""
        if last_offset <= self.last_offset:
            return
        delta = self._pending or MetadataDelta(self.image)
        for i, rec in enumerate(records):
            try:
                delta.replay(rec)
            except InvalidRecordError as e:
                # The log is authoritative; a record that does not fit is a controller bug.
                # Skip it (as Kafka's fault handler does) and keep it visible.
                self.replay_errors.append((last_offset - len(records) + 1 + i, str(e)))
        delta.set_provenance(last_offset, epoch)
        self._pending = delta
        self._maybe_publish()

    def load_snapshot(self, end_offset: int, epoch: int, records: Sequence[Record]) -> None:
        """Replace the state with a snapshot covering offsets < end_offset."""
        new = image_from_records(records, offset=end_offset - 1, epoch=epoch)
        # The snapshot supersedes anything pending: publishers see one delta from the
        # last published image straight to the snapshot's state.
        self._pending = delta_between(self.image, new)
        self._maybe_publish()

    def _maybe_publish(self) -> None:
        if not self.caught_up:
            if self._high_watermark is None or self.last_offset < self._high_watermark - 1:
                return
            self.caught_up = True
        if self._pending is None:
            for p in self._publishers:
                if id(p) not in self._initialized:
                    self._initialize(p)
            return
        delta, self._pending = self._pending, None
        self.image = delta.apply()
        for p in list(self._publishers):
            if id(p) in self._initialized:
                p.publish(delta, self.image)
            else:
                self._initialize(p)

    def _initialize(self, publisher: MetadataPublisher) -> None:
        full = MetadataDelta(EMPTY_IMAGE)
        for rec in image_to_records(self.image):
            full.replay(rec)
        full.set_provenance(self.image.offset, self.image.epoch)
        self._initialized.add(id(publisher))
        publisher.publish(full, self.image)
