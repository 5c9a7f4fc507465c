"""broker.leader_hints (KIP-951): a NOT_LEADER_OR_FOLLOWER Produce answer names the new
leader and its endpoint on the request's listener; other answers name nothing."""
from types import SimpleNamespace

from broker.leader_hints import add_leader_hints
from wire.error_codes import ErrorCode
from wire.protocol import ProduceResponse as R


class _Metadata:
    def __init__(self, partitions, alive):
        self.partitions, self.alive = partitions, alive

    def partition(self, topic, index):
        return self.partitions.get((topic, index))

    def alive_brokers(self):
        return self.alive


def _response(*parts):
    return R(responses=[R.TopicProduceResponse(name="t", partition_responses=[
        R.PartitionProduceResponse(index=i, error_code=code, base_offset=-1) for i, code in parts])])


def test_a_refused_partition_names_its_leader_and_the_leaders_endpoint():
    broker = SimpleNamespace(metadata=_Metadata(
        {("t", 0): SimpleNamespace(leader=2, leader_epoch=7), ("t", 1): SimpleNamespace(leader=1, leader_epoch=3),
         ("t", 2): SimpleNamespace(leader=-1, leader_epoch=4)},
        [SimpleNamespace(node_id=n, host=f"h{n}", port=9000 + n, rack=None) for n in (1, 2, 3)]))
    response = _response((0, ErrorCode.NOT_LEADER_OR_FOLLOWER), (1, ErrorCode.NONE),
                         (2, ErrorCode.NOT_LEADER_OR_FOLLOWER), (3, ErrorCode.NOT_LEADER_OR_FOLLOWER))
    add_leader_hints(broker, response)
    leaders = [(p.current_leader.leader_id, p.current_leader.leader_epoch)
               for p in response.responses[0].partition_responses]
    # Partition 1 succeeded; 2 has no leader; 3 is unknown here: the client asks Metadata for those.
    assert leaders == [(2, 7), (-1, -1), (-1, -1), (-1, -1)]
    assert [(e.node_id, e.host, e.port) for e in response.node_endpoints] == [(2, "h2", 9002)]
    decoded = R.decode(response.encode(10), 10)
    assert decoded.responses[0].partition_responses[0].current_leader.leader_id == 2
    assert decoded.node_endpoints[0].host == "h2"


def test_an_answer_without_refusals_carries_no_endpoints():
    broker = SimpleNamespace(metadata=_Metadata({("t", 0): SimpleNamespace(leader=2, leader_epoch=7)},
                                                [SimpleNamespace(node_id=2, host="h2", port=9002, rack=None)]))
    response = _response((0, ErrorCode.NONE))
    add_leader_hints(broker, response)
    assert response.node_endpoints == []
