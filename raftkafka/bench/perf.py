"""Measurement for the load generators of `python -m raftkafka bench`: what
kafka-producer-perf-test and kafka-consumer-perf-test report.

`Stats` counts completed records and bytes and keeps each record's latency
(send → acknowledgement) for percentiles; `Progress` prints a line per
reporting window while a run is going; `Throttle` paces a producer to a target
rate (-1 = unlimited). Wall-clock time is fine here: this is a client-side
tool, never node code.
"""
from __future__ import annotations

import math
import sys
import time
from array import array
from dataclasses import dataclass

__all__ = ["Stats", "Result", "Progress", "Throttle", "payload", "percentile", "clock"]

clock = time.perf_counter


def percentile(sorted_values, p: float) -> float:
    """Nearest-rank percentile of an ascending sequence (0 when empty)."""
    if not sorted_values:
        return 0.0
    rank = math.ceil(p * len(sorted_values) - 1e-9)  # the tolerance keeps 0.999 * 1000 at rank 999
    return sorted_values[min(len(sorted_values), max(1, rank)) - 1]


@dataclass(frozen=True)
class Result:
    """One run's figures; latencies in ms (None for consume runs, which have none)."""
    records: int
    bytes: int
    seconds: float
    errors: int
    first_error: str | None
    avg_ms: float | None
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    p999_ms: float | None
    max_ms: float | None

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.bytes / (1024 * 1024) / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict:
        out = {k: getattr(self, k) for k in ("records", "bytes", "seconds", "errors", "first_error", "avg_ms",
                                              "p50_ms", "p95_ms", "p99_ms", "p999_ms", "max_ms")}
        out.update(records_per_s=self.records_per_s, mb_per_s=self.mb_per_s)
        return out

    def line(self, verb: str) -> str:
        """kafka-producer-perf-test's final line (or the consumer's, without latencies)."""
        text = (f"{self.records} records {verb}, {self.records_per_s:.1f} records/sec "
                f"({self.mb_per_s:.2f} MB/sec)")
        if self.avg_ms is not None:
            text += (f", {self.avg_ms:.2f} ms avg latency, {self.max_ms:.2f} ms max latency, "
                     f"{self.p50_ms:.0f} ms 50th, {self.p95_ms:.0f} ms 95th, {self.p99_ms:.0f} ms 99th, "
                     f"{self.p999_ms:.0f} ms 99.9th")
        if self.errors:
            text += f"; {self.errors} errors (first: {self.first_error})"
        return text + "."


class Stats:
    def __init__(self, progress: "Progress | None" = None, *, with_latency: bool = True):
        self.records = 0
        self.bytes = 0
        self.errors = 0
        self.first_error: str | None = None
        self.latencies = array("d") if with_latency else None
        self.progress = progress
        self.started = clock()
        self.finished: float | None = None

    def start(self) -> None:
        self.started = clock()
        if self.progress is not None:
            self.progress.restart(self.started)

    def record(self, nbytes: int, latency_ms: float | None = None) -> None:
        self.records += 1
        self.bytes += nbytes
        if latency_ms is not None and self.latencies is not None:
            self.latencies.append(latency_ms)
        if self.progress is not None:
            self.progress.add(nbytes, latency_ms)

    def record_many(self, nbytes_each: int, latencies_ms) -> None:
        """Many acknowledged records at once (a load generator folding its delivery reports)."""
        count = len(latencies_ms)
        self.records += count
        self.bytes += count * nbytes_each
        if self.latencies is not None:
            self.latencies.extend(latencies_ms)
        if self.progress is not None:
            self.progress.add_latencies(count * nbytes_each, latencies_ms)

    def add_many(self, count: int, nbytes: int) -> None:
        self.records += count
        self.bytes += nbytes
        if self.progress is not None:
            self.progress.add_many(count, nbytes)

    def error(self, exc) -> None:
        self.errors += 1
        if self.first_error is None:
            self.first_error = str(exc)

    def finish(self, end: float | None = None) -> Result:
        """The figures from start() to `end` (default now: a consumer passes its last record's time)."""
        self.finished = clock() if end is None else end
        seconds = max(self.finished - self.started, 1e-9)
        if not self.latencies:
            none = None if self.latencies is None else 0.0
            return Result(self.records, self.bytes, seconds, self.errors, self.first_error,
                          none, none, none, none, none, none)
        ordered = sorted(self.latencies)
        return Result(self.records, self.bytes, seconds, self.errors, self.first_error,
                      sum(ordered) / len(ordered), percentile(ordered, 0.5), percentile(ordered, 0.95),
                      percentile(ordered, 0.99), percentile(ordered, 0.999), ordered[-1])


class Progress:
    """Prints one line per window of `interval` seconds, like the Kafka perf tools, to `out`."""

    def __init__(self, verb: str, interval: float = 5.0, out=None):
        self.verb = verb
        self.interval = interval
        self.out = out if out is not None else sys.stderr
        self.restart(clock())

    def restart(self, now: float) -> None:
        self.window_start = now
        self.count = 0
        self.bytes = 0
        self.latency_sum = 0.0
        self.latency_max = 0.0
        self.latency_count = 0

    def add(self, nbytes: int, latency_ms: float | None) -> None:
        self.count += 1
        self.bytes += nbytes
        if latency_ms is not None:
            self.latency_sum += latency_ms
            self.latency_count += 1
            self.latency_max = max(self.latency_max, latency_ms)
        self.tick()

    def add_latencies(self, nbytes: int, latencies_ms) -> None:
        if latencies_ms:
            self.latency_sum += sum(latencies_ms)
            self.latency_count += len(latencies_ms)
            self.latency_max = max(self.latency_max, max(latencies_ms))
        self.add_many(len(latencies_ms), nbytes)

    def add_many(self, count: int, nbytes: int) -> None:
        self.count += count
        self.bytes += nbytes
        self.tick()

    def tick(self) -> None:
        now = clock()
        if self.interval > 0 and now - self.window_start >= self.interval:
            self.report(now)
            self.restart(now)

    def report(self, now: float) -> None:
        seconds = max(now - self.window_start, 1e-9)
        text = (f"{self.count} records {self.verb}, {self.count / seconds:.1f} records/sec "
                f"({self.bytes / (1024 * 1024) / seconds:.2f} MB/sec)")
        if self.latency_count:
            text += (f", {self.latency_sum / self.latency_count:.1f} ms avg latency, "
                     f"{self.latency_max:.1f} ms max latency")
        print(text + ".", file=self.out, flush=True)


class Throttle:
    """How long to pause so that `sent` records after `elapsed` seconds stay at `per_second`."""

    def __init__(self, per_second: float):
        self.per_second = per_second

    def delay(self, sent: int, elapsed: float) -> float:
        if self.per_second <= 0:
            return 0.0
        return max(0.0, sent / self.per_second - elapsed)


def payload(size: int) -> bytes:
    """A record value of `size` bytes, as the Kafka tool makes it: uppercase letters, not all alike
    (so compression has some work to do, but not a pathological best case)."""
    letters = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    return bytes(letters[(i * 7 + i // 26) % 26] for i in range(size))
