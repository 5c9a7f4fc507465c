"""An in-memory LogClient: partitions as lists of records with a settable HW and log start."""
from __future__ import annotations

from spark_source.cluster_io import AmbiguousWriteError, FetchChunk
from wire.error_codes import ErrorCode
from wire.records import Record, build_batch, decode_batch


class FakeLog:
    def __init__(self, topics: dict[str, int]):
        self.logs = {(t, p): [] for t, n in topics.items() for p in range(n)}
        self.log_start = {tp: 0 for tp in self.logs}
        self.fail_after_append = 0  # next N produces append, then raise AmbiguousWriteError

    def add_topic(self, name: str, partitions: int) -> None:
        for p in range(partitions):
            self.logs[(name, p)] = []
            self.log_start[(name, p)] = 0

    def append(self, tp, value: bytes, key=None, ts=1000, headers=()):
        log = self.logs[tp]
        log.append(Record(len(log), ts, key, value, tuple(headers)))

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

    def fetch(self, tp, offset, max_bytes):
        log, start = self.logs[tp], self.log_start[tp]
        if offset < start or offset > len(log):
            return FetchChunk(b"", len(log), start, ErrorCode.OFFSET_OUT_OF_RANGE)
        records = log[offset:offset + 50]
        data = b""
        for r in records:  # one batch per record keeps offsets exact
            data += build_batch([_simple(r)], base_offset=r.offset, base_timestamp=r.timestamp)
        return FetchChunk(data, len(log), start)

    def produce(self, tp, batch):
        _, records = decode_batch(batch)
        base = len(self.logs[tp])
        for r in records:
            self.append(tp, r.value, r.key, r.timestamp, r.headers)
        if self.fail_after_append:
            self.fail_after_append -= 1
            raise AmbiguousWriteError("connection lost after the append")
        return base


def _simple(r: Record):
    from wire.records import SimpleRecord
    return SimpleRecord(r.key, r.value, r.headers, r.timestamp)
