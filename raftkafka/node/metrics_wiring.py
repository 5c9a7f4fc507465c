"""Plug a node's parts into its MetricsRegistry.

State is exported as scrape-time gauges read from the parts' public status
APIs, so nothing on the hot path keeps a second copy of it:

    registry = MetricsRegistry()
    register_node_gauges(registry, node)          # Raft on every node, controller gauges on controllers
    # (or piecewise: register_raft_gauges(registry, driver.status), register_controller_gauges(...))
    broker.metrics = BrokerMetrics(registry)                      # event counters
    register_broker_gauges(registry, broker)
    register_group_lag(registry, tracker.committed, tracker.end_offset)   # tracker: group_lag.GroupLagTracker
    port = await nursery.start(MetricsServer(env, registry).serve, host, config.metrics_port)

Event counters (bytes/records in and out, requests and latency, ISR churn)
are `broker.metrics.BrokerMetrics` methods called by the broker itself.
The pure helpers (`raft_samples`, `controller_samples`,
`under_replicated`, `consumer_group_lag`) are what the gauges compute,
kept separate so they can be tested without a running node.
"""
from __future__ import annotations

from typing import Callable, Iterable

from metadata.controller.mutation_quota import MutationStats
from metadata.image import MetadataImage
from metrics.registry import MetricsRegistry
from raft.quorum_state import Role
from raft.status import QuorumStatus

__all__ = [
    "raft_samples",
    "controller_samples",
    "under_replicated",
    "consumer_group_lag",
    "register_raft_gauges",
    "register_controller_gauges",
    "register_node_gauges",
    "register_mutation_quota_gauges",
    "register_broker_gauges",
    "register_group_lag",
    "RAFT_ROLES",
]

NO_LEADER = -1
# Every role has a series (0 or 1) from the first scrape, so a dashboard can graph any of them.
RAFT_ROLES = tuple(sorted(role.value for role in Role))


# ---------------------------------------------------------------------------- raft


def raft_samples(status: QuorumStatus) -> dict[str, object]:
    """Metric name -> value (or per-label mapping) for one Raft status."""
    leader_lag = {}
    if status.role is Role.LEADER:
        for voter in status.voters:
            if voter.log_end_offset >= 0:
                leader_lag[(voter.replica_id,)] = max(0, status.log_end_offset - voter.log_end_offset)
    roles = {(role,): int(role == status.role.value) for role in RAFT_ROLES}
    return {
        "raftkafka_raft_leader_id": NO_LEADER if status.leader_id is None else status.leader_id,
        "raftkafka_raft_epoch": status.epoch,
        "raftkafka_raft_high_watermark": status.high_watermark,
        "raftkafka_raft_log_end_offset": status.log_end_offset,
        "raftkafka_raft_role": roles,
        "raftkafka_raft_follower_lag": leader_lag,
    }


def register_raft_gauges(registry: MetricsRegistry, status: Callable[[], QuorumStatus]) -> None:
    """Raft leader/epoch/HW/LEO/role/follower lag, read from `status()` (e.g. `RaftDriver.status`)."""
    for name in ("raftkafka_raft_leader_id", "raftkafka_raft_epoch", "raftkafka_raft_high_watermark",
                 "raftkafka_raft_log_end_offset", "raftkafka_raft_role", "raftkafka_raft_follower_lag"):
        registry.gauge(name).set_function(lambda name=name: raft_samples(status())[name])


# ---------------------------------------------------------------------------- controller


def controller_samples(is_active: bool, image: MetadataImage | None) -> dict[str, int]:
    """KafkaController's gauges: the cluster-wide ones only on the active controller (Kafka does the
    same, so summing over nodes or taking the max gives the cluster's figure)."""
    if not is_active or image is None:
        return {"raftkafka_active_controller": int(is_active), "raftkafka_offline_partitions": 0,
                "raftkafka_global_topics": 0, "raftkafka_global_partitions": 0,
                "raftkafka_fenced_brokers": 0, "raftkafka_active_brokers": 0}
    fenced = sum(1 for reg in image.brokers.values() if reg.fenced)
    return {
        "raftkafka_active_controller": 1,
        "raftkafka_offline_partitions": image.leaderless_partitions(),
        "raftkafka_global_topics": len(image.topics_by_name),
        "raftkafka_global_partitions": image.partition_count(),
        "raftkafka_fenced_brokers": fenced,
        "raftkafka_active_brokers": len(image.brokers) - fenced,
    }


def register_controller_gauges(registry: MetricsRegistry, is_active: Callable[[], bool],
                               image: Callable[[], MetadataImage | None]) -> None:
    """On controllers: active controller, offline partitions, topic/partition/broker counts.
    `is_active()` says whether this node is the active controller (e.g. `ControllerService.active`,
    or the Raft role is Leader); `image()` is its committed image (`ControllerStateMachine.image`)."""

    def sample(name: str):
        return controller_samples(is_active(), image())[name]

    for name in ("raftkafka_active_controller", "raftkafka_offline_partitions", "raftkafka_global_topics",
                 "raftkafka_global_partitions", "raftkafka_fenced_brokers", "raftkafka_active_brokers"):
        registry.gauge(name).set_function(lambda name=name: sample(name))


def register_node_gauges(registry: MetricsRegistry, node) -> None:
    """Raft gauges, plus the controller ones on a controller, of a `raftkafka.node.ControllerNode`.

    Safe to call before the node runs: the gauges read `node.driver` and the app at scrape
    time, and show no samples until those exist."""
    register_raft_gauges(registry, lambda: node.driver.status())
    controller = getattr(node.app, "controller", None)
    if controller is not None:
        def is_active() -> bool:
            return bool(controller.service and controller.service.active)

        register_controller_gauges(registry, is_active, lambda: controller.state_machine.image)

        def mutation_stats() -> list[MutationStats]:
            if not is_active() or controller.requests is None:
                return []
            return controller.requests.mutation_quotas.stats(controller.env.now())

        register_mutation_quota_gauges(registry, mutation_stats)


_MUTATION_GAUGES = (("raftkafka_controller_mutation_rate", "rate"), ("raftkafka_controller_mutation_tokens", "tokens"),
                    ("raftkafka_controller_mutation_throttle_time_ms", "throttle_ms"),
                    ("raftkafka_controller_mutation_quota", "bound"))


def register_mutation_quota_gauges(registry: MetricsRegistry, stats: Callable[[], list[MutationStats]]) -> None:
    """controller_mutation_rate per quota entity (user, client_id labels; "" for a part shared at
    its precedence level), from `stats()`: the active controller's MutationQuotas.stats."""
    for name, field in _MUTATION_GAUGES:
        registry.gauge(name).set_function(
            lambda field=field: {(s.user, s.client_id): getattr(s, field) for s in stats()})


# ---------------------------------------------------------------------------- broker


def under_replicated(partitions: Iterable) -> int:
    """Partitions led here whose ISR is smaller than the replica set (Kafka's UnderReplicatedPartitions)."""
    return sum(1 for p in partitions
               if p.is_leader and len(p.registration.isr) < len(p.registration.replicas))


def register_broker_gauges(registry: MetricsRegistry, broker) -> None:
    """Replica-manager and listener state of a `broker.Broker`."""
    replicas = broker.replicas

    def hosted():
        return [replicas.partitions[key] for key in sorted(replicas.partitions)]

    registry.gauge("raftkafka_under_replicated_partitions").set_function(lambda: under_replicated(hosted()))
    registry.gauge("raftkafka_leader_partitions").set_function(lambda: sum(1 for p in hosted() if p.is_leader))
    registry.gauge("raftkafka_partitions").set_function(lambda: len(replicas.partitions))
    registry.gauge("raftkafka_offline_log_partitions").set_function(lambda: len(replicas.offline))
    logs = broker.log_manager
    registry.gauge("raftkafka_uncleanable_partitions").set_function(  # logs since deleted are not counted
        lambda: sum(1 for tp, (log, _) in logs.uncleanable.items() if logs.get_log(*tp) is log))
    registry.gauge("raftkafka_broker_connections").set_function(lambda: broker.server.connections)
    shrinks = registry.counter("raftkafka_isr_shrinks_total")
    expands = registry.counter("raftkafka_isr_expands_total")
    broker.replicas.replication.on_isr_change = lambda kind: (shrinks if kind == "shrink" else expands).inc()


# ---------------------------------------------------------------------------- consumer groups

CommittedOffsets = Iterable[tuple[str, str, int, int]]  # (group, topic, partition, committed offset)


def consumer_group_lag(committed: CommittedOffsets,
                       end_offset: Callable[[str, int], int | None]) -> dict[tuple[str, str, int], int]:
    """(group, topic, partition) -> high watermark minus committed offset, never negative.

    Partitions whose end is not known (`end_offset` returns None: the topic is gone, or its
    leader has not answered yet) are left out. Only the group's coordinator reports it, so
    no lag is reported twice; `group_lag.GroupLagTracker` knows every partition's end."""
    out = {}
    for group, topic, partition, offset in committed:
        end = end_offset(topic, partition)
        if end is None or offset < 0:
            continue
        out[(group, topic, partition)] = max(0, end - offset)
    return dict(sorted(out.items()))


def register_group_lag(registry: MetricsRegistry, committed: Callable[[], CommittedOffsets],
                       end_offset: Callable[[str, int], int | None]) -> None:
    """`committed()` lists the group coordinator's committed offsets at scrape time."""
    gauge = registry.gauge("raftkafka_consumer_group_lag")
    gauge.set_function(lambda: consumer_group_lag(committed(), end_offset))
