"""An in-memory LogClient: partitions as lists of records with a settable log start.

Knobs for failure tests: `fail_after_append` (the next N produce calls append,
then raise AmbiguousWriteError), `fail_on_produce_call` (that produce call, 1-based,
raises before appending anything), `records_per_fetch` (small fetches exercise
the readers' loops).
"""
from __future__ import annotations

from raftkafka.client.fetcher import ConsumerRecord
from spark_source.cluster_io import AmbiguousWriteError, Fetched, RawFetched
from spark_source.batch_appender import seal_batch
from wire.records import SimpleRecord, build_batch, decode_batch


class FakeLog:
    def __init__(self, topics: dict[str, int]):
        self.logs: dict[tuple[str, int], list[ConsumerRecord]] = {}
        self.log_start: dict[tuple[str, int], int] = {}
        for name, n in topics.items():
            self.add_topic(name, n)
        self.fail_after_append = 0
        self.fail_on_produce_call = 0
        self.produce_calls = 0
        self.records_per_fetch = 50
        self.topic_configs: dict[str, dict[str, str]] = {}
        self.prefetched: list[tuple[tuple[str, int], int]] = []  # prefetch_raw hints, in order

    def add_topic(self, name: str, partitions: int) -> None:
        for p in range(partitions):
            self.logs[(name, p)] = []
            self.log_start[(name, p)] = 0

    def append(self, tp, value: bytes, key=None, ts=1000, headers=(), timestamp_type=0):
        log = self.logs[tp]
        log.append(ConsumerRecord(tp[0], tp[1], len(log), ts, timestamp_type, key, value, tuple(headers)))

    # ------------------------------------------------------------------ LogClient

    def partitions(self, topics):
        names = sorted({t for t, _ in self.logs}) if topics is None else topics
        return {t: sorted(p for tt, p in self.logs if tt == t) for t in names if any(tt == t for tt, _ in self.logs)}

    def list_offsets(self, tps, timestamp):
        out = {}
        for tp in tps:
            log = self.logs[tp]
            if timestamp == -2:
                out[tp] = self.log_start[tp]
            elif timestamp == -1:
                out[tp] = len(log)
            else:
                hits = [r.offset for r in log if r.timestamp >= timestamp and r.offset >= self.log_start[tp]]
                out[tp] = hits[0] if hits else -1
        return out

    def fetch(self, tp, offset, *, max_records, max_wait_s):
        log, start = self.logs[tp], self.log_start[tp]
        if offset < start or offset > len(log):
            return Fetched([], offset, True)
        records = log[offset:offset + min(max_records, self.records_per_fetch)]
        return Fetched(records, offset + len(records))

    def fetch_raw(self, tp, offset, *, max_wait_s, until=None):
        """The same records as `fetch`, as one record batch (log-append time if any record has it)."""
        fetched = self.fetch(tp, offset, max_records=self.records_per_fetch, max_wait_s=max_wait_s)
        if not fetched.records:
            return RawFetched(b"", None, fetched.out_of_range)
        records = fetched.records
        append_time = any(r.timestamp_type == 1 for r in records)
        return RawFetched(build_batch([SimpleRecord(r.key, r.value, r.headers, r.timestamp) for r in records],
                                      base_offset=records[0].offset, log_append_time=append_time))

    def prefetch_raw(self, tp, offset, *, max_wait_s):
        self.prefetched.append((tp, offset))

    def produce(self, rows):
        self._produce_call(lambda: [(tp, r.key, r.value, r.timestamp if r.timestamp is not None else 1000, r.headers)
                                    for tp, r in rows])

    def produce_sections(self, sections, timestamp_ms):
        """Each section decoded back into records (what the broker would store)."""
        def records():
            for tp, section, count in sections:
                _, decoded = decode_batch(seal_batch(section, count, timestamp_ms=timestamp_ms))
                yield from ((tp, r.key, r.value, r.timestamp, r.headers) for r in decoded)
        self._produce_call(records)

    def open_sections(self, timestamp_ms):
        """Each `add` appended at once, as one produce_sections call."""
        log = self

        class Writer:
            def add(self, sections):
                log.produce_sections(sections, timestamp_ms)

            def close(self):
                pass

        return Writer()

    def _produce_call(self, records) -> None:
        self.produce_calls += 1
        if self.produce_calls == self.fail_on_produce_call:
            raise AmbiguousWriteError("connection lost before the append")
        for tp, key, value, ts, headers in records():
            self.append(tp, value, key, ts, headers)
        if self.fail_after_append:
            self.fail_after_append -= 1
            raise AmbiguousWriteError("connection lost after the append")

    def ensure_topic(self, name, partitions=1, configs=None):
        if not any(t == name for t, _ in self.logs):
            self.add_topic(name, partitions)
            self.topic_configs[name] = dict(configs or {})
