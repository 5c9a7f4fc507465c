"""Kafka Connect (standalone) and MirrorMaker 2 for raftkafka, on raftkafka's own client.

    connect-standalone WORKER.properties CONNECTOR.properties...   (raftkafka.cli.connect_standalone)
    mirror mm2.properties                                          (raftkafka.cli.mirror)

Modules: `converters` (StringConverter, JsonConverter), `transforms` (InsertField, RegexRouter),
`worker_config` (the worker and connector files), `offset_file` (the source offsets file),
`file_source` / `file_sink` (FileStreamSource / FileStreamSink tasks), `standalone` (runs them);
`mirror_config`, `replication_policy`, `mirror_records` (offset-sync and checkpoint encodings),
`mirror_topics`, `mirror_flow`, `mirror_checkpoints`, `mirror` for MirrorMaker 2.
This package sits at the CLI's level (tests/test_import_direction.py).
"""
