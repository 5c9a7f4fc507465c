"""The trio driver of the sans-IO group coordinator (broker.groups) on `__consumer_offsets`:
broker.coordinator_driver.CoordinatorDriver with the group settings.

    driver = GroupDriver(broker)            # Broker builds one; handlers use broker.groups
    broker.publish(...) -> driver.publish   # a metadata publisher (after the replica manager)
    await nursery.start(driver.run)
"""
from __future__ import annotations

from broker.controller_channel import CreatableTopic
from broker.coordinator_driver import CoordinatorDriver
from broker.group_settings import OFFSETS_TOPIC, group_settings
from broker.groups import GroupCoordinator
from metadata.image import EMPTY_IMAGE

__all__ = ["GroupDriver"]


class GroupDriver(CoordinatorDriver):
    name = "group-coordinator"
    topic = OFFSETS_TOPIC

    def __init__(self, broker):
        self.settings = group_settings(EMPTY_IMAGE, broker.static)
        super().__init__(broker, GroupCoordinator(self.settings.group, new_uuid=broker.env.uuid),
                         commit_timeout_ms=self.settings.commit_timeout_ms,
                         load_yield_batches=self.settings.load_yield_batches)

    def topic_spec(self) -> CreatableTopic:
        # As Kafka: exactly offsets.topic.replication.factor replicas; with fewer live
        # brokers the controller refuses and FindCoordinator keeps answering
        # COORDINATOR_NOT_AVAILABLE until enough brokers are up.
        s = self.settings
        return CreatableTopic(OFFSETS_TOPIC, self.coordinator.config.num_partitions,
                              s.offsets_topic_replication_factor, configs=s.offsets_topic_configs())
