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

The package imports none of them itself: importing one module (a client command reads
metadata.authorizer for its options) loads what that module needs, not the controller.
"""
