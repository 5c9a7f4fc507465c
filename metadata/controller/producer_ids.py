"""AllocateProducerIds: hand a broker the next block of producer ids (Kafka: 1000 per block)."""
from __future__ import annotations

from dataclasses import dataclass

from metadata.image import MetadataImage
from metadata.records import ProducerIds
from wire.error_codes import ErrorCode

__all__ = ["PRODUCER_ID_BLOCK_SIZE", "ProducerIdBlock", "allocate_producer_ids"]

PRODUCER_ID_BLOCK_SIZE = 1000
_MAX_PRODUCER_ID = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    error: ErrorCode
    first_id: int = -1
    size: int = 0


def allocate_producer_ids(image: MetadataImage, broker_id: int, broker_epoch: int,
                          ) -> tuple[list[ProducerIds], ProducerIdBlock]:
    reg = image.brokers.get(broker_id)
    if reg is None:
        return [], ProducerIdBlock(ErrorCode.BROKER_ID_NOT_REGISTERED)
    if reg.epoch != broker_epoch:
        return [], ProducerIdBlock(ErrorCode.STALE_BROKER_EPOCH)
    first = image.next_producer_id
    if first > _MAX_PRODUCER_ID - PRODUCER_ID_BLOCK_SIZE:
        return [], ProducerIdBlock(ErrorCode.UNKNOWN_SERVER_ERROR)  # id space exhausted
    nxt = first + PRODUCER_ID_BLOCK_SIZE
    return ([ProducerIds(broker_id, broker_epoch, nxt)],
            ProducerIdBlock(ErrorCode.NONE, first, PRODUCER_ID_BLOCK_SIZE))
