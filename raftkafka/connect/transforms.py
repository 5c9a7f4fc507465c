"""Single message transforms: Kafka's InsertField ($Key / $Value) and RegexRouter.

Configured as Kafka Connect configures them on a connector:

    transforms=addSource,route
    transforms.addSource.type=org.apache.kafka.connect.transforms.InsertField$Value
    transforms.addSource.static.field=source
    transforms.addSource.static.value=file
    transforms.route.type=org.apache.kafka.connect.transforms.RegexRouter
    transforms.route.regex=connect-(.*)
    transforms.route.replacement=imported-$1

A transform that cannot handle a record raises TransformError (Kafka's DataException).
"""
from __future__ import annotations

import dataclasses
import re

from raftkafka.connect.records import ConnectRecord

__all__ = ["TransformError", "InsertField", "RegexRouter", "transform_chain", "apply_chain"]

TIMESTAMP_SCHEMA = {"type": "int64", "optional": False, "name": "org.apache.kafka.connect.data.Timestamp",
                    "version": 1}


class TransformError(ValueError):
    pass


@dataclasses.dataclass(frozen=True)
class _Field:
    name: str
    optional: bool

    @classmethod
    def parse(cls, spec: str | None) -> "_Field | None":
        """`name`, `name?` (optional, the default) or `name!` (required), as InsertField reads them."""
        if not spec or not spec.strip():
            return None
        spec = spec.strip()
        if spec[-1] in "!?":
            return cls(spec[:-1], spec[-1] == "?")
        return cls(spec, True)


@dataclasses.dataclass(frozen=True)
class InsertField:
    """Adds the record's topic, partition, offset (sink records), timestamp or a static string to a
    struct or map key/value. A null value (a tombstone) passes unchanged, as in Kafka."""
    on_key: bool
    topic: _Field | None = None
    partition: _Field | None = None
    offset: _Field | None = None
    timestamp: _Field | None = None
    static: _Field | None = None
    static_value: str | None = None

    @classmethod
    def configure(cls, on_key: bool, settings: dict[str, str]) -> "InsertField":
        fields = {name: _Field.parse(settings.get(f"{name}.field")) for name in
                  ("topic", "partition", "offset", "timestamp", "static")}
        if not any(fields.values()):
            raise ValueError("InsertField needs at least one of topic.field, partition.field, offset.field, "
                             "timestamp.field, static.field")
        return cls(on_key, **fields, static_value=settings.get("static.value"))

    def apply(self, record: ConnectRecord) -> ConnectRecord:
        schema, value = (record.key_schema, record.key) if self.on_key else (record.value_schema, record.value)
        if value is None:
            return record
        if self.offset is not None and record.offset is None:
            raise TransformError("Offset insertion is only supported for sink connectors")
        additions = [(f, s, v) for f, s, v in (
            (self.topic, "string", record.topic),
            (self.partition, "int32", record.partition),
            (self.offset, "int64", record.offset),
            (self.timestamp, "timestamp", record.timestamp),
            (self.static, "string", self.static_value)) if f is not None]
        if schema is None:
            if not isinstance(value, dict):
                raise TransformError("Only Map objects supported in absence of schema for [field insertion], "
                                     f"found: {_java_type(value)}")
            new_value = {**value, **{f.name: v for f, _, v in additions}}
            new_schema = None
        else:
            if schema.get("type") != "struct":
                raise TransformError(f"Only Struct objects supported for [field insertion], found: "
                                     f"{schema.get('type')}")
            new_schema = dict(schema, fields=list(schema.get("fields", ())) + [
                dict(TIMESTAMP_SCHEMA if kind == "timestamp" else {"type": kind}, optional=f.optional, field=f.name)
                for f, kind, _ in additions])
            new_value = {**value, **{f.name: v for f, _, v in additions}}
        if self.on_key:
            return dataclasses.replace(record, key_schema=new_schema, key=new_value)
        return dataclasses.replace(record, value_schema=new_schema, value=new_value)


@dataclasses.dataclass(frozen=True)
class RegexRouter:
    """Renames the topic when `regex` matches all of it: `replacement` with Java's `$1` groups."""
    regex: re.Pattern
    replacement: str

    @classmethod
    def configure(cls, settings: dict[str, str]) -> "RegexRouter":
        if "regex" not in settings or "replacement" not in settings:
            raise ValueError("RegexRouter needs regex and replacement")
        try:
            pattern = re.compile(settings["regex"])
        except re.error as e:
            raise ValueError(f"RegexRouter regex {settings['regex']!r}: {e}") from None
        return cls(pattern, _python_replacement(settings["replacement"]))

    def apply(self, record: ConnectRecord) -> ConnectRecord:
        if not self.regex.fullmatch(record.topic):
            return record
        return dataclasses.replace(record, topic=self.regex.sub(self.replacement, record.topic, count=1))


def _python_replacement(java: str) -> str:
    """Java's Matcher replacement (`$1`, `${name}`, `\\$`) in Python's `re.sub` form."""
    out, i = [], 0
    while i < len(java):
        ch = java[i]
        if ch == "\\" and i + 1 < len(java):
            out.append(java[i + 1].replace("\\", "\\\\"))
            i += 2
        elif ch == "$":
            m = re.match(r"\$(\d+|\{\w+\})", java[i:])
            if m is None:
                raise ValueError(f"RegexRouter replacement {java!r}: illegal group reference")
            out.append(f"\\g<{m.group(1).strip('{}')}>")
            i += len(m.group(0))
        else:
            out.append("\\\\" if ch == "\\" else ch)
            i += 1
    return "".join(out)


def _java_type(value) -> str:
    return {str: "java.lang.String", int: "java.lang.Long", float: "java.lang.Double", bool: "java.lang.Boolean",
            list: "java.util.ArrayList"}.get(type(value), type(value).__name__)


_TYPES = {
    "org.apache.kafka.connect.transforms.InsertField$Value": lambda s: InsertField.configure(False, s),
    "org.apache.kafka.connect.transforms.InsertField$Key": lambda s: InsertField.configure(True, s),
    "org.apache.kafka.connect.transforms.RegexRouter": RegexRouter.configure,
}


def transform_chain(connector: dict[str, str]) -> list:
    """The connector's `transforms` list, configured in order (ValueError for a bad one)."""
    chain = []
    for alias in [a.strip() for a in connector.get("transforms", "").split(",") if a.strip()]:
        prefix = f"transforms.{alias}."
        settings = {k[len(prefix):]: v for k, v in connector.items() if k.startswith(prefix)}
        kind = settings.pop("type", None)
        if kind is None:
            raise ValueError(f"transforms.{alias}.type is missing")
        if "predicate" in settings:
            raise ValueError(f"transforms.{alias}.predicate: predicates are not supported")
        factory = _TYPES.get(kind.strip())
        if factory is None:
            raise ValueError(f"transforms.{alias}.type: unknown transform {kind!r} (known: {', '.join(_TYPES)})")
        try:
            chain.append(factory(settings))
        except ValueError as e:
            raise ValueError(f"transforms.{alias}: {e}") from None
    return chain


def apply_chain(chain, record: ConnectRecord) -> ConnectRecord:
    for transform in chain:
        record = transform.apply(record)
    return record
