"""Range planning, minPartitions splits, the per-trigger budget, data loss, the range reader
over a fake log, Arrow conversion, and the exactly-once sink protocol."""
import json
import logging

import pytest

from spark_source.planning import DataLossError, OffsetRange, clamp_latest, pack_ranges, plan_ranges, rate_limit, \
    split_ranges
from spark_source.cluster_io import AmbiguousWriteError
from spark_source.sink_protocol import SINK_HEADER, append_ledger, ledger_topic, write_task
from spark_source.sink_rows import SinkRows
from tests.spark.fake_log import FakeLog
from wire.records import SimpleRecord

pa = pytest.importorskip("pyarrow")  # the Arrow part needs the [spark] extra


def test_plan_ranges_new_partitions_and_empty():
    start = {("t", 0): 5, ("t", 1): 3}
    end = {("t", 0): 9, ("t", 1): 3, ("t", 2): 4}
    ranges = plan_ranges(start, end, {("t", 0): 0, ("t", 1): 0, ("t", 2): 0}, True)
    assert ranges == [OffsetRange("t", 0, 5, 9), OffsetRange("t", 2, 0, 4)]


def test_plan_ranges_data_loss(caplog):
    with pytest.raises(DataLossError, match="retention"):
        plan_ranges({("t", 0): 2}, {("t", 0): 9}, {("t", 0): 4}, True)
    with pytest.raises(DataLossError, match="changed from 9 to 4"):
        plan_ranges({("t", 0): 9}, {("t", 0): 4}, {("t", 0): 0}, True)
    with pytest.raises(DataLossError, match="gone"):
        plan_ranges({("t", 0): 1, ("gone", 0): 3}, {("t", 0): 4}, {("t", 0): 0}, True)
    with caplog.at_level(logging.WARNING, logger="raftkafka.spark"):
        ranges = plan_ranges({("t", 0): 2}, {("t", 0): 9}, {("t", 0): 4}, False)
    assert ranges == [OffsetRange("t", 0, 4, 9)] and "retention" in caplog.text


def test_split_min_partitions_like_kafka():
    ranges = [OffsetRange("t", 0, 0, 100), OffsetRange("t", 1, 0, 10)]
    assert split_ranges(ranges, None) == ranges
    assert split_ranges(ranges, 2) == ranges  # not more than the range count: unchanged
    pieces = split_ranges(ranges, 4)
    # ideal = 110/4 = 27.5: round(100/27.5)=4 pieces of 25, the small range stays whole
    assert pieces == [OffsetRange("t", 0, 0, 25), OffsetRange("t", 0, 25, 50), OffsetRange("t", 0, 50, 75),
                      OffsetRange("t", 0, 75, 100), OffsetRange("t", 1, 0, 10)]
    odd = split_ranges([OffsetRange("t", 0, 0, 10)], 3)
    assert [r.size for r in odd] == [3, 3, 4] and odd[-1].end == 10  # last piece takes the remainder
    assert [r.size for r in split_ranges([OffsetRange("t", 0, 0, 10)], None, 4)] == [3, 3, 4]


def test_pack_ranges_fills_tasks_up_to_the_minimum_and_never_past_the_maximum():
    quarter = [OffsetRange("t", p, 0, 25_000) for p in range(4)]
    assert pack_ranges(quarter, None) == [(r,) for r in quarter]  # Spark's plan: one range per task
    assert pack_ranges(quarter, 50_000) == [tuple(quarter[:2]), tuple(quarter[2:])]
    assert pack_ranges(quarter, 100_000) == [tuple(quarter)]
    big_then_small = [OffsetRange("t", 0, 0, 60), OffsetRange("t", 1, 0, 10), OffsetRange("t", 2, 0, 10)]
    assert pack_ranges(big_then_small, 50) == [(big_then_small[0],), tuple(big_then_small[1:])]
    assert pack_ranges(big_then_small, 50, max_records=15) == [(r,) for r in big_then_small]
    # Every record is planned once, in order: the same ranges as before, only grouped.
    many = [OffsetRange("t", p, 5, 5 + p) for p in range(1, 30)]
    packed = pack_ranges(many, 40)
    assert [r for task in packed for r in task] == many
    assert all(sum(r.size for r in task[:-1]) < 40 for task in packed)


def test_rate_limit_is_proportional_and_never_starves():
    start = {("t", 0): 0, ("t", 1): 0, ("t", 2): 10}
    latest = {("t", 0): 900, ("t", 1): 100, ("t", 2): 11}
    end = rate_limit(start, latest, 100)
    assert end[("t", 0)] == 89 and end[("t", 1)] == 9  # floor(100*900/1001), floor(100*100/1001)
    assert end[("t", 2)] == 11  # share < 1 rounds up
    assert rate_limit(start, latest, 10**9) == latest
    assert rate_limit(latest, latest, 5) == latest
    assert clamp_latest({("t", 0): 50}, {("t", 0): 40, ("t", 1): 3}) == {("t", 0): 50, ("t", 1): 3}


def test_range_reader_exact_range_with_arrow_schema():
    from spark_source.arrow_rows import arrow_schema
    from spark_source.range_reader import read_range
    log = FakeLog({"t": 1})
    for i in range(120):
        log.append(("t", 0), f"v{i}".encode(), key=None if i % 2 else b"k", ts=1_000 + i,
                   headers=(("h", b"x"),) if i == 7 else ())
    batches = list(read_range(log, OffsetRange("t", 0, 5, 107), include_headers=True))
    table = pa.Table.from_batches(batches)
    assert table.schema == arrow_schema(True)
    assert table.column("offset").to_pylist() == list(range(5, 107))
    assert table.column("value").to_pylist()[0] == b"v5"
    assert table.column("key").to_pylist()[:2] == [None, b"k"]
    assert table.column("headers").to_pylist()[2] == [{"key": "h", "value": b"x"}]
    assert table.column("headers").to_pylist()[0] is None
    assert table.column("timestamp").cast(pa.int64()).to_pylist()[0] == 1_005_000  # µs
    assert set(table.column("timestampType").to_pylist()) == {0}


def test_range_reader_reports_retention_loss():
    from spark_source.range_reader import read_range
    log = FakeLog({"t": 1})
    for i in range(10):
        log.append(("t", 0), b"v")
    log.log_start[("t", 0)] = 6
    with pytest.raises(DataLossError, match=r"\[2, 6\)"):
        list(read_range(log, OffsetRange("t", 0, 2, 10)))
    rows = pa.Table.from_batches(list(read_range(log, OffsetRange("t", 0, 2, 10), fail_on_data_loss=False)))
    assert rows.column("offset").to_pylist() == [6, 7, 8, 9]


def _rows(n, tp=("out", 0)):
    return SinkRows.from_records([(tp if i % 3 else ("out", 1), SimpleRecord(None, f"r{i}".encode()))
                                  for i in range(n)])


def _values(log):
    return sorted(r.value for tp, recs in log.logs.items() if tp[0] == "out" for r in recs)


def test_sink_first_attempt_writes_each_row_once():
    log = FakeLog({"out": 2, ledger_topic("q"): 1})
    result = write_task(log, "q", 0, 0, [_rows(10)], timestamp_ms=1)
    assert (result.written, result.skipped_as_duplicates) == (10, 0)
    assert _values(log) == sorted(f"r{i}".encode() for i in range(10))
    tags = [dict(r.headers)[SINK_HEADER] for r in log.logs[("out", 1)]]
    assert tags[0] == b"q:0:0:0"
    # the begin record came first and holds the targets' high watermarks before the write
    begin = json.loads(log.logs[(ledger_topic("q"), 0)][0].value)
    assert begin == {"kind": "begin", "batch": 0, "task": 0, "marks": {"out": {"0": 0, "1": 0}}}


def test_sink_task_retry_after_partial_write_skips_written_rows():
    log = FakeLog({"out": 2, ledger_topic("q"): 1})
    orig = log.produce_sections

    def dying(sections, timestamp_ms):  # attempt 1 dies with one partition's rows appended
        if sections[0][0][0] != "out":
            return orig(sections, timestamp_ms)  # the ledger
        orig(sections[:1], timestamp_ms)
        raise RuntimeError("executor lost")
    log.produce_sections = dying
    with pytest.raises(RuntimeError):
        write_task(log, "q", 0, 0, [_rows(10)], timestamp_ms=1)
    log.produce_sections = orig
    assert len(_values(log)) == 6
    result = write_task(log, "q", 0, 0, [_rows(10)], timestamp_ms=1)
    assert (result.written, result.skipped_as_duplicates) == (4, 6)
    assert _values(log) == sorted(f"r{i}".encode() for i in range(10))


def test_sink_ambiguous_write_fails_the_task_and_the_next_attempt_rescans():
    log = FakeLog({"out": 2, ledger_topic("q"): 1})
    write_task(log, "q", 0, 1, [SinkRows.from_records([])], timestamp_ms=1)  # another task's begin in the ledger
    log.fail_after_append = 2  # the begin record and the data land but report failure
    with pytest.raises(AmbiguousWriteError):
        write_task(log, "q", 1, 0, [_rows(6)], timestamp_ms=1)
    with pytest.raises(AmbiguousWriteError):  # (the begin record's own failure)
        write_task(log, "q", 1, 0, [_rows(6)], timestamp_ms=1)
    again = write_task(log, "q", 1, 0, [_rows(6)], timestamp_ms=1)
    assert (again.written, again.skipped_as_duplicates) == (0, 6)
    assert _values(log) == sorted(f"r{i}".encode() for i in range(6))
    log.fail_on_produce_call = log.produce_calls + 2  # a write that never left: the re-run writes it all
    with pytest.raises(AmbiguousWriteError):
        write_task(log, "q", 2, 0, [_rows(3)], timestamp_ms=1)
    assert write_task(log, "q", 2, 0, [_rows(3)], timestamp_ms=1).written == 3


def test_sink_replayed_committed_batch_writes_nothing():
    log = FakeLog({"out": 2, ledger_topic("q"): 1})
    write_task(log, "q", 0, 0, [_rows(5)], timestamp_ms=1)
    append_ledger(log, "q", {"kind": "commit", "batch": 0}, 1)
    again = write_task(log, "q", 0, 0, [_rows(5)], timestamp_ms=1)
    assert again.batch_already_committed and again.written == 0
    nxt = write_task(log, "q", 1, 0, [_rows(5)], timestamp_ms=1)
    assert nxt.written == 5 and len(_values(log)) == 10


def test_sink_ledger_scan_reaches_past_many_entries():
    log = FakeLog({"out": 1, ledger_topic("q"): 1})
    append_ledger(log, "q", {"kind": "commit", "batch": 0}, 1)
    rows = SinkRows.from_records([(("out", 0), SimpleRecord(None, b"x"))])
    write_task(log, "q", 1, 0, [rows], timestamp_ms=1)
    for task in range(1, 300):  # many other tasks' begin records after ours
        append_ledger(log, "q", {"kind": "begin", "batch": 1, "task": task, "marks": {}}, 1)
    result = write_task(log, "q", 1, 0, [rows], timestamp_ms=1)
    assert (result.written, result.skipped_as_duplicates) == (0, 1)


def test_sink_with_known_targets_appends_each_chunk_as_it_comes_and_a_retry_skips_those_written():
    log = FakeLog({"out": 2, ledger_topic("q"): 1})
    chunks = [SinkRows.from_records([(("out", i % 2), SimpleRecord(None, b"r%d" % i)) for i in range(4)])]
    chunks.append(SinkRows.from_records([(("out", 0), SimpleRecord(None, b"r%d" % i)) for i in range(4, 7)]))
    chunks[1].first_row = 4
    targets = [("out", 0), ("out", 1)]
    orig = log.produce_sections

    def dies_on_the_second_chunk(sections, timestamp_ms):
        if sections[0][0][0] == "out" and any(tp == ("out", 0) and count == 3 for tp, _, count in sections):
            raise RuntimeError("executor lost")
        return orig(sections, timestamp_ms)

    def given(rows):  # the input as Spark hands it over: read only as the task goes
        yield from rows

    log.produce_sections = dies_on_the_second_chunk
    with pytest.raises(RuntimeError):
        write_task(log, "q", 0, 0, given(chunks), timestamp_ms=1, targets=targets)
    log.produce_sections = orig
    assert _values(log) == [b"r0", b"r1", b"r2", b"r3"]  # the first chunk landed before the second was read
    begin = json.loads(log.logs[(ledger_topic("q"), 0)][0].value)
    assert begin["marks"] == {"out": {"0": 0, "1": 0}}
    result = write_task(log, "q", 0, 0, given(chunks), timestamp_ms=1, targets=targets)
    assert (result.written, result.skipped_as_duplicates) == (3, 4)
    assert _values(log) == sorted(b"r%d" % i for i in range(7))
    tags = [dict(r.headers)[SINK_HEADER] for r in log.logs[("out", 0)]]
    assert tags == [b"q:0:0:0", b"q:0:0:2", b"q:0:0:4", b"q:0:0:5", b"q:0:0:6"]
