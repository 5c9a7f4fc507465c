"""acks=all: hold a produce answer until the high watermark passes each appended batch.

Kafka's DelayedProduce. After the append, every partition of the request is
checked with `Partition.check_enough_replicas` each time that partition
changes (HW move, ISR change, role change — the fetch purgatory's per-partition
wake-ups): done with NONE once HW > the batch's last offset and the maximal ISR
still has min.insync.replicas members, done with NOT_ENOUGH_REPLICAS_AFTER_APPEND
if the ISR shrank below that meanwhile, NOT_LEADER_OR_FOLLOWER if this broker
lost the leadership (or the partition was replaced) since the append, and
REQUEST_TIMED_OUT when the request's timeout passes first.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from broker.fetch_purgatory import FetchPurgatory
from broker.partition import Partition
from wire.error_codes import ErrorCode

__all__ = ["PendingAck", "await_acks"]


@dataclass
class PendingAck:
    partition: Partition
    leader_epoch: int  # the epoch that appended the batch
    last_offset: int
    min_isr: int
    set_error: Callable[[int], None]  # writes the final error code into the response slot


def status(pending: PendingAck, current: Partition | None) -> tuple[bool, int]:
    p = pending.partition
    if current is not p or not p.is_leader or p.leader_epoch != pending.leader_epoch:
        # Another epoch may have truncated the batch: the client must retry to know.
        return True, ErrorCode.NOT_LEADER_OR_FOLLOWER
    return p.check_enough_replicas(pending.last_offset + 1, pending.min_isr)


async def await_acks(env, purgatory: FetchPurgatory, pending: list[PendingAck], deadline: float,
                     lookup: Callable[[tuple[str, int]], Partition | None]) -> None:
    """Resolve every pending ack (writing its error code) by `deadline`."""
    for ack in pending:
        while True:
            done, error = status(ack, lookup(ack.partition.key))
            if done:
                ack.set_error(error)
                break
            if env.now() >= deadline:
                ack.set_error(ErrorCode.REQUEST_TIMED_OUT)
                break
            await purgatory.wait([ack.partition.key], deadline)
