"""Metadata checker: every node's image is the committed metadata log, replayed.

The Raft checker keeps the committed log as first applied anywhere (offset → entry).
This checker replays that log with the real decoders (BatchAssembler, MetadataDelta)
into reference images, one per committed offset that ends a batch or a control entry,
and compares each live node's images against them:

- MetadataImageMatchesLog: a broker's published image (its MetadataLoader) and a
  controller's committed image equal the reference image at their offset;
- UncommittedMetadataPublished: no node ever shows an image at an offset the log has
  not committed;
- MetadataReplayError: no committed record fails to apply on a node (a controller bug
  that Kafka would log and skip);
- MonotonicMetadataOffset: a node's published offset never goes back within an
  incarnation.

Images are compared only when a node's image object changed (images are immutable).
"""
from __future__ import annotations

import dataclasses

from metadata.delta import MetadataDelta
from metadata.image import EMPTY_IMAGE, MetadataImage
from metadata.log_format import BatchAssembler, CommittedBatch
from metadata.records import NO_LEADER
from raft.entry import Entry
from simulations.checkers.raft import RaftChecker

__all__ = ["MetadataChecker"]


class MetadataChecker:
    def __init__(self, raft: RaftChecker, *, keep: int = 4096):
        self.raft = raft
        self.keep = keep  # reference images kept (older ones are dropped; nodes converge past them)
        self.images: dict[int, MetadataImage] = {}
        self.replayed_end = 0  # next committed offset to replay
        self._image = EMPTY_IMAGE
        self._assembler = BatchAssembler()
        # -> (incarnation, image, offset). The image itself, not its id(): once the previous
        # image is freed a new one can reuse its address and would be taken for unchanged.
        self._last_seen: dict[tuple[int, str], tuple[int, MetadataImage, int]] = {}
        self.compared = 0
        self.on_image: list = []  # callbacks(image) for every committed image replayed, in order
        self._fencing_watches: list[tuple[int, int, object]] = []  # see on_fencing

    # ------------------------------------------------------------------ replay
    def _catch_up(self) -> None:
        committed = self.raft.committed
        entries = []
        while self.replayed_end in committed:
            epoch, payload, control = committed[self.replayed_end]
            entries.append(Entry(self.replayed_end, epoch, payload, control))
            self.replayed_end += 1
        if not entries:
            return
        for item in self._assembler.feed(entries):
            if isinstance(item, CommittedBatch):
                delta = MetadataDelta(self._image)
                for rec in item.records:
                    try:
                        delta.replay(rec)
                    except Exception as e:  # noqa: BLE001 - reported, the replay goes on as the nodes' does
                        self.raft.violate("MetadataReplayError", f"committed record in batch ending at "
                                          f"{item.last_offset} does not apply: {type(e).__name__}: {e}")
                delta.set_provenance(item.last_offset, item.epoch)
                self._image = delta.apply()
                self.images[item.last_offset] = self._image
                for watch in [w for w in self._fencing_watches if _fenced(self._image, w[0], w[1])]:
                    self._fencing_watches.remove(watch)
                    watch[2](self._decided_fencing(watch[0], watch[1]))
                for callback in self.on_image:
                    callback(self._image)
            else:  # a control entry moves a loader's offset, not the controller's image
                self.images[item.offset] = dataclasses.replace(self._image, offset=item.offset, epoch=item.epoch)
        while len(self.images) > self.keep:
            del self.images[next(iter(self.images))]

    @property
    def committed_image(self) -> MetadataImage:
        """The image of the whole committed metadata log as far as any node applied it."""
        self._catch_up()
        return self._image

    def on_fencing(self, broker_id: int, epoch: int, callback) -> None:
        """Call `callback(image)` with the committed image the controller decided the latest
        fencing of epoch `epoch` of `broker_id` on: now if the replayed log ends with it
        fenced, else once that fencing is replayed."""
        self._catch_up()
        if _fenced(self._image, broker_id, epoch):
            callback(self._decided_fencing(broker_id, epoch))
        else:
            self._fencing_watches.append((broker_id, epoch, callback))

    def _decided_fencing(self, broker_id: int, epoch: int) -> MetadataImage | None:
        """The image before the fencing's batches: its registration change and, before
        that, the batches that moved leadership and ISR membership off the broker
        (metadata.controller.brokers.fence_broker). A broker fenced from controlled shutdown
        was fenced on the image it shut down in: the moves before that were the controlled
        shutdown's own, not the fencing's."""
        decided = None
        for image in reversed(self.images.values()):
            if decided is None:
                if not _fenced(image, broker_id, epoch):
                    decided = image
                    reg = image.brokers.get(broker_id)
                    if reg is not None and reg.in_controlled_shutdown:
                        break
            elif _moved_off(image, decided, broker_id):
                decided = image
            else:
                break
        return decided

    # ------------------------------------------------------------------ checks
    def observe(self, node: int, incarnation: int, kind: str, image: MetadataImage, replay_errors) -> None:
        """One node's current image (`kind`: "broker" published or "controller" committed)."""
        key = (node, kind)
        last = self._last_seen.get(key)
        if last is not None and last[0] == incarnation and last[1] is image:
            return
        if last is not None and last[0] == incarnation and image.offset < last[2]:
            self.raft.violate("MonotonicMetadataOffset", f"node {node} {kind} image went from offset "
                              f"{last[2]} back to {image.offset}")
        self._last_seen[key] = (incarnation, image, image.offset)
        if replay_errors:
            offset, message = replay_errors[0]
            self.raft.violate("MetadataReplayError", f"node {node} {kind}: record at {offset} did not apply: "
                              f"{message[:160]}")
            replay_errors.clear()  # reported once
        if image.offset < 0:
            return
        self._catch_up()
        if image.offset >= self.replayed_end:
            self.raft.violate("UncommittedMetadataPublished", f"node {node} {kind} image is at offset "
                              f"{image.offset}, the committed log ends at {self.replayed_end - 1}")
            return
        expected = self.images.get(image.offset)
        if expected is None:
            return  # older than what is kept, or mid-batch (cannot happen: images end batches)
        self.compared += 1
        if expected != image:
            self.raft.violate("MetadataImageMatchesLog", f"node {node} {kind} image at offset {image.offset} "
                              f"differs from the replayed log: {_difference(expected, image)}")

    def converged(self, offsets: dict[int, int], target: int) -> list[int]:
        """Nodes whose image offset is still below `target` (liveness after the heal)."""
        return sorted(n for n, o in offsets.items() if o < target)


def _fenced(image: MetadataImage, broker_id: int, epoch: int) -> bool:
    reg = image.brokers.get(broker_id)
    return reg is not None and reg.epoch == epoch and reg.fenced


def _moved_off(before: MetadataImage, after: MetadataImage, broker_id: int) -> bool:
    """Whether every partition that differs from `before` to `after` lost `broker_id` as
    fencing takes it off (metadata.controller.replication.remove_broker_from_isrs): out of
    its ISR, or as leader with no other to elect; topics and its registration alike."""
    if (before.brokers.get(broker_id) != after.brokers.get(broker_id)
            or before.topics_by_id.keys() != after.topics_by_id.keys()):
        return False
    changed = [(old, after.topics_by_id[tid].partitions.get(pid))
               for tid, topic in before.topics_by_id.items() if topic is not after.topics_by_id[tid]
               for pid, old in topic.partitions.items() if old is not after.topics_by_id[tid].partitions.get(pid)]
    return bool(changed) and all(
        new is not None and ((broker_id in old.isr and broker_id not in new.isr)
                             or (old.leader == broker_id and new.leader == NO_LEADER))
        for old, new in changed)


def _difference(expected: MetadataImage, actual: MetadataImage) -> str:
    for f in dataclasses.fields(MetadataImage):
        a, b = getattr(expected, f.name), getattr(actual, f.name)
        if a != b:
            if isinstance(a, dict) and isinstance(b, dict):
                keys = sorted({k for k in set(a) | set(b) if a.get(k) != b.get(k)}, key=repr)[:3]
                return f"{f.name} differ at {[repr(k)[:60] for k in keys]}"
            return f"{f.name}: {repr(a)[:80]} vs {repr(b)[:80]}"
    return "(equal fields, unequal images)"
