"""Leader ISR checker: a leader counts only ISRs the controller committed.

A leader's ISR (broker.isr.IsrState.isr, what its high watermark and acks=all rely on once
no change is pending) must be one the metadata log committed for that partition in the
leader's epoch: the leader learns it from its metadata or from the controller's answer to
its AlterPartition, which comes once the change is committed. A leader that drops a
follower on its own (say, because the follower's fetch connection closed) could advance
its high watermark past what a replica the controller still counts in the ISR holds, and
that replica may be elected next.

LeaderIsrNotCommitted: polled on every live broker; every committed image is recorded
(MetadataChecker.on_image), so no committed ISR is missed between polls.
"""
from __future__ import annotations

from simulations.checkers.metadata import MetadataChecker
from simulations.checkers.raft import RaftChecker

__all__ = ["LeaderIsrChecker"]


class LeaderIsrChecker:
    def __init__(self, raft: RaftChecker, metadata: MetadataChecker):
        self.raft = raft
        self._committed: dict[tuple, set[frozenset]] = {}  # (topic id, partition, leader epoch) -> ISRs
        self._seen: dict = {}  # topic id -> the topic image last recorded
        metadata.on_image.append(self._record)

    def _record(self, image) -> None:
        for topic in image.topics_by_id.values():
            if self._seen.get(topic.topic_id) is topic:
                continue  # unchanged since the last image (images share what did not change)
            self._seen[topic.topic_id] = topic
            for index, part in topic.partitions.items():
                self._committed.setdefault((topic.topic_id, index, part.leader_epoch), set()).add(
                    frozenset(part.isr))

    def observe(self, node_id: int, kafka) -> None:
        for (topic, index), p in sorted(kafka.replicas.partitions.items()):
            if not p.is_leader:
                continue
            epoch = p.registration.leader_epoch
            isr = frozenset(p.isr_state.isr)
            if isr not in self._committed.get((p.topic_id, index, epoch), (isr,)):
                self.raft.violate("LeaderIsrNotCommitted", f"broker {node_id} leads {topic}-{index} in epoch "
                                  f"{epoch} with ISR {sorted(isr)}, which the controller never committed")
