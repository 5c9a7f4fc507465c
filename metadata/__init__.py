"""Cluster metadata: records, images and deltas, snapshots, the loader, and the active
controller (metadata.controller: its service, RPCs and pure decision functions).

Public surface:
- records: `encode_record` / `decode_record` and the record dataclasses (metadata.records)
- `MetadataImage`, `EMPTY_IMAGE` (metadata.image); `MetadataDelta` (metadata.delta)
- `image_to_records`, `image_from_records`, `delta_between` (metadata.snapshot)
- `MetadataLoader`, `MetadataPublisher` (metadata.loader)
- config definitions and layering (metadata.config_definitions)
- controller operations, each `(records or batches, result)` over an image:
  metadata.controller.{topics, brokers, heartbeats, alter_partition, dynamic_configs, producer_ids,
  elect_leaders, election, placement, replication}
"""
from metadata.delta import LocalReplicaChanges, MetadataDelta, TopicPartition
from metadata.errors import ApiError, InvalidRecordError
from metadata.image import EMPTY_IMAGE, BrokerRegistration, MetadataImage, TopicImage
from metadata.loader import MetadataLoader, MetadataPublisher
from metadata.partition import PartitionRegistration
from metadata.records import decode_record, encode_record
from metadata.snapshot import delta_between, image_from_records, image_to_records

__all__ = [
    "LocalReplicaChanges", "MetadataDelta", "TopicPartition", "ApiError",
    "InvalidRecordError", "EMPTY_IMAGE", "BrokerRegistration", "MetadataImage", "TopicImage",
    "MetadataLoader", "MetadataPublisher", "PartitionRegistration", "decode_record",
    "encode_record", "delta_between", "image_from_records", "image_to_records",
]
