"""Idempotent-producer state (DESIGN §8).

Public surface:

    ProducerStateManager    per-partition dedupe state: check / record / apply / rebuild /
                            truncate_to / to_bytes / load_snapshot / remove_expired
    ProducerCheck           a verdict: ok, duplicate (original offsets) or an ErrorCode
    ProducerEntry, BatchMetadata
    ProducerIdAllocator     InitProducerId from controller-allocated id blocks
    InitProducerIdResult, ProducerIdsUnavailable
"""
from broker.producer_state.allocator import InitProducerIdResult, ProducerIdAllocator, ProducerIdsUnavailable
from broker.producer_state.entry import AbortedTxn, BatchMetadata, ProducerEntry
from broker.producer_state.manager import DEFAULT_PRODUCER_ID_EXPIRATION_MS, LogEntry, ProducerCheck, ProducerStateManager

__all__ = [
    "AbortedTxn",
    "BatchMetadata",
    "DEFAULT_PRODUCER_ID_EXPIRATION_MS",
    "InitProducerIdResult",
    "LogEntry",
    "ProducerCheck",
    "ProducerEntry",
    "ProducerIdAllocator",
    "ProducerIdsUnavailable",
    "ProducerStateManager",
]
