"""error_counts: every error_code field of a response, at every depth, NONE included."""
from wire.error_codes import ErrorCode
from wire.protocol import DescribeGroupsResponse, FetchResponse, MetadataResponse
from wire.protocol.error_counts import error_counts


def test_a_fetch_answer_counts_its_own_code_and_each_partitions():
    partition = FetchResponse.PartitionData
    response = FetchResponse(error_code=0, responses=[
        FetchResponse.FetchableTopicResponse(topic="a", partitions=[
            partition(partition_index=0, error_code=0),
            partition(partition_index=1, error_code=ErrorCode.FENCED_LEADER_EPOCH)]),
        FetchResponse.FetchableTopicResponse(topic="b", partitions=[
            partition(partition_index=0, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER),
            partition(partition_index=1, error_code=ErrorCode.FENCED_LEADER_EPOCH)])])
    assert error_counts(response) == {0: 2, ErrorCode.FENCED_LEADER_EPOCH: 2, ErrorCode.NOT_LEADER_OR_FOLLOWER: 1}


def test_fields_that_only_hold_other_data_are_not_walked():
    # Metadata: each topic's and each partition's error code; brokers hold none.
    response = MetadataResponse(brokers=[MetadataResponse.MetadataResponseBroker(node_id=1, host="h", port=1)],
                                topics=[MetadataResponse.MetadataResponseTopic(
                                    error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name="x", partitions=[])])
    assert error_counts(response) == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: 1}
    assert error_counts(DescribeGroupsResponse(groups=[])) == {}
