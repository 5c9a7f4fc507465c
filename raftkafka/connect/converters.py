"""Connect's converters: bytes on the wire <-> (schema, value) in a connector.

A schema is Connect's JSON schema form as JsonConverter writes it (`{"type": "string",
"optional": false}`, structs with `fields`), or None for schemaless data.

- `org.apache.kafka.connect.storage.StringConverter`: UTF-8 text (`converter.encoding`); a
  value is always a string (schema `{"type": "string", "optional": true}`), null stays null.
- `org.apache.kafka.connect.json.JsonConverter`: JSON; with `schemas.enable` (default true)
  every value is the envelope `{"schema": ..., "payload": ...}`, as Kafka writes it (compact).
"""
from __future__ import annotations

import json
from dataclasses import dataclass

__all__ = ["Converter", "StringConverter", "JsonConverter", "ConverterError", "make_converter",
           "infer_schema", "java_text", "STRING_SCHEMA"]

STRING_SCHEMA = {"type": "string", "optional": False}
OPTIONAL_STRING_SCHEMA = {"type": "string", "optional": True}


class ConverterError(ValueError):
    """Data a converter cannot turn into records or bytes (Kafka's DataException)."""


class Converter:
    def from_connect(self, topic: str, schema: dict | None, value) -> bytes | None:
        raise NotImplementedError

    def to_connect(self, topic: str, data: bytes | None) -> tuple[dict | None, object]:
        raise NotImplementedError


@dataclass(frozen=True)
class StringConverter(Converter):
    encoding: str = "utf-8"

    def from_connect(self, topic, schema, value):
        return None if value is None else java_text(value).encode(self.encoding)

    def to_connect(self, topic, data):
        if data is None:
            return OPTIONAL_STRING_SCHEMA, None
        try:
            return OPTIONAL_STRING_SCHEMA, data.decode(self.encoding)
        except UnicodeDecodeError as e:
            raise ConverterError(f"topic {topic}: not {self.encoding} text ({e.reason})") from None


@dataclass(frozen=True)
class JsonConverter(Converter):
    schemas_enable: bool = True

    def from_connect(self, topic, schema, value):
        if schema is None and value is None:
            return None  # as Kafka's JsonConverter: a null without a schema is a null record part
        if self.schemas_enable:
            document = {"schema": schema if schema is not None else infer_schema(value), "payload": value}
        else:
            document = value
        return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()

    def to_connect(self, topic, data):
        if data is None:
            return None, None
        try:
            document = json.loads(data)
        except (UnicodeDecodeError, ValueError) as e:
            raise ConverterError(f"topic {topic}: converting byte[] to Kafka Connect data failed due to "
                                 f"serialization error: {e}") from None
        if not self.schemas_enable:
            return None, document
        if not (isinstance(document, dict) and set(document) == {"schema", "payload"}):
            raise ConverterError(
                f"topic {topic}: JsonConverter with schemas.enable requires \"schema\" and \"payload\" fields and "
                "may not contain additional fields. If you are trying to deserialize plain JSON data, set "
                "schemas.enable=false in your converter configuration.")
        return document["schema"], document["payload"]


def infer_schema(value) -> dict | None:
    """The schema JsonConverter would write for a schemaless value (None when it has none)."""
    if isinstance(value, bool):
        return {"type": "boolean", "optional": False}
    if isinstance(value, int):
        return {"type": "int64", "optional": False}
    if isinstance(value, float):
        return {"type": "double", "optional": False}
    if isinstance(value, str):
        return STRING_SCHEMA
    return None


def java_text(value) -> str:
    """What Java's String.valueOf prints for Connect data (FileStreamSink writes this)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={java_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(java_text(v) for v in value) + "]"
    return str(value)


_CLASSES = {
    "org.apache.kafka.connect.storage.StringConverter": "string", "StringConverter": "string",
    "org.apache.kafka.connect.json.JsonConverter": "json", "JsonConverter": "json",
}


def make_converter(class_name: str, settings: dict[str, str], what: str) -> Converter:
    """A converter from its class name and its `<what>.converter.`-stripped settings."""
    kind = _CLASSES.get(class_name.strip())
    if kind is None:
        raise ValueError(f"{what}: unknown converter class {class_name!r} (known: {', '.join(sorted(_CLASSES))})")
    if kind == "string":
        encoding = settings.get("converter.encoding", settings.get("encoding", "UTF-8"))
        try:
            "".encode(encoding)
        except LookupError:
            raise ValueError(f"{what}.converter.encoding: unknown encoding {encoding!r}") from None
        return StringConverter(encoding)
    enabled = settings.get("schemas.enable", "true").strip().lower()
    if enabled not in ("true", "false"):
        raise ValueError(f"{what}.converter.schemas.enable must be true or false, not {enabled!r}")
    return JsonConverter(enabled == "true")
