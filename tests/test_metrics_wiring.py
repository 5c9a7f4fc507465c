"""raftkafka.node.metrics_wiring: the scrape-time gauges, against real Raft cores and real metadata images."""
from __future__ import annotations

from types import SimpleNamespace

from metadata.controller.topics import CreatableTopic
from metadata.image import EMPTY_IMAGE
from metadata.records import PartitionChange, NO_LEADER
from metrics.registry import MetricsRegistry
from raft.config import RaftConfig
from raft.quorum_state import Role
from raftkafka.node.metrics_wiring import (
    RAFT_ROLES, consumer_group_lag, controller_samples, raft_samples, register_controller_gauges,
    register_group_lag, register_raft_gauges, under_replicated,
)
from tests.metadata.helpers import apply, cluster, with_topic
from tests.raft.cluster import Network, SimNode
from tests.test_metrics import samples_of


class ThreeVoters:
    """Three real RaftCores, messages delivered at once, time advanced to the next deadline."""

    def __init__(self) -> None:
        self.net = Network()
        self.now = 0.0
        self.nodes = {n: SimNode(n, [1, 2, 3], RaftConfig(), seed=n) for n in (1, 2, 3)}
        for node in self.nodes.values():
            node.start(0.0, self.net)

    def step(self) -> None:
        while self.net.queue:
            queue, self.net.queue = self.net.queue, []
            for src, dst, msg in queue:
                node = self.nodes[dst]
                if self.net.connected(src, dst):
                    node.submit(node.core.handle(src, msg, self.now), self.now, self.net)
        self.now = min(min(n.deadline for n in self.nodes.values()), self.now + 0.05)
        for nid in sorted(self.nodes):
            node = self.nodes[nid]
            if node.deadline <= self.now:
                node.submit(node.core.tick(self.now), self.now, self.net)

    def run_until(self, predicate, limit: float = 30.0) -> None:
        while not predicate():
            assert self.now < limit, "condition not reached"
            self.step()

    def leader(self) -> SimNode | None:
        leaders = [n for n in self.nodes.values() if n.core.status().role is Role.LEADER]
        return leaders[0] if leaders else None


def _registry_for(node: SimNode, image=lambda: None) -> MetricsRegistry:
    r = MetricsRegistry()
    register_raft_gauges(r, node.core.status)
    register_controller_gauges(r, lambda: node.core.status().role is Role.LEADER, image)
    return r


def test_raft_gauges_follow_real_cores_through_election_and_commits():
    c = ThreeVoters()
    registries = {nid: _registry_for(node) for nid, node in c.nodes.items()}
    before = registries[1].render()
    assert samples_of(before, "raftkafka_raft_leader_id") == {(): -1}
    assert samples_of(before, "raftkafka_active_controller") == {(): 0}

    c.run_until(lambda: c.leader() is not None and all(
        n.core.status().leader_id == c.leader().node_id for n in c.nodes.values()))
    leader = c.leader()
    leader.submit(leader.core.append([b"a", b"b", b"c"], c.now)[1], c.now, c.net)
    c.run_until(lambda: all(n.core.status().high_watermark == leader.core.status().log_end_offset
                            for n in c.nodes.values()))

    for nid, registry in registries.items():
        text = registry.render()
        status = c.nodes[nid].core.status()
        assert samples_of(text, "raftkafka_raft_leader_id") == {(): leader.node_id}
        assert samples_of(text, "raftkafka_raft_epoch") == {(): status.epoch} and status.epoch >= 1
        assert samples_of(text, "raftkafka_raft_high_watermark") == {(): status.high_watermark}
        assert samples_of(text, "raftkafka_raft_log_end_offset") == {(): status.log_end_offset}
        assert samples_of(text, "raftkafka_active_controller") == {(): int(nid == leader.node_id)}
        roles = samples_of(text, "raftkafka_raft_role")
        assert sorted(k[0][1] for k in roles) == sorted(RAFT_ROLES)
        assert {k[0][1] for k, v in roles.items() if v == 1} == {"Leader" if nid == leader.node_id else "Follower"}
        lag = samples_of(text, "raftkafka_raft_follower_lag")
        if nid == leader.node_id:
            assert lag == {(("voter", str(v)),): 0 for v in (1, 2, 3)}
        else:
            assert lag == {}  # only the leader knows the others' log ends

    # Cut one follower off: the leader's lag for it grows with every new entry.
    behind = next(n for n in sorted(c.nodes) if n != leader.node_id)
    c.net.isolate(behind, list(c.nodes))
    leader.submit(leader.core.append([b"d", b"e"], c.now)[1], c.now, c.net)
    for _ in range(5):
        c.step()
    lag = samples_of(registries[leader.node_id].render(), "raftkafka_raft_follower_lag")
    assert lag[(("voter", str(behind)),)] == 2
    assert sum(lag.values()) == 2


def test_raft_samples_of_an_observer():
    status = SimpleNamespace(role=Role.UNATTACHED, leader_id=None, epoch=4, high_watermark=10,
                             log_end_offset=12, voters=[], observer=True)
    samples = raft_samples(status)
    assert samples["raftkafka_raft_leader_id"] == -1
    assert samples["raftkafka_raft_role"][("Unattached",)] == 1
    assert sum(samples["raftkafka_raft_role"].values()) == 1
    assert samples["raftkafka_raft_follower_lag"] == {}


def test_controller_gauges_count_the_committed_image_on_the_active_controller_only():
    image = cluster(3, fenced=(3,))
    image = with_topic(image, "a", 3, 2)
    image = with_topic(image, "b", 2, 1, seed=1)
    b = image.topics_by_name["b"]
    image = apply(image, [PartitionChange(partition_id=0, topic_id=b.topic_id, leader=NO_LEADER)])
    active = controller_samples(True, image)
    assert active == {"raftkafka_active_controller": 1, "raftkafka_offline_partitions": 1,
                      "raftkafka_global_topics": 2, "raftkafka_global_partitions": 5,
                      "raftkafka_fenced_brokers": 1, "raftkafka_active_brokers": 2}
    assert set(controller_samples(False, image).values()) == {0}
    assert controller_samples(True, None) == {**{k: 0 for k in active}, "raftkafka_active_controller": 1}
    assert controller_samples(True, EMPTY_IMAGE)["raftkafka_global_partitions"] == 0


def _partition(leader: bool, replicas, isr):
    return SimpleNamespace(is_leader=leader, registration=SimpleNamespace(replicas=tuple(replicas), isr=tuple(isr)))


def test_under_replicated_counts_led_partitions_with_a_short_isr():
    parts = [
        _partition(True, [1, 2, 3], [1, 2, 3]),
        _partition(True, [1, 2, 3], [1, 3]),  # under-replicated
        _partition(True, [1], [1]),
        _partition(False, [2, 1], [2]),  # short ISR, but its leader reports it
        _partition(True, [1, 2], [1]),  # under-replicated
    ]
    assert under_replicated(parts) == 2
    assert under_replicated([]) == 0


def test_consumer_group_lag_and_its_gauge():
    ends = {("t", 0): 100, ("t", 1): 5, ("u", 0): 7}
    committed = [("g1", "t", 0, 40), ("g1", "t", 1, 9), ("g2", "u", 0, 7), ("g2", "x", 0, 3), ("g3", "t", 0, -1)]
    lag = consumer_group_lag(committed, lambda t, p: ends.get((t, p)))
    # Committed past the end (a truncated log) reads as 0, never negative; unknown partitions are left out.
    assert lag == {("g1", "t", 0): 60, ("g1", "t", 1): 0, ("g2", "u", 0): 0}
    r = MetricsRegistry()
    register_group_lag(r, lambda: committed, lambda t, p: ends.get((t, p)))
    assert samples_of(r.render(), "raftkafka_consumer_group_lag")[
        (("group", "g1"), ("partition", "0"), ("topic", "t"))] == 60
    ends[("t", 0)] = 140
    assert samples_of(r.render(), "raftkafka_consumer_group_lag")[
        (("group", "g1"), ("partition", "0"), ("topic", "t"))] == 100
