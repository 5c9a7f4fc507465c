"""What the transaction coordinator hands back: answers, appends, and markers to write.

The driver carries out a `TxnOutput` as the group driver does an Output (appends to
`__transaction_state`, completions) and also sends each `MarkerRequest`'s WriteTxnMarkers
to the leaders of its partitions, reporting back with
`coordinator.markers_written(transactional_id, producer_id, epoch, partitions, now)`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from broker.groups.results import Output
from broker.transactions.metadata import TopicPartition
from wire.error_codes import ErrorCode

__all__ = ["TxnOutput", "MarkerRequest", "TxnResult"]


@dataclass(frozen=True, slots=True)
class MarkerRequest:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class TxnResult:
    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(slots=True)
class TxnOutput(Output):
    markers: list[MarkerRequest] = field(default_factory=list)

    def extend(self, other: Output) -> None:
        Output.extend(self, other)
        if isinstance(other, TxnOutput):
            self.markers.extend(other.markers)
