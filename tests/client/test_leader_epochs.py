"""KIP-320 in our client: metadata never goes back to an older leader epoch, and a Fetch names the
epoch it expects, so a broker with a stale view (paused, or cut off from the controllers while
leadership moved on) can neither win us back nor answer OFFSET_OUT_OF_RANGE for offsets its
successor already served (simulation seed 185: the consumer reset to earliest and re-read)."""
from raftkafka.client.cluster import Cluster
from raftkafka.client.fetcher import FetchState
from tests.client.memnet import MemEnv
from wire.protocol import MetadataResponse

R = MetadataResponse


def answer(leader: int, epoch: int, brokers=(1, 2, 3)):
    return R(throttle_time_ms=0, cluster_id="c", controller_id=1,
             brokers=[R.MetadataResponseBroker(node_id=b, host=f"b{b}", port=9092, rack=None) for b in brokers],
             topics=[R.MetadataResponseTopic(error_code=0, name="t", is_internal=False, partitions=[
                 R.MetadataResponsePartition(error_code=0, partition_index=0, leader_id=leader, leader_epoch=epoch,
                                             replica_nodes=[1, 2, 3], isr_nodes=[1, 2, 3], offline_replicas=[])])])


async def test_an_older_leader_epoch_is_ignored_until_every_broker_says_so(nursery):
    cluster = Cluster(MemEnv(), nursery, "b1:9092")
    cluster._apply(answer(leader=2, epoch=3))
    assert (cluster.leader("t", 0), cluster.leader_epoch("t", 0)) == (2, 3)
    cluster._apply(answer(leader=1, epoch=1))  # a broker that lags: keep the newer leader
    assert (cluster.leader("t", 0), cluster.leader_epoch("t", 0)) == (2, 3)
    cluster._apply(answer(leader=3, epoch=4))  # newer: taken at once
    assert (cluster.leader("t", 0), cluster.leader_epoch("t", 0)) == (3, 4)
    # A topic deleted and re-created (no topic ids before Metadata v10) restarts its epochs:
    # once as many answers in a row as there are brokers agree, that is the truth.
    for _ in range(3):
        cluster._apply(answer(leader=1, epoch=0))
        assert cluster.leader("t", 0) == 3
    cluster._apply(answer(leader=1, epoch=0))
    assert (cluster.leader("t", 0), cluster.leader_epoch("t", 0)) == (1, 0)


async def test_a_fetch_names_the_leader_epoch_it_expects(nursery):
    cluster = Cluster(MemEnv(), nursery, "b1:9092")
    cluster._apply(answer(leader=2, epoch=7))
    state = FetchState(max_partition_bytes=1024, isolation_level=0)
    state.assign([("t", 0)])
    state.seek(("t", 0), 40)
    request = state.build_request([("t", 0)], max_wait_ms=100, min_bytes=1, max_bytes=1 << 20,
                                  leader_epoch=cluster.leader_epoch)
    assert request.topics[0].partitions[0].current_leader_epoch == 7
