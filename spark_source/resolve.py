"""Turn a subscription and an offset spec into concrete offsets, via a `LogClient`.

Only committed offsets exist here: "latest" is the high watermark, never the
log end of a leader, so a record Spark reads can never be un-written by a
leader change.

Partial JSON is accepted (an improvement over Spark's Kafka source, which
demands every partition): partitions the JSON leaves out start at earliest and
end at latest.
"""
from __future__ import annotations

import re

from spark_source.cluster_io import EARLIEST_TS, LATEST_TS, LogClient
from spark_source.offsets import EARLIEST, LATEST, PartitionOffsets, TopicPartition
from spark_source.options import (
    Earliest,
    GlobalTimestamp,
    InvalidOptionError,
    Latest,
    OffsetSpec,
    SpecificOffsets,
    SpecificTimestamps,
    Subscription,
)

__all__ = ["discover", "resolve", "NoOffsetForTimestampError"]


class NoOffsetForTimestampError(ValueError):
    """startingTimestamp matched no record and startingOffsetsByTimestampStrategy is 'error'."""


def discover(client: LogClient, subscription: Subscription) -> list[TopicPartition]:
    """The topic partitions the subscription covers right now, sorted."""
    if subscription.pattern is not None:
        pattern = re.compile(subscription.pattern)
        found = client.partitions(None)
        return sorted((t, p) for t, parts in found.items() if pattern.fullmatch(t) for p in parts)
    if subscription.assigned:
        return sorted(subscription.assigned)
    found = client.partitions(list(subscription.topics))
    return sorted((t, p) for t, parts in found.items() for p in parts)


def resolve(client: LogClient, spec: OffsetSpec, tps: list[TopicPartition], *, ending: bool,
            option: str) -> PartitionOffsets:
    """Concrete offsets for `tps` (sorted keys); `option` names the option in errors."""
    if not tps:
        return {}
    default_ts = LATEST_TS if ending else EARLIEST_TS
    if isinstance(spec, Earliest):
        return client.list_offsets(tps, EARLIEST_TS)
    if isinstance(spec, Latest):
        return client.list_offsets(tps, LATEST_TS)
    if isinstance(spec, SpecificOffsets):
        _check_covered(spec.offsets, tps, option)
        wanted = {tp: spec.offsets.get(tp, EARLIEST if default_ts == EARLIEST_TS else LATEST) for tp in tps}
        out = {tp: off for tp, off in wanted.items() if off >= 0}
        for sentinel, ts in ((EARLIEST, EARLIEST_TS), (LATEST, LATEST_TS)):
            group = [tp for tp in tps if wanted[tp] == sentinel]
            if group:
                out.update(client.list_offsets(group, ts))
        if ending:
            _check_not_beyond_latest(client, {tp: off for tp, off in wanted.items() if off >= 0}, option)
        return dict(sorted(out.items()))
    if isinstance(spec, GlobalTimestamp):
        return _by_timestamp(client, {tp: spec.timestamp_ms for tp in tps}, tps, spec.strategy, ending, option)
    if isinstance(spec, SpecificTimestamps):
        _check_covered(spec.timestamps, tps, option)
        return _by_timestamp(client, spec.timestamps, tps, spec.strategy, ending, option)
    raise TypeError(f"not an offset spec: {spec!r}")


def _check_covered(given: PartitionOffsets, tps: list[TopicPartition], option: str) -> None:
    extra = sorted(set(given) - set(tps))
    if extra:
        raise InvalidOptionError(f"option '{option}' names {extra[0][0]}-{extra[0][1]}, which is not among the "
                                 "subscribed topic partitions")


def _check_not_beyond_latest(client: LogClient, ends: PartitionOffsets, option: str) -> None:
    """An explicit end past the committed log would make a read wait for records that are not
    there; say so while planning instead."""
    latest = client.list_offsets(sorted(ends), LATEST_TS) if ends else {}
    for tp in sorted(ends):
        if ends[tp] > latest[tp]:
            raise InvalidOptionError(f"option '{option}': {tp[0]}-{tp[1]} ends at {ends[tp]}, beyond its latest "
                                     f"committed offset {latest[tp]}")


def _by_timestamp(client: LogClient, stamps: PartitionOffsets, tps: list[TopicPartition], strategy: str,
                  ending: bool, option: str) -> PartitionOffsets:
    out: PartitionOffsets = {}
    by_value: dict[int, list[TopicPartition]] = {}
    for tp in tps:
        if tp in stamps:
            by_value.setdefault(stamps[tp], []).append(tp)
    for ts, group in sorted(by_value.items()):
        out.update(client.list_offsets(group, ts))
    unmatched = sorted(tp for tp, off in out.items() if off < 0)
    if unmatched and not ending and strategy == "error":
        tp = unmatched[0]
        raise NoOffsetForTimestampError(f"option '{option}': no record of {tp[0]}-{tp[1]} has a timestamp >= "
                                        f"{stamps[tp]}; set startingOffsetsByTimestampStrategy=latest to start "
                                        "at the latest offset instead")
    if unmatched:  # nothing at or after the timestamp yet: start (or end) at the latest offset
        out.update(client.list_offsets(unmatched, LATEST_TS))
    unlisted = [tp for tp in tps if tp not in stamps]
    if unlisted:
        out.update(client.list_offsets(unlisted, LATEST_TS if ending else EARLIEST_TS))
    return dict(sorted(out.items()))
