"""The standalone worker's properties file and the connectors' files, with Kafka Connect's names.

Worker: `bootstrap.servers`, `key.converter` / `value.converter` (+ `key.converter.schemas.enable`
...), `offset.storage.file.filename`, `offset.flush.interval.ms`, client security settings
(`security.protocol`, `ssl.*`, `sasl.*`) for every client, and `producer.*` / `consumer.*` /
`admin.*` settings for one kind. Settings of Connect's REST server and plugin loading
(`listeners`, `plugin.path`, ...) are accepted and mean nothing here.

Connector: `name`, `connector.class`, `tasks.max`, `key.converter` / `value.converter` overriding
the worker's, `transforms`, and the connector's own settings (`file`, `topic`, `topics`, ...).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from raftkafka.client.security import SECURITY_PROPERTIES
from raftkafka.connect.converters import Converter, make_converter
from raftkafka.connect.transforms import transform_chain

__all__ = ["WorkerConfig", "ConnectorConfig", "client_settings", "SOURCE", "SINK"]

SOURCE, SINK = "source", "sink"
_CONNECTORS = {
    "FileStreamSource": SOURCE, "FileStreamSourceConnector": SOURCE,
    "org.apache.kafka.connect.file.FileStreamSourceConnector": SOURCE,
    "FileStreamSink": SINK, "FileStreamSinkConnector": SINK,
    "org.apache.kafka.connect.file.FileStreamSinkConnector": SINK,
}


def client_settings(properties: dict[str, str], kind: str) -> dict[str, str]:
    """Kafka client properties for one kind of client ("producer", "consumer", "admin"): the
    top-level security settings, then the `<kind>.`-prefixed ones over them."""
    out = {k: v for k, v in properties.items() if k in SECURITY_PROPERTIES}
    prefix = kind + "."
    out.update({k[len(prefix):]: v for k, v in properties.items() if k.startswith(prefix)})
    return out


def _positive_int(properties: dict, name: str, default: int) -> int:
    text = properties.get(name, str(default)).strip()
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{name}={text!r}: not a number") from None
    if value <= 0:
        raise ValueError(f"{name}={text!r}: must be positive")
    return value


def _converter(properties: dict, what: str, default: Converter | None) -> Converter:
    name = properties.get(f"{what}.converter")
    if name is None:
        if default is None:
            raise ValueError(f"{what}.converter is required")
        return default
    prefix = f"{what}.converter."
    return make_converter(name, {k[len(prefix):]: v for k, v in properties.items() if k.startswith(prefix)}, what)


@dataclass(frozen=True)
class WorkerConfig:
    bootstrap_servers: str
    key_converter: Converter
    value_converter: Converter
    offsets_path: str
    flush_interval: float  # seconds
    properties: dict[str, str] = field(repr=False)

    @classmethod
    def parse(cls, properties: dict[str, str]) -> "WorkerConfig":
        path = properties.get("offset.storage.file.filename", "").strip()
        if not path:
            raise ValueError("offset.storage.file.filename is required (the standalone worker's offsets file)")
        return cls(
            bootstrap_servers=properties.get("bootstrap.servers", "localhost:9092").strip(),
            key_converter=_converter(properties, "key", None),
            value_converter=_converter(properties, "value", None),
            offsets_path=path,
            flush_interval=_positive_int(properties, "offset.flush.interval.ms", 60_000) / 1000,
            properties=properties)

    def client_kwargs(self, kind: str) -> dict[str, str]:
        return client_settings(self.properties, kind)


@dataclass(frozen=True)
class ConnectorConfig:
    name: str
    kind: str  # SOURCE or SINK
    tasks_max: int
    key_converter: Converter
    value_converter: Converter
    transforms: list
    properties: dict[str, str] = field(repr=False)

    @classmethod
    def parse(cls, properties: dict[str, str], worker: WorkerConfig) -> "ConnectorConfig":
        name = properties.get("name", "").strip()
        if not name:
            raise ValueError("name is required")
        class_name = properties.get("connector.class", "").strip()
        kind = _CONNECTORS.get(class_name)
        if kind is None:
            raise ValueError(f"connector {name}: unknown connector.class {class_name!r} "
                             "(FileStreamSource or FileStreamSink)")
        try:
            config = cls(name, kind, _positive_int(properties, "tasks.max", 1),
                         _converter(properties, "key", worker.key_converter),
                         _converter(properties, "value", worker.value_converter),
                         transform_chain(properties), properties)
            config._check()
        except ValueError as e:
            raise ValueError(f"connector {name}: {e}") from None
        return config

    def _check(self) -> None:
        if self.kind == SOURCE:
            if "," in self.properties.get("topic", ","):
                raise ValueError("topic is required: the one topic to write to")
            _positive_int(self.properties, "batch.size", 2000)
        else:
            if "topics.regex" in self.properties:
                raise ValueError("topics.regex is not supported: list the topics in topics")
            if not self.topics():
                raise ValueError("topics is required")
        if not self.properties.get("file", "").strip():
            raise ValueError("file is required (Kafka falls back to standard input/output; a file is "
                             "needed here to keep a position and resume)")

    def topics(self) -> list[str]:
        return [t.strip() for t in self.properties.get("topics", "").split(",") if t.strip()]
