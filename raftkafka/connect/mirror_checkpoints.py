"""Consumer group offsets, translated: the offset-sync store, checkpoints and group offset sync.

An offset sync says record `upstream` of a source partition is record `downstream` of its remote
partition. A group committed at upstream offset U translates, as Kafka's MirrorMaker (3.5+)
translates it, through the latest sync at or below U: to its `downstream` when U is that sync's
offset, else to `downstream + 1`. Every record at or after U upstream is at or after the
translated offset downstream, so a group that moves to the target sees no gap (it may see again
the few records between the sync and U: at-least-once).
"""
from __future__ import annotations

import bisect

from raftkafka.client import Admin, Producer
from raftkafka.client.group import GroupMembership
from raftkafka.connect.mirror_config import FlowConfig
from raftkafka.connect.mirror_records import Checkpoint, OffsetSync

__all__ = ["OffsetSyncStore", "PartitionSyncState", "Checkpointer"]

_MAX_SYNCS = 1024  # kept per partition; older ones are thinned out, newer ones kept whole


class PartitionSyncState:
    """When to emit an offset sync for one partition (MirrorSourceTask's rule)."""

    def __init__(self, max_lag: int):
        self.max_lag = max_lag
        self.previous_upstream = -1
        self.previous_downstream = -1
        self.last_sync_downstream = -1

    def update(self, upstream: int, downstream: int) -> bool:
        due = (self.previous_upstream == -1  # the first record this run
               or downstream - (self.last_sync_downstream + 1) >= self.max_lag  # translation getting stale
               or upstream - self.previous_upstream != 1  # an upstream gap (compaction, transactions)
               or downstream < self.previous_downstream)  # the remote topic was truncated
        if due:
            self.last_sync_downstream = downstream
        self.previous_upstream, self.previous_downstream = upstream, downstream
        return due


class OffsetSyncStore:
    def __init__(self):
        self._syncs: dict[tuple[str, int], list[OffsetSync]] = {}

    def add(self, sync: OffsetSync) -> None:
        syncs = self._syncs.setdefault((sync.topic, sync.partition), [])
        while syncs and syncs[-1].upstream >= sync.upstream:  # re-copied after a restart: the newer mapping wins
            syncs.pop()
        syncs.append(sync)
        if len(syncs) > _MAX_SYNCS:
            half = len(syncs) // 2
            syncs[:half] = syncs[:half:2]

    def translate(self, tp: tuple[str, int], upstream: int) -> int | None:
        """The downstream offset for a group at `upstream`, or None when no sync is that old."""
        syncs = self._syncs.get(tp)
        if not syncs:
            return None
        i = bisect.bisect_right([s.upstream for s in syncs], upstream) - 1
        if i < 0:
            return None
        sync = syncs[i]
        return sync.downstream if sync.upstream == upstream else sync.downstream + 1


class Checkpointer:
    def __init__(self, env, flow: FlowConfig, source: Admin, target: Admin, producer: Producer,
                 store: OffsetSyncStore, log):
        self.env = env
        self.flow = flow
        self.source = source
        self.target = target
        self.producer = producer
        self.store = store
        self.log = log
        self._emitted: dict[tuple[str, str, int], Checkpoint] = {}

    async def translated_groups(self) -> dict[str, dict[tuple[str, int], Checkpoint]]:
        """group -> {remote partition: checkpoint} for every replicated group and partition."""
        out = {}
        for group, protocol in await self.source.list_groups():
            if protocol not in ("consumer", "") or not self.flow.replicates_group(group):
                continue
            checkpoints = {}
            for (topic, partition), upstream in sorted((await self.source.list_consumer_group_offsets(group)).items()):
                if upstream is None or not self.flow.replicates_topic(topic):
                    continue
                downstream = self.store.translate((topic, partition), upstream)
                if downstream is None:
                    continue
                remote = self.flow.policy.remote_topic(self.flow.source.alias, topic)
                checkpoints[(remote, partition)] = Checkpoint(group, remote, partition, upstream, downstream)
            if checkpoints:
                out[group] = checkpoints
        return out

    async def emit_checkpoints(self) -> None:
        """Write to `<source>.checkpoints.internal` every checkpoint that changed."""
        sent = False
        for group, checkpoints in (await self.translated_groups()).items():
            for (remote, partition), checkpoint in checkpoints.items():
                key = (group, remote, partition)
                if self._emitted.get(key) != checkpoint:
                    await self.producer.send(self.flow.checkpoints_topic, checkpoint.value(), checkpoint.key(),
                                             partition=0)
                    self._emitted[key] = checkpoint
                    sent = True
        if sent:
            await self.producer.flush()

    async def sync_group_offsets(self) -> None:
        """Commit translated offsets for groups with no member on the target, where they are ahead
        of what the group has there (KIP-545)."""
        for group, checkpoints in (await self.translated_groups()).items():
            description = (await self.target.describe_groups([group])).get(group)
            if description is not None and description.error is None and description.members:
                continue  # consumers run on the target: their commits are theirs
            current = await self.target.list_consumer_group_offsets(group, list(checkpoints))
            ahead = {tp: c.downstream for tp, c in checkpoints.items()
                     if current.get(tp) is None or current[tp] < c.downstream}
            if ahead:
                await GroupMembership(self.env, self.target.cluster, group).commit(ahead, as_member=False)
