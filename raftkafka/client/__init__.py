"""raftkafka's own Kafka client: trio-based and Env-driven, so one code path runs over TCP,
inside the deterministic simulation, in the CLI and in the Spark source.

Depends only on `wire` and the Env (`storage.env`, its timers in `storage.deadline_reaper`). Public surface:

    Producer, RecordFuture, RecordMetadata          (raftkafka.client.producer)
    Consumer, ConsumerRecord, CommitFailedError     (raftkafka.client.consumer)
    Admin, NewTopic, RESOURCE_TOPIC, RESOURCE_BROKER (raftkafka.client.admin)
    KafkaError and its family                       (raftkafka.client.errors)
    murmur2, Partitioner                            (raftkafka.client.partitioner)
    BlockingProducer, BlockingConsumer, BlockingAdmin (raftkafka.client.blocking; import it
        explicitly — it starts threads and is meant for scripts and Spark executors only)
"""
from raftkafka.client.admin import RESOURCE_BROKER, RESOURCE_TOPIC, Admin, NewTopic
from raftkafka.client.consumer import CommitFailedError, Consumer, ConsumerRecord
from raftkafka.client.errors import (
    BrokerResponseError,
    ClientClosedError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    UnsupportedVersionError,
)
from raftkafka.client.futures import RecordFuture, RecordMetadata
from raftkafka.client.partitioner import Partitioner, murmur2
from raftkafka.client.producer import Producer

__all__ = [
    "Admin", "NewTopic", "RESOURCE_TOPIC", "RESOURCE_BROKER",
    "Consumer", "ConsumerRecord", "CommitFailedError",
    "Producer", "RecordFuture", "RecordMetadata",
    "KafkaError", "BrokerResponseError", "KafkaConnectionError", "KafkaTimeoutError",
    "UnsupportedVersionError", "ClientClosedError",
    "Partitioner", "murmur2",
]
