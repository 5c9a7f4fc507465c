"""ISR changes sent to the active controller (Kafka's DefaultAlterPartitionManager).

A leader partition `submit`s one AlterPartition item at a time (its IsrState
allows only one change in flight); the manager batches everything queued into
one request, keeps at most one request outstanding, and hands each partition
its own result through the callback given with the item. Request-level
failures (no controller reachable, a stale broker epoch while our new
registration is still propagating) are retried after a backoff with the same
items: they carry the partition epoch they were computed from, so a retry can
never apply a stale change — the controller answers INVALID_UPDATE_VERSION.

The broker epoch is read when a request is built (from the metadata image, where
this broker's registration record carries it).
"""
from __future__ import annotations

import logging
import uuid
from typing import Callable

import trio

from metadata.controller.alter_partition import AlterPartitionItem, AlterPartitionResult
from wire.error_codes import ErrorCode

__all__ = ["AlterPartitionManager", "Callback"]

log = logging.getLogger(__name__)

Callback = Callable[[AlterPartitionResult], None]
Key = tuple[uuid.UUID, int]
RETRY_BACKOFF_S = 0.05
MAX_BACKOFF_S = 1.0
REQUEST_TIMEOUT_S = 10.0


class AlterPartitionManager:
    def __init__(self, env, broker_id: int, channel, broker_epoch: Callable[[], int], *,
                 retry_backoff_s: float = RETRY_BACKOFF_S):
        self.env = env
        self.broker_id = broker_id
        self.channel = channel
        self.broker_epoch = broker_epoch
        self.retry_backoff_s = retry_backoff_s
        self._queued: dict[Key, tuple[AlterPartitionItem, Callback]] = {}
        self._inflight: dict[Key, tuple[AlterPartitionItem, Callback]] = {}
        self._wake = trio.Event()
        self.requests_sent = 0

    def submit(self, item: AlterPartitionItem, callback: Callback) -> bool:
        """Queue a change; False if this partition already has one queued or in flight."""
        key = (item.topic_id, item.partition_id)
        if key in self._queued or key in self._inflight:
            return False
        self._queued[key] = (item, callback)
        self._wake.set()
        return True

    def pending(self, topic_id: uuid.UUID, partition_id: int) -> bool:
        key = (topic_id, partition_id)
        return key in self._queued or key in self._inflight

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        backoff = self.retry_backoff_s
        while True:
            if not self._queued:
                await self._wake.wait()
                self._wake = trio.Event()
                continue
            self._inflight, self._queued = self._queued, {}
            if await self._send():
                backoff = self.retry_backoff_s
            else:
                # Put the items back in front of anything queued meanwhile (same partition: the
                # newer one cannot exist, submit refused it while ours was in flight).
                self._queued = {**self._inflight, **self._queued}
                self._inflight = {}
                await self.env.sleep(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_S)

    async def _send(self) -> bool:
        """One request for everything in flight; False = retry the whole batch later."""
        batch = self._inflight
        items = [batch[k][0] for k in sorted(batch)]
        self.requests_sent += 1
        try:
            reply = await self.channel.alter_partition(self.broker_id, self.broker_epoch(), items,
                                                       timeout_s=REQUEST_TIMEOUT_S)
        except Exception as exc:  # controller unreachable / timed out: retry the batch
            log.info("AlterPartition for %d partitions failed: %s; retrying", len(items), exc)
            return False
        error, results = reply.results
        if error != ErrorCode.NONE:
            log.info("AlterPartition refused: %s; retrying", ErrorCode(error).name)
            return False
        answered = {(r.topic_id, r.partition_id): r for r in results}
        self._inflight = {}
        for key in sorted(batch):
            item, callback = batch[key]
            result = answered.get(key) or AlterPartitionResult(
                item.topic_id, item.partition_id, ErrorCode.UNKNOWN_SERVER_ERROR)
            try:
                callback(result)
            except Exception:  # one partition's bug must not stop ISR changes for the others
                log.exception("AlterPartition callback failed for %s", key)
        return True
