"""The stored initial offsets (sourceId) and the range reader's loops, over the fake log."""
import json

import pytest

from raftkafka.client.errors import KafkaTimeoutError
from spark_source.cluster_io import Fetched, scan
from spark_source.initial_offsets import STORE_TOPIC, describe_source, initial_offsets, lookup
from spark_source.options import InvalidOptionError, parse_source_options
from spark_source.planning import DataLossError, OffsetRange
from tests.spark.fake_log import FakeLog


def test_first_resolution_is_stored_and_later_calls_return_it():
    log = FakeLog({"t": 2})
    for i in range(5):
        log.append(("t", 0), b"x")
    calls = []

    def latest():
        calls.append(1)
        return log.list_offsets([("t", 0), ("t", 1)], -1)

    first = initial_offsets(log, "q1", "subscribe=t starting=Latest()", latest, 1)
    assert first == {("t", 0): 5, ("t", 1): 0} and len(calls) == 1
    assert log.topic_configs[STORE_TOPIC] == {"cleanup.policy": "compact"}
    for i in range(3):  # the log moves on; a restarted query still starts where the first one resolved
        log.append(("t", 1), b"y")
    assert initial_offsets(log, "q1", "subscribe=t starting=Latest()", latest, 2) == first
    assert len(calls) == 1
    # another id resolves on its own
    assert initial_offsets(log, "q2", "subscribe=t starting=Latest()", latest, 3) == {("t", 0): 5, ("t", 1): 3}
    stored = log.logs[(STORE_TOPIC, 0)]
    assert [r.key for r in stored] == [b"q1", b"q2"]
    assert json.loads(stored[0].value) == {"offsets": {"t": {"0": 5, "1": 0}}, "source": "subscribe=t starting=Latest()"}


def test_the_first_stored_entry_wins_and_a_different_query_is_refused():
    log = FakeLog({"t": 1})
    log.ensure_topic(STORE_TOPIC, 1)
    for offset in (7, 9):  # two racing first starts of the same id both wrote
        log.append((STORE_TOPIC, 0), json.dumps({"source": "s", "offsets": {"t": {"0": offset}}}).encode(), key=b"q")
    assert lookup(log, "q")["offsets"] == {"t": {"0": 7}}
    assert initial_offsets(log, "q", "s", lambda: pytest.fail("must not resolve"), 1) == {("t", 0): 7}
    with pytest.raises(InvalidOptionError, match="option 'sourceId': 'q' already names a query that started with s"):
        initial_offsets(log, "q", "subscribe=other starting=Latest()", lambda: {}, 1)


def test_range_reader_loops_over_small_fetches():
    pa = pytest.importorskip("pyarrow")
    from spark_source import range_reader
    log = FakeLog({"t": 1})
    log.records_per_fetch = 7
    for i in range(100):
        log.append(("t", 0), b"v%d" % i)
    batches = list(range_reader.read_range(log, OffsetRange("t", 0, 3, 97)))
    assert all(b.num_rows <= 7 for b in batches) and len(batches) >= 14  # one Arrow batch per fetch
    assert pa.Table.from_batches(batches).column("offset").to_pylist() == list(range(3, 97))


def test_a_packed_task_reads_its_ranges_in_order_and_hints_each_next_range_first():
    pa = pytest.importorskip("pyarrow")
    from spark_source.readers import RaftKafkaBatchReader, RangePartition
    log = FakeLog({"t": 3})
    for i in range(30):
        log.append(("t", i % 3), b"v%d" % i)
    reader = RaftKafkaBatchReader(parse_source_options({"kafka.bootstrap.servers": "h:1", "subscribe": "t"},
                                                       streaming=False))
    reader._client = lambda: log
    task = RangePartition((OffsetRange("t", 2, 4, 10), OffsetRange("t", 0, 0, 3), OffsetRange("t", 1, 5, 6)))
    rows = pa.Table.from_batches(list(reader.read(task)))
    assert list(zip(rows.column("partition").to_pylist(), rows.column("offset").to_pylist())) == \
        [(2, o) for o in range(4, 10)] + [(0, 0), (0, 1), (0, 2), (1, 5)]
    assert log.prefetched == [(("t", 0), 0), (("t", 1), 5)]


def test_range_reader_waits_bounded_for_a_short_log_then_reports_loss():
    pytest.importorskip("pyarrow")
    from spark_source.range_reader import read_range
    log = FakeLog({"t": 1})
    for i in range(5):
        log.append(("t", 0), b"v")
    with pytest.raises(DataLossError, match="stopped at offset 5 before the planned end 8"):
        list(read_range(log, OffsetRange("t", 0, 0, 8), wait_timeout_s=0.2))
    rows = list(read_range(log, OffsetRange("t", 0, 0, 8), wait_timeout_s=0.2, fail_on_data_loss=False))
    assert sum(b.num_rows for b in rows) == 5


def test_scan_reads_to_the_end_across_empty_polls_and_skips_deleted_records():
    log = FakeLog({"t": 1})
    log.records_per_fetch = 3
    for i in range(10):
        log.append(("t", 0), b"%d" % i)
    assert [r.offset for r in scan(log, ("t", 0), 2, 8)] == list(range(2, 8))
    fetch, polls = log.fetch, []

    def first_poll_empty(tp, offset, **kw):  # a consumer's first poll may only load metadata
        polls.append(offset)
        return fetch(tp, offset, **kw) if len(polls) > 1 else Fetched([], offset)
    log.fetch = first_poll_empty
    assert [r.offset for r in scan(log, ("t", 0), 0, 10)] == list(range(10))
    log.fetch = fetch
    log.log_start[("t", 0)] = 6
    assert [r.offset for r in scan(log, ("t", 0), 0, 10)] == [6, 7, 8, 9]
    with pytest.raises(KafkaTimeoutError, match="no records past offset 10"):
        list(scan(log, ("t", 0), 8, 12, timeout_s=0.1))


def test_source_description_is_canonical():
    def described(**options):
        o = parse_source_options({"kafka.bootstrap.servers": "h:1", "sourceid": "q", **options}, streaming=True)
        return describe_source(o.subscription, o.starting)

    assert described(subscribe="b,a") == "subscribe=a,b starting at latest"
    assert described(subscribe="t", startingoffsetsbytimestamp='{"t":{"1":5,"0":7}}') == \
        described(subscribe="t", startingoffsetsbytimestamp='{"t":{"0":7,"1":5}}') == \
        'subscribe=t starting at timestamps {"t":{"0":7,"1":5}} (error)'
    assert described(subscribepattern="t.*", startingtimestamp="9", startingoffsetsbytimestampstrategy="latest") == \
        "subscribePattern=t.* starting at timestamp 9 (latest)"
    assert described(assign='{"t":[0]}', startingoffsets='{"t":{"0":-1}}') == \
        'assign=t-0 starting at offsets {"t":{"0":-1}}'
