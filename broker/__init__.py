"""The broker role: the Kafka-protocol data plane (DESIGN §8).

Public surface:

    Broker(env, BrokerConfig, ControllerChannel, log_manager=None)
        .publish(delta, image)      metadata publisher (the MetadataLoader calls it)
        .run(task_status=...)       serve until cancelled; started(port)
    BrokerConfig                    node id, listener, data dirs, static Kafka-named configs
    ControllerChannel, ControllerReply, ControllerUnavailableError
                                    the seam for admin requests forwarded to the active controller
    MetadataCache, ReplicaManager, Partition, FetchPurgatory   the parts, for tests and replication
    Replication: ReplicaFetcherManager (followers, one fetcher per leader), AlterPartitionManager
        (ISR changes to the controller), ReplicationSettings (lag time, clock, ISR hooks);
        broker.isr holds the pure ISR/HW rules, broker.delayed_produce the acks=all waits.
"""
from broker.broker import Broker
from broker.broker_config import BrokerConfig
from broker.controller_channel import ControllerChannel, ControllerReply, ControllerUnavailableError
from broker.fetch_purgatory import FetchPurgatory
from broker.metadata_cache import MetadataCache
from broker.alter_partition_manager import AlterPartitionManager
from broker.partition import Partition, ReplicationSettings, Role
from broker.replica_fetcher import ReplicaFetcherManager
from broker.replica_manager import ReplicaManager

__all__ = [
    "Broker", "BrokerConfig", "ControllerChannel", "ControllerReply", "ControllerUnavailableError",
    "FetchPurgatory", "MetadataCache", "Partition", "ReplicaManager", "Role",
    "AlterPartitionManager", "ReplicaFetcherManager", "ReplicationSettings",
]
