"""metrics.registry: exposition format 0.0.4 exactly, checked by a strict parser written here."""
from __future__ import annotations

import math
import re

import pytest
from hypothesis import given, settings, strategies as st

from broker.metrics import BrokerMetrics, api_name
from metrics.registry import CATALOGUE, LATENCY_BUCKETS, MetricDef, MetricsError, MetricsRegistry, format_value

NAME_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
VALUE_RE = re.compile(r"[+-]?(Inf|NaN|[0-9]+(\.[0-9]*)?([eE][+-]?[0-9]+)?|\.[0-9]+([eE][+-]?[0-9]+)?)")
_UNESCAPE = {"\\": "\\", '"': '"', "n": "\n"}


class ExpositionError(AssertionError):
    pass


def _parse_labels(text: str, pos: int) -> tuple[dict[str, str], int]:
    """Parse `{a="x",b="y"}` starting at text[pos] == '{'; returns (labels, position after '}')."""
    labels: dict[str, str] = {}
    pos += 1
    while True:
        if text[pos] == "}":
            return labels, pos + 1
        m = LABEL_RE.match(text, pos)
        if not m or text[m.end():m.end() + 2] != '="':
            raise ExpositionError(f"bad label at {text[pos:]!r}")
        name, pos = m.group(), m.end() + 2
        value = []
        while text[pos] != '"':
            if text[pos] == "\\":
                if text[pos + 1] not in _UNESCAPE:
                    raise ExpositionError(f"bad escape in {text!r}")
                value.append(_UNESCAPE[text[pos + 1]])
                pos += 2
            elif text[pos] == "\n":
                raise ExpositionError("raw newline in a label value")
            else:
                value.append(text[pos])
                pos += 1
        if name in labels:
            raise ExpositionError(f"label {name} twice")
        labels[name] = "".join(value)
        pos += 1
        if text[pos] == ",":
            pos += 1
        elif text[pos] != "}":
            raise ExpositionError(f"expected , or }} in {text!r}")


def parse_exposition(text: str) -> dict[str, dict]:
    """family name -> {"type", "help", "samples": [(sample name, labels, float)]}.

    Strict: HELP then TYPE precede a family's samples, sample names must belong to
    the family just announced, no series twice, histograms cumulative and complete."""
    if text and not text.endswith("\n"):
        raise ExpositionError("output must end with a newline")
    families: dict[str, dict] = {}
    current = None
    seen: set = set()
    for line in text.split("\n")[:-1]:
        if line.startswith("# HELP "):
            name, _, help_text = line[7:].partition(" ")
            if name in families or not NAME_RE.fullmatch(name):
                raise ExpositionError(f"bad or repeated HELP for {name}")
            help_text = re.sub(r"\\(.)", lambda m: {"n": "\n", "\\": "\\"}[m.group(1)], help_text)
            current = families[name] = {"help": help_text, "type": None, "samples": []}
            current_name = name
        elif line.startswith("# TYPE "):
            name, _, kind = line[7:].partition(" ")
            if current is None or name != current_name or current["type"] or current["samples"]:
                raise ExpositionError(f"TYPE {name} out of place")
            if kind not in ("counter", "gauge", "histogram", "summary", "untyped"):
                raise ExpositionError(f"bad type {kind}")
            current["type"] = kind
        elif line.startswith("#") or not line:
            raise ExpositionError(f"unexpected line {line!r}")
        else:
            m = NAME_RE.match(line)
            if not m or current is None or current["type"] is None:
                raise ExpositionError(f"sample outside a family: {line!r}")
            sample_name, pos = m.group(), m.end()
            allowed = {current_name}
            if current["type"] == "histogram":
                allowed = {current_name + s for s in ("_bucket", "_sum", "_count")}
            if sample_name not in allowed:
                raise ExpositionError(f"{sample_name} does not belong to {current_name}")
            labels = {}
            if line[pos:pos + 1] == "{":
                try:
                    labels, pos = _parse_labels(line, pos)
                except IndexError:
                    raise ExpositionError(f"unterminated labels in {line!r}") from None
            if line[pos:pos + 1] != " " or not VALUE_RE.fullmatch(line[pos + 1:]):
                raise ExpositionError(f"bad value in {line!r}")
            key = (sample_name, tuple(sorted(labels.items())))
            if key in seen:
                raise ExpositionError(f"series twice: {key}")
            seen.add(key)
            current["samples"].append((sample_name, labels, float(line[pos + 1:])))
    for name, fam in families.items():
        if fam["type"] == "histogram":
            _check_histogram(name, fam["samples"])
    return families


def _check_histogram(name: str, samples) -> None:
    series: dict[tuple, dict] = {}
    for sample_name, labels, value in samples:
        base = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
        s = series.setdefault(base, {"buckets": [], "sum": None, "count": None})
        if sample_name.endswith("_bucket"):
            s["buckets"].append((float(labels["le"].replace("Inf", "inf")), value))
        else:
            s[sample_name.rsplit("_", 1)[1]] = value
    for base, s in series.items():
        bounds = [b for b, _ in s["buckets"]]
        counts = [c for _, c in s["buckets"]]
        if bounds != sorted(bounds) or bounds[-1] != math.inf:
            raise ExpositionError(f"{name}{base}: buckets not ascending to +Inf")
        if counts != sorted(counts) or counts[-1] != s["count"] or s["sum"] is None:
            raise ExpositionError(f"{name}{base}: buckets not cumulative or _count/_sum missing")


def samples_of(text: str, family: str) -> dict[tuple, float]:
    fam = parse_exposition(text)[family]
    return {tuple(sorted(labels.items())): value for _, labels, value in fam["samples"]}


# ------------------------------------------------------------------------ the parser itself


@pytest.mark.parametrize("bad", [
    'x 1\n',                                              # no HELP/TYPE
    '# HELP x h\n# TYPE x gauge\nx{a="b} 1\n',            # unterminated label value
    '# HELP x h\n# TYPE x gauge\nx{a="\\q"} 1\n',         # bad escape
    '# HELP x h\n# TYPE x gauge\nx one\n',                # bad value
    '# HELP x h\n# TYPE x gauge\ny 1\n',                  # foreign sample
    '# HELP x h\n# TYPE x gauge\nx 1\nx 2\n',             # series twice
    '# HELP x h\n# TYPE x gauge\nx 1',                    # no final newline
    '# HELP x h\n# TYPE x histogram\nx_bucket{le="1.0"} 2\nx_bucket{le="+Inf"} 1\nx_sum 1\nx_count 1\n',
])
def test_strict_parser_rejects_malformed_text(bad):
    with pytest.raises(ExpositionError):
        parse_exposition(bad)


# ------------------------------------------------------------------------ exact output


def test_render_is_exactly_the_0_0_4_text_format():
    r = MetricsRegistry()
    r.define(MetricDef("t_requests_total", "counter", "Requests.\nSecond line \\ done.", ("api", "code")))
    r.define(MetricDef("t_latency_seconds", "histogram", "Latency.", ("api",), (0.1, 1.0)))
    r.define(MetricDef("t_up", "gauge", "Up."))
    r.counter("t_requests_total").labels("Produce", 0).inc(3)
    r.counter("t_requests_total").labels(api='a"b', code="x\\y\nz").inc()
    h = r.histogram("t_latency_seconds").labels("Fetch")
    for v in (0.05, 0.1, 0.5, 7.0):
        h.observe(v)
    r.gauge("t_up").set(1.5)
    assert r.render() == (
        '# HELP t_latency_seconds Latency.\n'
        '# TYPE t_latency_seconds histogram\n'
        't_latency_seconds_bucket{api="Fetch",le="0.1"} 2\n'
        't_latency_seconds_bucket{api="Fetch",le="1.0"} 3\n'
        't_latency_seconds_bucket{api="Fetch",le="+Inf"} 4\n'
        't_latency_seconds_sum{api="Fetch"} 7.65\n'
        't_latency_seconds_count{api="Fetch"} 4\n'
        '# HELP t_requests_total Requests.\\nSecond line \\\\ done.\n'
        '# TYPE t_requests_total counter\n'
        't_requests_total{api="Produce",code="0"} 3\n'
        't_requests_total{api="a\\"b",code="x\\\\y\\nz"} 1\n'
        '# HELP t_up Up.\n'
        '# TYPE t_up gauge\n'
        't_up 1.5\n'
    )
    fams = parse_exposition(r.render())
    assert fams["t_requests_total"]["help"] == "Requests.\nSecond line \\ done."
    assert samples_of(r.render(), "t_requests_total")[(("api", 'a"b'), ("code", "x\\y\nz"))] == 1


def test_empty_registry_renders_nothing_and_unlabelled_metrics_start_at_zero():
    r = MetricsRegistry()
    assert r.render() == ""
    r.counter("raftkafka_isr_shrinks_total")
    r.gauge("raftkafka_raft_epoch")
    assert samples_of(r.render(), "raftkafka_isr_shrinks_total") == {(): 0}
    assert samples_of(r.render(), "raftkafka_raft_epoch") == {(): 0}


@pytest.mark.parametrize("value,text", [
    (0, "0"), (7, "7"), (-3, "-3"), (True, "1"), (2.0, "2"), (0.25, "0.25"), (1e-05, "1e-05"),
    (math.inf, "+Inf"), (-math.inf, "-Inf"), (math.nan, "NaN"), (1e20, "1e+20"),
])
def test_format_value(value, text):
    assert format_value(value) == text
    assert VALUE_RE.fullmatch(text)


# ------------------------------------------------------------------------ histograms


def test_histogram_bucket_bounds_are_inclusive_and_overflow_goes_to_inf():
    r = MetricsRegistry()
    h = r.histogram("raftkafka_request_latency_seconds").labels("Produce")
    observed = [0.0, LATENCY_BUCKETS[0], LATENCY_BUCKETS[0] * 1.01, LATENCY_BUCKETS[-1], 1000.0]
    for v in observed:
        h.observe(v)
    fam = parse_exposition(r.render())["raftkafka_request_latency_seconds"]
    buckets = {lab["le"]: v for name, lab, v in fam["samples"] if name.endswith("_bucket")}
    assert buckets[repr(LATENCY_BUCKETS[0])] == 2  # 0 and exactly the first bound
    assert buckets[repr(LATENCY_BUCKETS[1])] == 3
    assert buckets[repr(LATENCY_BUCKETS[-1])] == 4  # the last bound is inclusive too
    assert buckets["+Inf"] == 5
    totals = {name: v for name, lab, v in fam["samples"] if not name.endswith("_bucket")}
    assert totals["raftkafka_request_latency_seconds_count"] == 5
    assert totals["raftkafka_request_latency_seconds_sum"] == pytest.approx(sum(observed))


@given(st.lists(st.floats(min_value=0, max_value=100, allow_nan=False), max_size=50))
@settings(max_examples=60, deadline=None)
def test_histogram_counts_match_a_direct_count(values):
    r = MetricsRegistry()
    h = r.histogram("raftkafka_request_latency_seconds")
    for v in values:
        h.labels("Fetch").observe(v)
    h.labels("Fetch")  # a series exists even with no observations
    fam = parse_exposition(r.render())["raftkafka_request_latency_seconds"]
    for name, labels, count in fam["samples"]:
        if name.endswith("_bucket"):
            bound = float(labels["le"].replace("Inf", "inf"))
            assert count == sum(1 for v in values if v <= bound)


@pytest.mark.parametrize("buckets", [(), (1.0, 0.5), (1.0, 1.0), (1.0, math.inf), (math.nan,)])
def test_histogram_rejects_bad_buckets(buckets):
    r = MetricsRegistry()
    r.define(MetricDef("bad_seconds", "histogram", "x", (), buckets))
    with pytest.raises(MetricsError):
        r.histogram("bad_seconds")


# ------------------------------------------------------------------------ escaping round trip


@given(st.text(max_size=30))
@settings(max_examples=150, deadline=None)
def test_any_label_value_survives_render_and_parse(value):
    r = MetricsRegistry()
    r.counter("raftkafka_broker_topic_bytes_in_total").labels(value).inc(9)
    assert samples_of(r.render(), "raftkafka_broker_topic_bytes_in_total") == {(("topic", value),): 9}


# ------------------------------------------------------------------------ gauges


def test_gauge_functions_are_evaluated_at_scrape_time():
    r = MetricsRegistry()
    epoch = [3]
    r.gauge("raftkafka_raft_epoch").set_function(lambda: epoch[0])
    lag = {(2,): 5, ("3",): 0}
    r.gauge("raftkafka_raft_follower_lag").set_function(lambda: lag)
    assert samples_of(r.render(), "raftkafka_raft_epoch") == {(): 3}
    epoch[0] = 4
    del lag[(2,)]
    text = r.render()
    assert samples_of(text, "raftkafka_raft_epoch") == {(): 4}
    assert samples_of(text, "raftkafka_raft_follower_lag") == {(("voter", "3"),): 0}


def test_a_failing_gauge_function_drops_only_its_samples():
    r = MetricsRegistry()
    r.gauge("raftkafka_raft_epoch").set_function(lambda: 1 // 0)
    r.gauge("raftkafka_raft_follower_lag").set_function(lambda: {(1, 2): 3})  # wrong label count
    r.gauge("raftkafka_raft_leader_id").set_function(lambda: None)
    r.counter("raftkafka_isr_expands_total").inc(2)
    fams = parse_exposition(r.render())
    assert fams["raftkafka_raft_epoch"]["samples"] == []
    assert fams["raftkafka_raft_follower_lag"]["samples"] == []
    assert fams["raftkafka_raft_leader_id"]["samples"] == []
    assert fams["raftkafka_isr_expands_total"]["samples"][0][2] == 2


def test_settable_gauge():
    r = MetricsRegistry()
    g = r.gauge("raftkafka_broker_connections")
    g.inc()
    g.inc(4)
    g.dec(2)
    assert samples_of(r.render(), "raftkafka_broker_connections") == {(): 3}
    g.set(0)
    assert samples_of(r.render(), "raftkafka_broker_connections") == {(): 0}


# ------------------------------------------------------------------------ misuse is a typed error


def test_misuse_raises_metrics_error():
    r = MetricsRegistry()
    with pytest.raises(MetricsError, match="unknown metric"):
        r.counter("raftkafka_no_such_thing_total")
    with pytest.raises(MetricsError, match="not a"):
        r.gauge("raftkafka_isr_shrinks_total")
    c = r.counter("raftkafka_broker_topic_bytes_in_total")
    with pytest.raises(MetricsError, match="never goes down"):
        c.labels("t").inc(-1)
    with pytest.raises(MetricsError):
        c.labels("t", "extra")
    with pytest.raises(MetricsError):
        c.labels(wrong="t")
    with pytest.raises(MetricsError, match="use .labels"):
        c.inc()
    with pytest.raises(MetricsError, match="differently"):
        r.define(MetricDef("raftkafka_isr_shrinks_total", "gauge", "x"))
    with pytest.raises(MetricsError, match="kind"):
        r.define(MetricDef("t_thing", "summary", "x"))


def test_labels_by_name_and_by_position_are_the_same_series():
    r = MetricsRegistry()
    c = r.counter("raftkafka_request_total")
    c.labels("Fetch").inc()
    c.labels(api="Fetch").inc(2)
    assert c.value("Fetch") == 3
    assert c.value("Produce") == 0


# ------------------------------------------------------------------------ the catalogue


def test_catalogue_names_kinds_and_labels_are_well_formed():
    names = [d.name for d in CATALOGUE]
    assert len(names) == len(set(names))
    for d in CATALOGUE:
        assert NAME_RE.fullmatch(d.name) and d.name.startswith("raftkafka_"), d.name
        assert d.help and d.help.endswith("."), d.name
        assert all(LABEL_RE.fullmatch(l) and l != "le" for l in d.labels), d.name
        assert (d.kind == "counter") == d.name.endswith("_total"), d.name
        assert (d.kind == "histogram") == bool(d.buckets), d.name
    required = {
        "raftkafka_broker_topic_bytes_in_total", "raftkafka_broker_topic_messages_in_total",
        "raftkafka_broker_topic_bytes_out_total", "raftkafka_request_total", "raftkafka_request_latency_seconds",
        "raftkafka_under_replicated_partitions", "raftkafka_offline_partitions", "raftkafka_isr_shrinks_total",
        "raftkafka_isr_expands_total", "raftkafka_active_controller", "raftkafka_raft_leader_id",
        "raftkafka_raft_epoch", "raftkafka_raft_high_watermark", "raftkafka_raft_log_end_offset",
        "raftkafka_raft_follower_lag", "raftkafka_consumer_group_lag",
    }
    assert required <= set(names)


def test_every_catalogue_metric_renders_as_valid_text():
    r = MetricsRegistry()
    for d in CATALOGUE:
        metric = {"counter": r.counter, "gauge": r.gauge, "histogram": r.histogram}[d.kind](d.name)
        child = metric.labels(*[f"v{i}" for i in range(len(d.labels))])
        if d.kind == "histogram":
            child.observe(0.01)
        elif d.kind == "counter":
            child.inc(2)
        else:
            child.set(5)
    fams = parse_exposition(r.render())
    assert sorted(fams) == sorted(d.name for d in CATALOGUE)
    for d in CATALOGUE:
        assert fams[d.name]["type"] == d.kind and fams[d.name]["help"] == d.help


# ------------------------------------------------------------------------ BrokerMetrics


def test_broker_metrics_hooks_feed_the_catalogue_series():
    r = MetricsRegistry()
    m = BrokerMetrics(r)
    m.produced("orders", 120, 3)
    m.produced("orders", 80, 2)
    m.produce_failed("orders")
    m.fetched("orders", 200)
    m.fetched("orders", 0)  # an empty read creates no series of its own
    m.fetched("empty", 0)
    m.fetched("orders", 50, follower=True)
    m.replicated_in("orders", 70)
    m.request(0, 0.002)  # api key 0: Produce
    m.request(0, 0.2)
    m.request(9999, 0.1)  # undefined keys share one series
    m.request(-5, 0.1)
    m.isr_shrinks.inc()
    text = r.render()
    assert samples_of(text, "raftkafka_broker_topic_bytes_in_total") == {(("topic", "orders"),): 200}
    assert samples_of(text, "raftkafka_broker_topic_messages_in_total") == {(("topic", "orders"),): 5}
    assert samples_of(text, "raftkafka_broker_topic_bytes_out_total") == {(("topic", "orders"),): 200}
    assert samples_of(text, "raftkafka_broker_topic_failed_produce_requests_total") == {(("topic", "orders"),): 1}
    assert samples_of(text, "raftkafka_broker_topic_replication_bytes_out_total") == {(("topic", "orders"),): 50}
    assert samples_of(text, "raftkafka_broker_topic_replication_bytes_in_total") == {(("topic", "orders"),): 70}
    assert samples_of(text, "raftkafka_request_total") == {(("api", "Produce"),): 2, (("api", "Unknown"),): 2}
    assert samples_of(text, "raftkafka_isr_shrinks_total") == {(): 1}
    assert samples_of(text, "raftkafka_isr_expands_total") == {(): 0}
    latency = samples_of(text, "raftkafka_request_latency_seconds")
    assert latency[(("api", "Produce"), ("le", "0.0025"))] == 1
    assert latency[(("api", "Produce"), ("le", "0.25"))] == 2


@pytest.mark.parametrize("key,name", [(0, "Produce"), (1, "Fetch"), (2, "ListOffsets"), (18, "ApiVersions"),
                                      (23, "OffsetForLeaderEpoch"), (60, "DescribeCluster"), (31337, "Unknown")])
def test_api_names_are_kafkas_request_names(key, name):
    assert api_name(key) == name
