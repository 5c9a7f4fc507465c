"""The sans-IO parts of connect-standalone and mirror: converters, transforms, the files' settings,
line splitting, MirrorMaker's record formats, sync rule and offset translation."""
from __future__ import annotations

import struct

import pytest

from raftkafka.cli.main import main
from raftkafka.connect.converters import ConverterError, JsonConverter, StringConverter, java_text
from raftkafka.connect.file_source import split_lines
from raftkafka.connect.mirror_checkpoints import OffsetSyncStore, PartitionSyncState
from raftkafka.connect.mirror_config import parse_mirror_config
from raftkafka.connect.mirror_records import Checkpoint, Heartbeat, OffsetSync, decode_progress, encode_progress
from raftkafka.connect.records import ConnectRecord
from raftkafka.connect.transforms import TransformError, apply_chain, transform_chain
from raftkafka.connect.worker_config import SINK, SOURCE, ConnectorConfig, WorkerConfig

WORKER = {"bootstrap.servers": "localhost:9092",
          "key.converter": "org.apache.kafka.connect.json.JsonConverter",
          "value.converter": "org.apache.kafka.connect.json.JsonConverter",
          "key.converter.schemas.enable": "true", "value.converter.schemas.enable": "true",
          "offset.storage.file.filename": "/tmp/connect.offsets", "offset.flush.interval.ms": "10000"}


def record(value, schema=None, topic="connect-test", offset=None) -> ConnectRecord:
    return ConnectRecord(topic, 0, None, None, schema, value, 1700000000000, offset)


def test_json_converter_writes_the_envelope_kafka_writes_and_reads_it_back():
    converter = JsonConverter(schemas_enable=True)
    data = converter.from_connect("t", {"type": "string", "optional": False}, "foo")
    assert data == b'{"schema":{"type":"string","optional":false},"payload":"foo"}'
    assert converter.to_connect("t", data) == ({"type": "string", "optional": False}, "foo")
    assert converter.from_connect("t", None, None) is None
    with pytest.raises(ConverterError, match="schemas.enable=false"):
        converter.to_connect("t", b'{"a": 1}')
    with pytest.raises(ConverterError, match="serialization error"):
        converter.to_connect("t", b"not json")
    plain = JsonConverter(schemas_enable=False)
    assert plain.from_connect("t", {"type": "string"}, "foo") == b'"foo"'
    assert plain.to_connect("t", b'{"a":1}') == (None, {"a": 1})


def test_string_converter_and_the_text_filestreamsink_writes():
    converter = StringConverter()
    assert converter.from_connect("t", None, "héllo") == "héllo".encode()
    assert converter.to_connect("t", b"x")[1] == "x"
    with pytest.raises(ConverterError):
        converter.to_connect("t", b"\xff")
    assert java_text({"a": 1, "b": [True, None]}) == "{a=1, b=[true, null]}"


def test_insert_field_and_regex_router_as_connect_configures_them():
    chain = transform_chain({
        "transforms": "addSource, route",
        "transforms.addSource.type": "org.apache.kafka.connect.transforms.InsertField$Value",
        "transforms.addSource.static.field": "source", "transforms.addSource.static.value": "file",
        "transforms.addSource.topic.field": "from!",
        "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
        "transforms.route.regex": "connect-(.*)", "transforms.route.replacement": "imported-$1"})
    out = apply_chain(chain, record({"line": "x"}))
    assert out.topic == "imported-test" and out.value == {"line": "x", "source": "file", "from": "connect-test"}
    struct_schema = {"type": "struct", "optional": False, "fields": [{"type": "string", "optional": False,
                                                                        "field": "line"}]}
    out = apply_chain(chain, record({"line": "x"}, struct_schema))
    assert [f["field"] for f in out.value_schema["fields"]] == ["line", "from", "source"]
    assert out.value_schema["fields"][1]["optional"] is False  # `from!` is required
    assert apply_chain(chain, record(None)).value is None  # a tombstone passes
    with pytest.raises(TransformError, match="Only Map objects supported"):
        apply_chain(chain, record("a plain line"))
    untouched = apply_chain(chain, record({"a": 1}, topic="other"))
    assert untouched.topic == "other"


@pytest.mark.parametrize("settings, message", [
    ({"transforms": "x"}, "transforms.x.type is missing"),
    ({"transforms": "x", "transforms.x.type": "com.example.Mask"}, "unknown transform"),
    ({"transforms": "x", "transforms.x.type": "org.apache.kafka.connect.transforms.RegexRouter",
      "transforms.x.regex": "("}, "RegexRouter needs regex and replacement"),
    ({"transforms": "x", "transforms.x.type": "org.apache.kafka.connect.transforms.InsertField$Key"},
     "at least one of"),
])
def test_a_bad_transform_is_one_clear_error(settings, message):
    with pytest.raises(ValueError, match=message):
        transform_chain(settings)


def test_quickstart_files_parse_with_kafka_names():
    worker = WorkerConfig.parse(WORKER)
    assert worker.flush_interval == 10.0 and isinstance(worker.value_converter, JsonConverter)
    source = ConnectorConfig.parse({"name": "local-file-source", "connector.class": "FileStreamSource",
                                    "tasks.max": "1", "file": "test.txt", "topic": "connect-test"}, worker)
    sink = ConnectorConfig.parse({"name": "local-file-sink",
                                  "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
                                  "file": "test.sink.txt", "topics": "connect-test",
                                  "value.converter": "org.apache.kafka.connect.storage.StringConverter"}, worker)
    assert (source.kind, sink.kind, sink.topics()) == (SOURCE, SINK, ["connect-test"])
    assert isinstance(sink.value_converter, StringConverter) and isinstance(sink.key_converter, JsonConverter)
    with pytest.raises(ValueError, match="offset.storage.file.filename is required"):
        WorkerConfig.parse({k: v for k, v in WORKER.items() if k != "offset.storage.file.filename"})
    with pytest.raises(ValueError, match="unknown connector.class"):
        ConnectorConfig.parse({"name": "x", "connector.class": "JdbcSource"}, worker)
    with pytest.raises(ValueError, match="topics is required"):
        ConnectorConfig.parse({"name": "x", "connector.class": "FileStreamSink", "file": "f"}, worker)


def test_worker_security_settings_reach_every_client_and_prefixed_ones_one_kind():
    from raftkafka.cli.common import client_kwargs
    from raftkafka.client import Consumer, Producer

    worker = WorkerConfig.parse({**WORKER, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                                 "sasl.username": "connect", "sasl.password": "secret",
                                 "producer.linger.ms": "20", "consumer.max.poll.records": "100"})
    producer = client_kwargs(Producer, worker.client_kwargs("producer"), "producer")
    consumer = client_kwargs(Consumer, worker.client_kwargs("consumer"), "consumer")
    assert producer["linger_ms"] == 20.0 and "max_poll_records" not in producer
    assert consumer["max_poll_records"] == 100
    for kwargs in (producer, consumer):
        assert kwargs["security"].protocol == "SASL_PLAINTEXT" and kwargs["security"].login is not None


def test_connect_standalone_with_a_bad_file_is_one_line(tmp_path, capsys):
    (tmp_path / "w.properties").write_text("bootstrap.servers=localhost:1\noffset.storage.file.filename=o\n")
    (tmp_path / "c.properties").write_text("name=x\nconnector.class=FileStreamSource\n")
    with pytest.raises(SystemExit) as exit_:
        main(["connect-standalone", str(tmp_path / "w.properties"), str(tmp_path / "c.properties")])
    assert exit_.value.code == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "key.converter is required" in err


def test_split_lines_keeps_a_partial_line_and_drops_carriage_returns():
    lines, used = split_lines(b"foo\r\nbar\npart", 100)
    assert lines == [("foo", 105), ("bar", 109)] and used == 9


def test_mm2_properties_flows_filters_and_naming():
    flows, notes = parse_mirror_config({
        "clusters": "A, B", "A.bootstrap.servers": "a:9092", "B.bootstrap.servers": "b:9092",
        "A.security.protocol": "PLAINTEXT", "A->B.enabled": "true", "A->B.topics": "orders, pay-.*",
        "B->A.enabled": "false", "tasks.max": "4", "sync.group.offsets.enabled": "true"})
    assert len(flows) == 1 and notes == []
    flow = flows[0]
    assert (flow.tasks_max, flow.exactly_once, flow.transaction_interval) == (4, False, None)
    assert (flow.name, flow.replication_factor, flow.emit_checkpoints, flow.sync_group_offsets) == ("A->B", 2, 60.0, 60.0)
    assert flow.offset_syncs_topic == "mm2-offset-syncs.B.internal"
    assert flow.checkpoints_topic == "A.checkpoints.internal"
    assert [t for t in ("orders", "pay-eu", "orders2", "B.orders", "x.internal", "__consumer_offsets", "heartbeats",
                        "C.heartbeats", "B.heartbeats")
            if flow.replicates_topic(t)] == ["orders", "pay-eu", "heartbeats", "C.heartbeats"]
    assert flow.policy.remote_topic("A", "orders") == "A.orders"
    assert flow.source.client_settings("admin") == {"security.protocol": "PLAINTEXT"}
    assert flow.replicates_group("app") and not flow.replicates_group("console-consumer-1")
    identity, _ = parse_mirror_config({
        "clusters": "A, B", "A.bootstrap.servers": "a:1", "B.bootstrap.servers": "b:1", "A->B.enabled": "true",
        "replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"})
    assert identity[0].policy.remote_topic("A", "orders") == "orders"
    with pytest.raises(ValueError, match="no replication flow is enabled"):
        parse_mirror_config({"clusters": "A, B", "A.bootstrap.servers": "a:1", "B.bootstrap.servers": "b:1"})
    with pytest.raises(ValueError, match="B.bootstrap.servers is required"):
        parse_mirror_config({"clusters": "A, B", "A.bootstrap.servers": "a:1", "A->B.enabled": "true"})


def test_mm2_exactly_once_is_the_target_clusters_setting_with_a_transactional_id_per_task():
    base = {"clusters": "A, B", "A.bootstrap.servers": "a:1", "B.bootstrap.servers": "b:1",
            "A->B.enabled": "true", "B->A.enabled": "true", "offset.flush.interval.ms": "5000"}
    flows, notes = parse_mirror_config({**base, "B.exactly.once.source.support": "enabled",
                                        "A->B.transaction.boundary": "interval"})
    by_name = {f.name: f for f in flows}
    assert (by_name["A->B"].exactly_once, by_name["B->A"].exactly_once) == (True, False)
    assert (by_name["A->B"].transaction_interval, by_name["B->A"].transaction_interval) == (5.0, None)
    assert by_name["A->B"].transactional_id(1) == "A-mm2-MirrorSourceConnector-1"
    flows, notes = parse_mirror_config({**base, "exactly.once.source.support": "preparing"})
    assert not any(f.exactly_once for f in flows) and len(notes) == 2 and "preparing" in notes[0]
    for bad, message in [({"exactly.once.source.support": "yes"}, "exactly.once.source.support='yes'"),
                         ({"transaction.boundary": "connector"}, "transaction.boundary='connector'"),
                         ({"tasks.max": "0"}, "tasks.max='0'")]:
        with pytest.raises(ValueError, match=message):
            parse_mirror_config({**base, **bad})


def test_offset_sync_and_checkpoint_bytes_are_kafkas_struct_encoding():
    sync = OffsetSync("orders", 3, 100, 250)
    assert sync.key() == b"\x00\x06orders" + struct.pack(">i", 3)
    assert sync.value() == struct.pack(">qq", 100, 250)
    assert OffsetSync.decode(sync.key(), sync.value()) == sync
    checkpoint = Checkpoint("app", "A.orders", 3, 100, 251, "")
    assert checkpoint.value() == struct.pack(">hqq", 0, 100, 251) + b"\x00\x00"
    assert Checkpoint.decode(checkpoint.key(), checkpoint.value()) == checkpoint
    beat = Heartbeat("A", "B", 1700000000000)
    assert beat.key() == b"\x00\x01A\x00\x01B" and beat.value() == struct.pack(">hq", 0, 1700000000000)
    assert Heartbeat.decode(beat.key(), beat.value()) == beat
    key, value = encode_progress("A", "orders", 3, 99)
    assert key == b'["MirrorSourceConnector",{"cluster":"A","partition":3,"topic":"orders"}]'
    assert decode_progress("A", key, value) == (("orders", 3), 99)
    assert decode_progress("C", key, value) is None


def test_sync_rule_and_translation_never_skip_a_record():
    state = PartitionSyncState(max_lag=100)
    due = [u for u in range(0, 300) if state.update(u, u + 10)]
    assert due == [0, 101, 202]  # the first record, then whenever a translation would lag 100 behind
    assert state.update(305, 315)  # an upstream gap
    store = OffsetSyncStore()
    for u in due:
        store.add(OffsetSync("t", 0, u, u + 10))
    assert store.translate(("t", 0), 101) == 111  # exactly on a sync
    assert store.translate(("t", 0), 150) == 112  # past it: one after (records 102..150 are read again)
    assert store.translate(("t", 1), 5) is None
    store.add(OffsetSync("t", 0, 150, 400))  # copied again after a restart: the newer mapping wins above it
    assert store.translate(("t", 0), 160) == 401 and store.translate(("t", 0), 120) == 112


def test_a_damaged_offsets_file_is_one_clear_error(tmp_path):
    from raftkafka.connect.file_source import FileSourceTask
    from raftkafka.connect.offset_file import OffsetFile, OffsetFileError

    path = tmp_path / "connect.offsets"
    path.write_text("not json")
    with pytest.raises(OffsetFileError, match="not a raftkafka offsets file"):
        OffsetFile.load(str(path))
    path.write_text('{"format": "raftkafka-connect-offsets-v1", "offsets": {"[\\"s\\",{\\"filename\\":\\"f\\"}]": '
                    '{"position": "x"}}}')
    worker = WorkerConfig.parse({**WORKER, "offset.storage.file.filename": str(path)})
    connector = ConnectorConfig.parse({"name": "s", "connector.class": "FileStreamSource", "file": "f",
                                       "topic": "t"}, worker)
    with pytest.raises(ValueError, match="entry for s is damaged"):
        FileSourceTask(None, connector, worker, OffsetFile.load(str(path)), None, {}, print)
