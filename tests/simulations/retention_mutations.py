"""Deliberate retention and log-cleaning bugs patched into the real storage code.

Each is a function taking a monkeypatch; nothing here is a switch in node code.
tests/simulations/catalogue.py lists them with the rule each breaks; the simulation's
retention workload (simulations/workloads/retention.py) and checker
(simulations/checkers/retention.py) are what find them.
"""
from __future__ import annotations

import storage.log.log
import storage.log.retention
from storage.log.cleaner import OffsetMap


def retention_deletes_while_over_size(monkeypatch) -> None:
    """retention.bytes deletes a segment while the log exceeds the limit, leaving it below the limit."""

    def segments_to_delete(segments, *, config, now_ms, log_start_offset, high_watermark):
        doomed = []
        excess = sum(s.size for s in segments) - config.retention_bytes if config.retention_bytes >= 0 else -1
        for segment, following in zip(segments, segments[1:]):
            if following.base_offset > high_watermark:
                break
            by_start = following.base_offset <= log_start_offset
            by_size = config.delete and config.retention_bytes >= 0 and excess > 0
            if not (by_start or by_size):
                break
            doomed.append(segment)
            excess -= segment.size
        return doomed

    monkeypatch.setattr(storage.log.log, "segments_to_delete", segments_to_delete)


def retention_ignores_high_watermark(monkeypatch) -> None:
    """Retention deletes segments above the high watermark (records not yet committed)."""
    original = storage.log.retention.segments_to_delete

    def segments_to_delete(segments, *, config, now_ms, log_start_offset, high_watermark):
        end = segments[-1].base_offset if segments else 0
        return original(segments, config=config, now_ms=now_ms, log_start_offset=log_start_offset,
                        high_watermark=max(high_watermark, end))

    monkeypatch.setattr(storage.log.log, "segments_to_delete", segments_to_delete)


def cleaner_drops_latest_record_of_key(monkeypatch) -> None:
    """The cleaner removes a key's latest record along with the older ones (an off-by-one in its offset map)."""
    monkeypatch.setattr(OffsetMap, "get", lambda self, key: self._map.get(key, -2) + 1)


RETENTION_MUTATIONS = {f.__name__: f for f in (
    retention_deletes_while_over_size, retention_ignores_high_watermark, cleaner_drops_latest_record_of_key,
)}
