"""Headers, frames, the registry, message objects and error codes."""
from __future__ import annotations

import struct
import uuid

import pytest

from wire.error_codes import ErrorCode
from wire.errors import DecodeError
from wire.protocol import (
    API_VERSIONS, ApiKey, ApiVersionsRequest, ApiVersionsResponse, ConsumerProtocolAssignment,
    ConsumerProtocolSubscription, DescribeClusterRequest, DescribeClusterResponse, FetchRequest, FetchResponse,
    JoinGroupResponse,
    ListOffsetsRequest, MetadataResponse, ProduceRequest, ProduceResponse, RequestHeader, decode_request,
    decode_subscription,
    encode_assignment, decode_assignment, encode_request, encode_response, encode_response_parts,
    encode_subscription, lookup, response_header_version, split_frame,
)

TABLE_R = {0: (0, 10), 1: (4, 11), 2: (1, 3), 3: (1, 5), 8: (2, 3), 9: (1, 3), 10: (0, 1), 11: (0, 5), 12: (0, 1),
           13: (0, 1), 14: (0, 3), 15: (0, 3), 16: (0, 5), 17: (0, 1), 18: (0, 3), 19: (0, 4), 20: (0, 3),
           22: (0, 1), 32: (0, 2), 33: (0, 1), 36: (0, 1), 37: (0, 1), 42: (0, 1)}
EXTRAS = {23: (0, 3), 44: (0, 1), 47: (0, 0), 60: (0, 1)}
# Static membership (KIP-345) raised the group APIs past table R to the versions carrying
# group_instance_id (OffsetFetch v5 returns the leader epoch OffsetCommit v6 stores; v6 is flexible,
# v7 asks for stable offsets only, KIP-447).
STATIC_MEMBERSHIP = {8: (2, 7), 9: (1, 7), 12: (0, 3), 13: (0, 3), 15: (0, 4)}
# Metadata v7 carries each partition's leader epoch: our client ignores metadata from a broker
# whose view is older than one it has seen, and fences its Fetches with it (KIP-320).
# v8-12: authorized operations (KIP-430), flexible versions, topic ids and lookups by id.
LEADER_EPOCHS = {3: (1, 12)}
# Fetch v12-16: last fetched epoch and diverging epoch (KIP-595), topic ids, the replica state
# (KIP-903) and KIP-951 leader hints.
FETCH_DIVERGENCE = {1: (4, 16)}
ACLS = {29: (0, 3), 30: (0, 3), 31: (0, 3)}  # DescribeAcls, CreateAcls, DeleteAcls
# SaslAuthenticate v2 (flexible); the SCRAM credential admin APIs (KIP-554).
SECURITY = {36: (0, 2), 50: (0, 0), 51: (0, 0)}
# ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments (cluster operations).
CLUSTER_OPERATIONS = {43: (0, 2), 45: (0, 0), 46: (0, 0)}
# Cluster operations: DeleteRecords, DescribeLogDirs, DescribeQuorum, UnregisterBroker,
# AddRaftVoter, RemoveRaftVoter.
OPERATIONS = {21: (0, 2), 35: (0, 4), 55: (0, 2), 64: (0, 0), 80: (0, 0), 81: (0, 0)}
# AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, WriteTxnMarkers, TxnOffsetCommit, DescribeProducers,
# DescribeTransactions, ListTransactions
TRANSACTIONS = {24: (0, 4), 25: (0, 2), 26: (0, 2), 27: (0, 0), 28: (0, 3), 61: (0, 0), 65: (0, 0), 66: (0, 1)}
QUOTAS = {48: (0, 1), 49: (0, 1)}  # DescribeClientQuotas, AlterClientQuotas (KIP-546)
# CreateTopics, DeleteTopics, CreatePartitions up to the versions strict about
# controller_mutation_rate (THROTTLING_QUOTA_EXCEEDED, KIP-599)
MUTATION_QUOTAS = {19: (0, 6), 20: (0, 5), 37: (0, 3)}
DESCRIBE_TOPIC_PARTITIONS = {75: (0, 0)}  # KIP-966: paged, with eligible leader replicas


def test_api_versions_is_table_r_plus_the_extras():
    assert API_VERSIONS == {**TABLE_R, **EXTRAS, **STATIC_MEMBERSHIP, **LEADER_EPOCHS, **FETCH_DIVERGENCE, **ACLS, **SECURITY,
                            **CLUSTER_OPERATIONS, **OPERATIONS, **TRANSACTIONS, **QUOTAS, **MUTATION_QUOTAS,
                            **DESCRIBE_TOPIC_PARTITIONS}
    assert list(API_VERSIONS) == sorted(API_VERSIONS)
    req, resp = lookup(ApiKey.FETCH, 11)
    assert (req.__name__, resp.__name__) == ("FetchRequest", "FetchResponse")


def test_api_versions_response_always_uses_header_v0():
    body = ApiVersionsResponse(api_keys=[ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=3)])
    frame = encode_response(RequestHeader(18, 3, 77), body)
    # size, correlation id, then the body directly: no tagged-field byte after the correlation id
    assert frame[4:8] == struct.pack(">i", 77)
    assert frame[8:] == body.encode(3)
    assert response_header_version(18, 3) == 0


def test_flexible_response_gets_header_v1_and_nonflexible_v0():
    body = DescribeClusterResponse(cluster_id="c")
    frame = encode_response(RequestHeader(60, 1, 5), body)
    assert frame[8:9] == b"\x00" and frame[9:] == body.encode(1)
    assert response_header_version(60, 0) == 1
    assert response_header_version(3, 5) == 0
    parts = encode_response_parts(RequestHeader(60, 1, 5), body)
    assert b"".join(parts) == frame
    with pytest.raises(ValueError):
        encode_response(RequestHeader(3, 5, 1), body)  # a DescribeCluster body for a Metadata request


def test_request_header_v2_keeps_an_int16_client_id():
    frame = encode_request(ApiVersionsRequest(client_software_name="n", client_software_version="1"), 3, 9, "cid")
    # size | key 18 | version 3 | corr 9 | int16 len 3 "cid" | empty tags | body (compact strings)
    assert frame[4:] == struct.pack(">hhih", 18, 3, 9, 3) + b"cid" + b"\x00" + b"\x02n\x021\x00"
    header, body = decode_request(frame[4:])
    assert header == RequestHeader(18, 3, 9, "cid")
    assert body.client_software_name == "n"


def test_request_header_v1_for_nonflexible_versions():
    frame = encode_request(DescribeClusterRequest(), 0, 1, None)  # flexible from v0: header v2
    assert frame[4:16] == struct.pack(">hhih", 60, 0, 1, -1) + b"\x00" + b"\x00"  # tags, then the bool
    frame = encode_request(FetchRequest(max_wait_ms=5), 11, 2, "c")
    assert frame[12:15] == b"\x00\x01c"
    assert decode_request(frame[4:])[1].max_wait_ms == 5


def test_split_frame():
    frame = encode_request(ApiVersionsRequest(), 0, 1, "c")
    assert split_frame(frame[:-1]) is None
    view, end = split_frame(frame + b"\x00\x00")
    assert bytes(view) == frame[4:] and end == len(frame)
    with pytest.raises(DecodeError):
        split_frame(struct.pack(">i", 1 << 30))


def test_api_versions_fallback_answers_v0_to_any_version():
    body = ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=[
        ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=3)])
    frame = encode_response(RequestHeader(18, 4, 3), body, version=0)
    assert frame == struct.pack(">iih", 4 + 2 + 4 + 6, 3, 35) + struct.pack(">ihhh", 1, 18, 0, 3)


def test_defaults_for_fields_absent_in_a_version():
    decoded = ProduceResponse.decode(ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(
        name="t", partition_responses=[ProduceResponse.PartitionProduceResponse(
            index=1, base_offset=5, log_append_time_ms=123, log_start_offset=9)])]).encode(2), 2)
    part = decoded.responses[0].partition_responses[0]
    assert (part.base_offset, part.log_append_time_ms, part.log_start_offset, part.error_message) == (5, 123, -1, None)
    assert decoded.throttle_time_ms == 0
    assert FetchRequest().replica_id == -1 and FetchRequest().max_bytes == 0x7FFFFFFF
    assert ProduceRequest().transactional_id is None


def test_constructor_lists_are_not_shared_and_unknown_args_fail():
    a, b = MetadataResponse(), MetadataResponse()
    a.brokers.append(1)
    assert b.brokers == []
    with pytest.raises(TypeError):
        MetadataResponse(not_a_field=1)
    assert "MetadataResponse(" in repr(a)
    assert JoinGroupResponse(member_id="m") != JoinGroupResponse(member_id="n")


def test_unknown_tagged_fields_survive_a_roundtrip():
    body = ApiVersionsResponse(finalized_features_epoch=3).encode(3)
    # Replace the trailing tag section (one known tag: 1) with known + an unknown tag 9.
    known = b"\x01\x08" + struct.pack(">q", 3)
    assert body.endswith(b"\x01" + known)
    patched = body[: -len(known) - 1] + b"\x02" + known + b"\x09\x02hi"
    decoded = ApiVersionsResponse.decode(patched, 3)
    assert decoded.finalized_features_epoch == 3 and decoded._unknown_tags == [(9, b"hi")]
    assert decoded.encode(3) == patched


def test_consumer_protocol_reads_newer_versions_by_prefix():
    sub = ConsumerProtocolSubscription(topics=["a", "b"], user_data=b"u")
    future = encode_subscription(sub, 3)[2:]  # the newest known layout, then unknown fields
    blob = struct.pack(">h", 7) + future + b"future-fields"
    version, decoded = decode_subscription(blob)
    assert version == 7 and decoded.topics == ["a", "b"] and decoded.user_data == b"u"
    with pytest.raises(DecodeError):
        decode_subscription(encode_subscription(sub, 1) + b"x")  # known version: no trailing bytes
    assignment = ConsumerProtocolAssignment(assigned_partitions=[
        ConsumerProtocolAssignment.TopicPartition(topic="a", partitions=[0, 2])])
    assert decode_assignment(encode_assignment(assignment, 3)) == (3, assignment)


def test_error_codes():
    assert ErrorCode.NONE == 0 and ErrorCode.UNKNOWN_SERVER_ERROR == -1
    assert ErrorCode(6) is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER.retriable and ErrorCode.NOT_LEADER_OR_FOLLOWER.invalid_metadata
    assert ErrorCode.REQUEST_TIMED_OUT.retriable and not ErrorCode.REQUEST_TIMED_OUT.invalid_metadata
    assert not ErrorCode.UNSUPPORTED_VERSION.retriable
    assert not ErrorCode.REBALANCE_IN_PROGRESS.retriable
    assert ErrorCode.of(12345) is ErrorCode.UNKNOWN_SERVER_ERROR
    reference = {1: False, 2: True, 3: True, 5: True, 6: True, 7: True, 10: False, 14: True, 15: True, 16: True,
                 17: False, 19: True, 20: True, 21: False, 22: False, 25: False, 27: False, 35: False, 36: False,
                 41: True, 42: False, 45: False, 47: False, 56: True, 59: False, 68: False, 69: False, 70: True,
                 74: True, 75: True, 76: False, 78: True, 79: False, 82: False, 87: False, 89: True, 100: True}
    assert {code: ErrorCode(code).retriable for code in reference} == reference


def test_decode_request_counts_array_elements_and_stops_past_max_items():
    L = ListOffsetsRequest
    request = L(replica_id=-1, isolation_level=0, topics=[
        L.ListOffsetsTopic(name="a", partitions=[L.ListOffsetsPartition(partition_index=i, timestamp=-1) for i in range(3)]),
        L.ListOffsetsTopic(name="b", partitions=[]),
    ])
    for version in (1, 3):
        frame = encode_request(request, version, 1, "c")[4:]
        header, body = decode_request(frame)
        assert header.item_count == 5 and body == request
        assert decode_request(frame, max_items=5)[0].item_count == 5
        with pytest.raises(DecodeError, match="more than 4 array elements"):
            decode_request(frame, max_items=4)
        assert decode_request(frame)[0].item_count == 5  # the limit held for that one request only


def test_produce_v10_carries_the_current_leader_only_when_one_is_named():
    R = ProduceResponse
    refused = R.PartitionProduceResponse(index=0, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER, base_offset=-1,
                                         current_leader=R.LeaderIdAndEpoch(leader_id=2, leader_epoch=7))
    plain = R.PartitionProduceResponse(index=1, base_offset=5)
    body = R(responses=[R.TopicProduceResponse(name="t", partition_responses=[refused, plain])],
             node_endpoints=[R.NodeEndpoint(node_id=2, host="h2", port=9092, rack=None)])
    decoded = R.decode(body.encode(10), 10)
    first, second = decoded.responses[0].partition_responses
    assert (first.current_leader.leader_id, first.current_leader.leader_epoch) == (2, 7)
    assert (second.current_leader.leader_id, second.current_leader.leader_epoch) == (-1, -1)
    assert [(e.node_id, e.host, e.port, e.rack) for e in decoded.node_endpoints] == [(2, "h2", 9092, None)]
    # A default struct is not sent: v9 and v10 encode an answer without hints alike.
    no_hints = R(responses=[R.TopicProduceResponse(name="t", partition_responses=[plain])])
    assert no_hints.encode(10) == no_hints.encode(9)
    assert R.decode(body.encode(9), 9).node_endpoints == []


def _fetch_request(version: int):
    Q = FetchRequest
    topic_id = uuid.UUID(int=0xABC)
    return Q(replica_id=2 if version < 15 else -1,
             replica_state=Q.ReplicaState(replica_id=2, replica_epoch=9) if version >= 15 else Q.ReplicaState(),
             max_wait_ms=500, min_bytes=1, max_bytes=1000, isolation_level=1,
             session_id=7 if version >= 7 else 0, session_epoch=3 if version >= 7 else -1,
             topics=[Q.FetchTopic(topic="t" if version < 13 else "", topic_id=topic_id if version >= 13 else ZERO,
                                  partitions=[Q.FetchPartition(
                                      partition=1, current_leader_epoch=4 if version >= 9 else -1, fetch_offset=10,
                                      last_fetched_epoch=3 if version >= 12 else -1, log_start_offset=2 if version >= 5 else -1,
                                      partition_max_bytes=100)])],
             forgotten_topics_data=[Q.ForgottenTopic(topic="u" if version < 13 else "",
                                                     topic_id=topic_id if version >= 13 else ZERO, partitions=[0])]
             if version >= 7 else [],
             rack_id="r" if version >= 11 else "")


ZERO = uuid.UUID(int=0)


@pytest.mark.parametrize("version", range(4, 17))
def test_fetch_request_round_trips_at_every_version(version):
    request = _fetch_request(version)
    decoded = FetchRequest.decode(request.encode(version), version)
    assert decoded == request
    if version >= 15:  # the follower's id travels only in the tagged replica state
        assert decoded.replica_id == -1 and (decoded.replica_state.replica_id, decoded.replica_state.replica_epoch) == (2, 9)
    if version >= 13:
        assert decoded.topics[0].topic == "" and decoded.topics[0].topic_id == uuid.UUID(int=0xABC)


@pytest.mark.parametrize("version", range(4, 17))
def test_fetch_response_round_trips_with_its_tagged_fields(version):
    R = FetchResponse
    hinted = version >= 12
    part = R.PartitionData(partition_index=1, error_code=ErrorCode.FENCED_LEADER_EPOCH, high_watermark=5, last_stable_offset=5,
                           log_start_offset=0 if version >= 5 else -1, aborted_transactions=[R.AbortedTransaction(producer_id=1, first_offset=2)],
                           preferred_read_replica=-1 if version < 11 else 3, records=b"")
    if hinted:
        part.diverging_epoch = R.EpochEndOffset(epoch=2, end_offset=8)
        part.current_leader = R.LeaderIdAndEpoch(leader_id=3, leader_epoch=6)
        part.snapshot_id = R.SnapshotId(end_offset=4, epoch=1)
    body = R(throttle_time_ms=0, error_code=0, session_id=9 if version >= 7 else 0, responses=[R.FetchableTopicResponse(
        topic="t" if version < 13 else "", topic_id=uuid.UUID(int=5) if version >= 13 else ZERO, partitions=[part])],
        node_endpoints=[R.NodeEndpoint(node_id=3, host="h3", port=9093, rack="a")] if version >= 16 else [])
    decoded = R.decode(body.encode(version), version)
    assert decoded == body
    if hinted:
        got = decoded.responses[0].partitions[0]
        assert (got.diverging_epoch.epoch, got.diverging_epoch.end_offset) == (2, 8)
        assert (got.current_leader.leader_id, got.snapshot_id.end_offset) == (3, 4)
    # Absent (default) tagged fields cost nothing on the wire.
    plain = R(throttle_time_ms=0, error_code=0, session_id=0, responses=[])
    if version >= 16:
        assert plain.encode(16) == plain.encode(15)
