"""InitProducerId for idempotent producers: ids handed out from controller-allocated blocks.

The controller owns the id space (ProducerIds records); a broker asks it for a
block (Kafka: 1000 ids) through AllocateProducerIds and serves InitProducerId
from that block locally. The request itself is injected as an async callable
returning (first_id, size) so this module knows nothing about the transport;
it raises `ProducerIdsUnavailable` (or any OSError) when the controller cannot
answer, and the client is told COORDINATOR_LOAD_IN_PROGRESS, a retriable
error, as Kafka's RPCProducerIdManager does.

A request with a transactional id is the transaction coordinator's
(broker.handlers.transactions); it takes its fresh ids from `next_producer_id`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Awaitable, Callable

import trio

from wire.error_codes import ErrorCode

__all__ = ["ProducerIdAllocator", "InitProducerIdResult", "ProducerIdsUnavailable"]

FetchBlock = Callable[[], Awaitable[tuple[int, int]]]


class ProducerIdsUnavailable(Exception):
    """The controller did not hand out a block (not reachable, not active, error)."""


@dataclass(slots=True, frozen=True)
class InitProducerIdResult:
    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1
    message: str = ""


class ProducerIdAllocator:
    def __init__(self, fetch_block: FetchBlock):
        self._fetch_block = fetch_block
        self._next = 0
        self._end = 0  # exclusive end of the current block; next == end means exhausted
        self._lock = trio.Lock()  # one AllocateProducerIds in flight; others wait for its block
        self.blocks_fetched = 0

    @property
    def remaining(self) -> int:
        return self._end - self._next

    async def next_producer_id(self) -> int:
        """A fresh producer id; fetches a new block when the current one is used up."""
        async with self._lock:
            if self._next >= self._end:
                first, size = await self._fetch_block()
                if size <= 0 or first < 0:
                    raise ProducerIdsUnavailable(f"controller returned an empty producer id block ({first}, {size})")
                self._next, self._end = first, first + size
                self.blocks_fetched += 1
            producer_id = self._next
            self._next += 1
            return producer_id

    async def init_producer_id(self, transactional_id: str | None, transaction_timeout_ms: int = 60_000,
                               ) -> InitProducerIdResult:
        if transactional_id is not None:
            return InitProducerIdResult(ErrorCode.INVALID_REQUEST,
                                        message="a transactional id is the transaction coordinator's")
        try:
            producer_id = await self.next_producer_id()
        except (ProducerIdsUnavailable, OSError) as exc:
            return InitProducerIdResult(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                        message=f"no producer id block available: {exc}")
        # A non-transactional producer always starts over with a fresh id at epoch 0.
        return InitProducerIdResult(ErrorCode.NONE, producer_id, 0)
