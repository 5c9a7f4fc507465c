"""Per-log settings, named and defaulted as Kafka's topic configs.

`LogConfig.from_properties({"segment.bytes": "1048576", ...})` accepts the
Kafka names (string or typed values); unknown names are ignored here because
the broker layer owns the full topic-config namespace. Bad values raise
`LogConfigError` naming the setting.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace

__all__ = ["LogConfig", "LogConfigError", "LONG_MAX"]

LONG_MAX = (1 << 63) - 1


class LogConfigError(ValueError):
    """A log setting has an invalid value."""


@dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * 24 * 3600 * 1000
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * 24 * 3600 * 1000  # -1 = keep forever
    retention_bytes: int = -1  # -1 = no size limit
    cleanup_policy: str = "delete"  # "delete", "compact" or "compact,delete"
    delete_retention_ms: int = 24 * 3600 * 1000
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    file_delete_delay_ms: int = 60_000
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    message_timestamp_type: str = "CreateTime"  # or "LogAppendTime"
    max_message_bytes: int = 1024 * 1024 + 12

    def __post_init__(self) -> None:
        _at_least("segment.bytes", self.segment_bytes, 14)  # Kafka's floor: one record's overhead
        _at_least("segment.ms", self.segment_ms, 1)
        _at_least("segment.index.bytes", self.segment_index_bytes, 8)
        _at_least("index.interval.bytes", self.index_interval_bytes, 0)
        _at_least("retention.ms", self.retention_ms, -1)
        _at_least("retention.bytes", self.retention_bytes, -1)
        _at_least("delete.retention.ms", self.delete_retention_ms, 0)
        _at_least("min.compaction.lag.ms", self.min_compaction_lag_ms, 0)
        _at_least("max.compaction.lag.ms", self.max_compaction_lag_ms, 1)
        _at_least("file.delete.delay.ms", self.file_delete_delay_ms, 0)
        _at_least("flush.messages", self.flush_messages, 1)
        _at_least("flush.ms", self.flush_ms, 0)
        _at_least("max.message.bytes", self.max_message_bytes, 0)
        if not 0.0 <= self.min_cleanable_dirty_ratio <= 1.0:
            raise LogConfigError(f"min.cleanable.dirty.ratio must be in [0, 1], got {self.min_cleanable_dirty_ratio}")
        policies = {p.strip() for p in self.cleanup_policy.split(",") if p.strip()}
        if not policies or not policies <= {"delete", "compact"}:
            raise LogConfigError(f"cleanup.policy must be delete, compact or both, got {self.cleanup_policy!r}")
        if self.message_timestamp_type not in ("CreateTime", "LogAppendTime"):
            raise LogConfigError(
                f"message.timestamp.type must be CreateTime or LogAppendTime, got {self.message_timestamp_type!r}"
            )

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @classmethod
    def from_properties(cls, props: dict, base: "LogConfig | None" = None) -> "LogConfig":
        """Overlay Kafka-named properties on `base` (defaults if None)."""
        base = base or cls()
        changes = {}
        for f in fields(cls):
            name = f.name.replace("_", ".")
            if name not in props:
                continue
            raw = props[name]
            try:
                if f.type in ("int", int):
                    value = int(raw)
                elif f.type in ("float", float):
                    value = float(raw)
                else:
                    value = str(raw).strip()
            except (TypeError, ValueError):
                raise LogConfigError(f"{name}: invalid value {raw!r}") from None
            changes[f.name] = value
        return replace(base, **changes)

    def to_properties(self) -> dict[str, str]:
        return {f.name.replace("_", "."): str(getattr(self, f.name)) for f in fields(self)}


def _at_least(name: str, value, floor: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < floor:
        raise LogConfigError(f"{name} must be an integer >= {floor}, got {value!r}")
