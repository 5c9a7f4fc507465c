"""Request handlers, one module per API or small API family.

`HANDLERS` maps an api key to its `Handler`; ApiVersions advertises exactly
these keys with the versions the codecs define (so never more than both the
codec and the handler implement). A handler is `async handle(broker, header,
request) -> response | None` (None: no response, e.g. acks=0) and
`error(broker, header, request, code) -> response` builds the answer that
gives every item of the request one error code (used for UNKNOWN_SERVER_ERROR).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from broker.handlers import (
    acls, api_versions, client_quotas, configs, delete_records, describe_cluster, describe_log_dirs, describe_quorum,
    describe_topic_partitions,
    fetch, groups, init_producer_id, list_offsets, metadata, offset_for_leader_epoch, offsets, produce, reassignments,
    raft_voters, sasl, scram_credentials, topics_admin, transactions, transactions_admin, unregister_broker,
)
from wire.protocol import API_VERSIONS, ApiKey

__all__ = ["Handler", "HANDLERS", "advertised_versions"]


@dataclass(frozen=True)
class Handler:
    handle: Callable[..., Awaitable[Any]]
    error: Callable[..., Any]


HANDLERS: dict[int, Handler] = {
    ApiKey.PRODUCE: Handler(produce.handle, produce.error_response),
    ApiKey.FETCH: Handler(fetch.handle, fetch.error_response),
    ApiKey.LIST_OFFSETS: Handler(list_offsets.handle, list_offsets.error_response),
    ApiKey.METADATA: Handler(metadata.handle, metadata.error_response),
    ApiKey.API_VERSIONS: Handler(api_versions.handle, api_versions.error_response),
    ApiKey.CREATE_TOPICS: Handler(topics_admin.handle_create_topics, topics_admin.create_topics_error),
    ApiKey.DELETE_TOPICS: Handler(topics_admin.handle_delete_topics, topics_admin.delete_topics_error),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: Handler(offset_for_leader_epoch.handle, offset_for_leader_epoch.error_response),
    ApiKey.DESCRIBE_CONFIGS: Handler(configs.handle_describe, configs.describe_error),
    ApiKey.ALTER_CONFIGS: Handler(configs.handle_alter, configs.alter_error),
    ApiKey.CREATE_PARTITIONS: Handler(topics_admin.handle_create_partitions, topics_admin.create_partitions_error),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: Handler(configs.handle_incremental_alter, configs.incremental_alter_error),
    ApiKey.DESCRIBE_CLUSTER: Handler(describe_cluster.handle, describe_cluster.error_response),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: Handler(describe_topic_partitions.handle, describe_topic_partitions.error_response),
    ApiKey.DESCRIBE_ACLS: Handler(acls.handle_describe, acls.describe_error),
    ApiKey.CREATE_ACLS: Handler(acls.handle_create, acls.create_error),
    ApiKey.DELETE_ACLS: Handler(acls.handle_delete, acls.delete_error),
    # consumer groups and offsets (broker.group_driver), idempotent producer ids
    ApiKey.FIND_COORDINATOR: Handler(groups.handle_find_coordinator, groups.find_coordinator_error),
    ApiKey.JOIN_GROUP: Handler(groups.handle_join, groups.join_error),
    ApiKey.SYNC_GROUP: Handler(groups.handle_sync, groups.sync_error),
    ApiKey.HEARTBEAT: Handler(groups.handle_heartbeat, groups.heartbeat_error),
    ApiKey.LEAVE_GROUP: Handler(groups.handle_leave, groups.leave_error),
    ApiKey.DESCRIBE_GROUPS: Handler(groups.handle_describe, groups.describe_error),
    ApiKey.LIST_GROUPS: Handler(groups.handle_list, groups.list_error),
    ApiKey.DELETE_GROUPS: Handler(groups.handle_delete, groups.delete_error),
    ApiKey.OFFSET_COMMIT: Handler(offsets.handle_commit, offsets.commit_error),
    ApiKey.OFFSET_FETCH: Handler(offsets.handle_fetch, offsets.fetch_error),
    ApiKey.OFFSET_DELETE: Handler(offsets.handle_delete, offsets.delete_error),
    ApiKey.INIT_PRODUCER_ID: Handler(init_producer_id.handle, init_producer_id.error_response),
    # transactions (broker.txn_driver, broker.txn_markers)
    ApiKey.ADD_PARTITIONS_TO_TXN: Handler(transactions.handle_add_partitions, transactions.add_partitions_error),
    ApiKey.ADD_OFFSETS_TO_TXN: Handler(transactions.handle_add_offsets, transactions.add_offsets_error),
    ApiKey.END_TXN: Handler(transactions.handle_end_txn, transactions.end_txn_error),
    ApiKey.TXN_OFFSET_COMMIT: Handler(transactions.handle_txn_offset_commit, transactions.txn_offset_commit_error),
    ApiKey.WRITE_TXN_MARKERS: Handler(transactions.handle_write_markers, transactions.write_markers_error),
    ApiKey.DESCRIBE_TRANSACTIONS: Handler(transactions_admin.handle_describe_transactions,
                                          transactions_admin.describe_transactions_error),
    ApiKey.LIST_TRANSACTIONS: Handler(transactions_admin.handle_list_transactions,
                                      transactions_admin.list_transactions_error),
    ApiKey.DESCRIBE_PRODUCERS: Handler(transactions_admin.handle_describe_producers,
                                       transactions_admin.describe_producers_error),
    # a SASL listener's login is served by broker.sasl_authenticator before these are reached
    ApiKey.SASL_HANDSHAKE: Handler(sasl.handle_handshake, sasl.handshake_error),
    ApiKey.SASL_AUTHENTICATE: Handler(sasl.handle_authenticate, sasl.authenticate_error),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: Handler(scram_credentials.handle_describe, scram_credentials.describe_error),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: Handler(scram_credentials.handle_alter, scram_credentials.alter_error),
    # leader elections and partition reassignments, decided on the active controller
    ApiKey.ELECT_LEADERS: Handler(reassignments.handle_elect_leaders, reassignments.elect_leaders_error),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: Handler(reassignments.handle_alter_reassignments,
                                                  reassignments.alter_reassignments_error),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: Handler(reassignments.handle_list_reassignments,
                                                 reassignments.list_reassignments_error),
    # cluster operations
    ApiKey.DELETE_RECORDS: Handler(delete_records.handle, delete_records.error_response),
    ApiKey.DESCRIBE_LOG_DIRS: Handler(describe_log_dirs.handle, describe_log_dirs.error_response),
    ApiKey.DESCRIBE_QUORUM: Handler(describe_quorum.handle, describe_quorum.error_response),
    ApiKey.UNREGISTER_BROKER: Handler(unregister_broker.handle, unregister_broker.error_response),
    ApiKey.ADD_RAFT_VOTER: Handler(raft_voters.handle_add, raft_voters.add_error),
    ApiKey.REMOVE_RAFT_VOTER: Handler(raft_voters.handle_remove, raft_voters.remove_error),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: Handler(client_quotas.handle_describe, client_quotas.describe_error),
    ApiKey.ALTER_CLIENT_QUOTAS: Handler(client_quotas.handle_alter, client_quotas.alter_error),
}


def advertised_versions(handlers: dict[int, Handler] = HANDLERS) -> dict[int, tuple[int, int]]:
    """api_key -> (min, max) for every key that has both a handler and a codec."""
    return {int(key): API_VERSIONS[key] for key in sorted(handlers) if key in API_VERSIONS}
