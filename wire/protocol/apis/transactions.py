"""Transactions (KIP-98/447): AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, WriteTxnMarkers,
TxnOffsetCommit.

AddPartitionsToTxn v0-4 (v4: KIP-890's broker-side batches, with verify_only); the client APIs in
their non-flexible versions; DescribeProducers, DescribeTransactions and ListTransactions
(KIP-664, the admin's view) are flexible in every version. WriteTxnMarkers is what our transaction coordinators
send to partition leaders.
"""
from __future__ import annotations

from wire.protocol.message import request, response
from wire.protocol.schema import ArrayOf, F, BOOL, INT16, INT32, INT64, STRING

__all__ = [
    "AddPartitionsToTxnRequest", "AddPartitionsToTxnResponse", "AddOffsetsToTxnRequest",
    "AddOffsetsToTxnResponse", "EndTxnRequest", "EndTxnResponse", "WriteTxnMarkersRequest",
    "WriteTxnMarkersResponse", "TxnOffsetCommitRequest", "TxnOffsetCommitResponse",
    "DescribeProducersRequest", "DescribeProducersResponse", "DescribeTransactionsRequest",
    "DescribeTransactionsResponse", "ListTransactionsRequest", "ListTransactionsResponse",
]

AddPartitionsToTxnRequest = request(24, "AddPartitionsToTxn", "0-4", flexible="3+", fields=[
    # v4+ (KIP-890): batches of transactions, sent by brokers; verify_only asks whether the
    # partitions are in the transaction without adding them.
    F("transactions", ArrayOf("AddPartitionsToTxnTransaction",
        F("transactional_id", STRING),
        F("producer_id", INT64),
        F("producer_epoch", INT16),
        F("verify_only", BOOL, default=False),
        F("topics", ArrayOf("AddPartitionsToTxnTopic",
            F("name", STRING),
            F("partitions", ArrayOf(INT32)),
        )),
    ), "4+", default=[]),
    F("transactional_id", STRING, "0-3", default=""),
    F("producer_id", INT64, "0-3", default=-1),
    F("producer_epoch", INT16, "0-3", default=-1),
    F("topics", ArrayOf("V3AndBelowTopic",
        F("name", STRING),
        F("partitions", ArrayOf(INT32)),
    ), "0-3", default=[]),
])

AddPartitionsToTxnResponse = response(24, "AddPartitionsToTxn", "0-4", flexible="3+", fields=[
    F("throttle_time_ms", INT32),
    F("error_code", INT16, "4+", default=0),
    F("results_by_transaction", ArrayOf("AddPartitionsToTxnResult",
        F("transactional_id", STRING),
        F("topic_results", ArrayOf("AddPartitionsToTxnTopicResult",
            F("name", STRING),
            F("results", ArrayOf("AddPartitionsToTxnPartitionResult",
                F("partition_index", INT32),
                F("error_code", INT16),
            )),
        )),
    ), "4+", default=[]),
    F("results", ArrayOf("V3AndBelowTopicResult",
        F("name", STRING),
        F("results", ArrayOf("V3AndBelowPartitionResult",
            F("partition_index", INT32),
            F("error_code", INT16),
        )),
    ), "0-3", default=[]),
])

AddOffsetsToTxnRequest = request(25, "AddOffsetsToTxn", "0-2", flexible="3+", fields=[
    F("transactional_id", STRING),
    F("producer_id", INT64),
    F("producer_epoch", INT16),
    F("group_id", STRING),
])

AddOffsetsToTxnResponse = response(25, "AddOffsetsToTxn", "0-2", flexible="3+", fields=[
    F("throttle_time_ms", INT32),
    F("error_code", INT16),
])

EndTxnRequest = request(26, "EndTxn", "0-2", flexible="3+", fields=[
    F("transactional_id", STRING),
    F("producer_id", INT64),
    F("producer_epoch", INT16),
    F("committed", BOOL),
])

EndTxnResponse = response(26, "EndTxn", "0-2", flexible="3+", fields=[
    F("throttle_time_ms", INT32),
    F("error_code", INT16),
])

WriteTxnMarkersRequest = request(27, "WriteTxnMarkers", "0", flexible="1+", fields=[
    F("markers", ArrayOf("WritableTxnMarker",
        F("producer_id", INT64),
        F("producer_epoch", INT16),
        F("transaction_result", BOOL),
        F("topics", ArrayOf("WritableTxnMarkerTopic",
            F("name", STRING),
            F("partition_indexes", ArrayOf(INT32)),
        )),
        F("coordinator_epoch", INT32),
    )),
])

WriteTxnMarkersResponse = response(27, "WriteTxnMarkers", "0", flexible="1+", fields=[
    F("markers", ArrayOf("WritableTxnMarkerResult",
        F("producer_id", INT64),
        F("topics", ArrayOf("WritableTxnMarkerTopicResult",
            F("name", STRING),
            F("partitions", ArrayOf("WritableTxnMarkerPartitionResult",
                F("partition_index", INT32),
                F("error_code", INT16),
            )),
        )),
    )),
])

TxnOffsetCommitRequest = request(28, "TxnOffsetCommit", "0-3", flexible="3+", fields=[
    F("transactional_id", STRING),
    F("group_id", STRING),
    F("producer_id", INT64),
    F("producer_epoch", INT16),
    # KIP-447: the consumer's group membership, checked as OffsetCommit checks it.
    F("generation_id", INT32, "3+", default=-1),
    F("member_id", STRING, "3+", default=""),
    F("group_instance_id", STRING, "3+", nullable="3+", default=None),
    F("topics", ArrayOf("TxnOffsetCommitRequestTopic",
        F("name", STRING),
        F("partitions", ArrayOf("TxnOffsetCommitRequestPartition",
            F("partition_index", INT32),
            F("committed_offset", INT64),
            F("committed_leader_epoch", INT32, "2+", default=-1),
            F("committed_metadata", STRING, nullable="0+"),
        )),
    )),
])

TxnOffsetCommitResponse = response(28, "TxnOffsetCommit", "0-3", flexible="3+", fields=[
    F("throttle_time_ms", INT32),
    F("topics", ArrayOf("TxnOffsetCommitResponseTopic",
        F("name", STRING),
        F("partitions", ArrayOf("TxnOffsetCommitResponsePartition",
            F("partition_index", INT32),
            F("error_code", INT16),
        )),
    )),
])

DescribeProducersRequest = request(61, "DescribeProducers", "0", flexible="0+", fields=[
    F("topics", ArrayOf("TopicRequest",
        F("name", STRING),
        F("partition_indexes", ArrayOf(INT32)),
    )),
])

DescribeProducersResponse = response(61, "DescribeProducers", "0", flexible="0+", fields=[
    F("throttle_time_ms", INT32),
    F("topics", ArrayOf("TopicResponse",
        F("name", STRING),
        F("partitions", ArrayOf("PartitionResponse",
            F("partition_index", INT32),
            F("error_code", INT16),
            F("error_message", STRING, nullable="0+", default=None),
            F("active_producers", ArrayOf("ProducerState",
                F("producer_id", INT64),
                F("producer_epoch", INT32),
                F("last_sequence", INT32, default=-1),
                F("last_timestamp", INT64, default=-1),
                F("coordinator_epoch", INT32),
                F("current_txn_start_offset", INT64, default=-1),
            )),
        )),
    )),
])

DescribeTransactionsRequest = request(65, "DescribeTransactions", "0", flexible="0+", fields=[
    F("transactional_ids", ArrayOf(STRING)),
])

DescribeTransactionsResponse = response(65, "DescribeTransactions", "0", flexible="0+", fields=[
    F("throttle_time_ms", INT32),
    F("transaction_states", ArrayOf("TransactionState",
        F("error_code", INT16),
        F("transactional_id", STRING),
        F("transaction_state", STRING),
        F("transaction_timeout_ms", INT32),
        F("transaction_start_time_ms", INT64),
        F("producer_id", INT64),
        F("producer_epoch", INT16),
        F("topics", ArrayOf("TopicData",
            F("topic", STRING),
            F("partitions", ArrayOf(INT32)),
        )),
    )),
])

ListTransactionsRequest = request(66, "ListTransactions", "0-1", flexible="0+", fields=[
    F("state_filters", ArrayOf(STRING)),
    F("producer_id_filters", ArrayOf(INT64)),
    F("duration_filter", INT64, "1+", default=-1),
])

ListTransactionsResponse = response(66, "ListTransactions", "0-1", flexible="0+", fields=[
    F("throttle_time_ms", INT32),
    F("error_code", INT16),
    F("unknown_state_filters", ArrayOf(STRING)),
    F("transaction_states", ArrayOf("TransactionState",
        F("transactional_id", STRING),
        F("producer_id", INT64),
        F("transaction_state", STRING),
    )),
])
