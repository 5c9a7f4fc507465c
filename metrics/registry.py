"""Metric primitives and the catalogue of every metric a node exports.

Pure bookkeeping: no I/O, no clock of its own (callers time requests with
`env.now()`), nothing global. A node owns one `MetricsRegistry`; the layers
take instruments from it by name and the HTTP endpoint renders it in the
Prometheus text exposition format 0.0.4:

    registry = MetricsRegistry()
    bytes_in = registry.counter("raftkafka_broker_topic_bytes_in_total")
    bytes_in.labels("orders").inc(len(batch))
    registry.histogram("raftkafka_request_latency_seconds").labels("Produce").observe(0.004)
    registry.gauge("raftkafka_raft_epoch").set_function(lambda: core.status().epoch)
    text = registry.render()

Every name must be in CATALOGUE (one place, so docs, dashboards and tests can
be checked against it); `registry.define(MetricDef(...))` adds others.
State such as Raft epochs or under-replicated counts is best a gauge with a
function evaluated at scrape time: nothing to keep in sync on the hot path.
"""
from __future__ import annotations

import logging
import math
from bisect import bisect_left
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Union

__all__ = [
    "CATALOGUE",
    "LATENCY_BUCKETS",
    "Counter",
    "Gauge",
    "Histogram",
    "MetricDef",
    "MetricsError",
    "MetricsRegistry",
    "escape_help",
    "escape_label_value",
    "format_value",
]

log = logging.getLogger(__name__)

# Request latency in seconds: 0.5 ms .. 30 s (long-poll fetches park up to max_wait_ms).
LATENCY_BUCKETS: tuple[float, ...] = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)

COUNTER, GAUGE, HISTOGRAM = "counter", "gauge", "histogram"


class MetricsError(ValueError):
    """A metric used wrongly: unknown name, wrong kind, wrong labels, negative increment."""


@dataclass(frozen=True)
class MetricDef:
    name: str
    kind: str  # "counter" | "gauge" | "histogram"
    help: str
    labels: tuple[str, ...] = ()
    buckets: tuple[float, ...] = ()  # histograms only: finite upper bounds, ascending


def _c(name: str, help: str, *labels: str) -> MetricDef:
    return MetricDef(name, COUNTER, help, labels)


def _g(name: str, help: str, *labels: str) -> MetricDef:
    return MetricDef(name, GAUGE, help, labels)


# Kafka's ops-doc metrics, Prometheus style. Counters end in _total, seconds are seconds.
CATALOGUE: list[MetricDef] = [
    # broker data plane (kafka.server:type=BrokerTopicMetrics)
    _c("raftkafka_broker_topic_bytes_in_total", "Record batch bytes appended by producers, per topic.", "topic"),
    _c("raftkafka_broker_topic_messages_in_total", "Records appended by producers, per topic.", "topic"),
    _c("raftkafka_broker_topic_bytes_out_total", "Record batch bytes sent to consumers, per topic.", "topic"),
    _c("raftkafka_broker_topic_replication_bytes_in_total", "Record batch bytes a follower appended from its leader.",
       "topic"),
    _c("raftkafka_broker_topic_replication_bytes_out_total", "Record batch bytes sent to follower replicas.",
       "topic"),
    _c("raftkafka_broker_topic_failed_produce_requests_total", "Partition produce attempts answered with an error.",
       "topic"),
    # request path (kafka.network:type=RequestMetrics)
    _c("raftkafka_request_total", "Requests handled, per API.", "api"),
    _c("raftkafka_request_errors_total", "Error codes in responses, per API and error (each error_code field "
       "of a response counts; NONE too), as Kafka's ErrorsPerSec.", "api", "error"),
    _c("raftkafka_controller_request_errors_total", "Error codes in a controller's answers to the controller "
       "RPCs (BrokerHeartbeat, AlterPartition, forwarded admin requests, ...), per RPC and top-level error "
       "(NONE too): NOT_CONTROLLER on a controller that is not the active one.", "rpc", "error"),
    MetricDef("raftkafka_request_latency_seconds", HISTOGRAM,
              "Time from a decoded request to its encoded response, per API.", ("api",), LATENCY_BUCKETS),
    _g("raftkafka_broker_connections", "Client connections open on the Kafka listener."),
    # replication (kafka.server:type=ReplicaManager)
    _g("raftkafka_under_replicated_partitions", "Partitions led here whose ISR is smaller than the replica set."),
    _g("raftkafka_leader_partitions", "Partitions this broker leads."),
    _g("raftkafka_partitions", "Partition replicas hosted by this broker."),
    _g("raftkafka_offline_log_partitions", "Replicas hosted here whose log could not be opened."),
    _g("raftkafka_uncleanable_partitions", "Compacted logs the cleaner skips until restart: they hold a record "
                                           "it cannot decode (the reason is in the broker's log)."),
    _c("raftkafka_isr_shrinks_total", "ISR shrinks of partitions led by this broker."),
    _c("raftkafka_isr_expands_total", "ISR expansions of partitions led by this broker."),
    # controller (kafka.controller:type=KafkaController); non-zero only on the active controller
    _g("raftkafka_active_controller", "1 on the active controller (the Raft leader), else 0."),
    _g("raftkafka_offline_partitions", "Partitions without a leader (reported by the active controller)."),
    _g("raftkafka_global_topics", "Topics in the cluster (reported by the active controller)."),
    _g("raftkafka_global_partitions", "Partitions in the cluster (reported by the active controller)."),
    _g("raftkafka_fenced_brokers", "Registered brokers that are fenced (reported by the active controller)."),
    _g("raftkafka_active_brokers", "Registered brokers that are unfenced (reported by the active controller)."),
    # metadata quorum (kafka.server:type=raft-metrics)
    _g("raftkafka_raft_leader_id", "Node id of the Raft leader this node knows, -1 if none."),
    _g("raftkafka_raft_epoch", "Current Raft epoch."),
    _g("raftkafka_raft_high_watermark", "Raft high watermark (end offset of committed metadata)."),
    _g("raftkafka_raft_log_end_offset", "End offset of this node's metadata log."),
    _g("raftkafka_raft_role", "1 for this node's current Raft role, 0 for the others.", "role"),
    _g("raftkafka_raft_follower_lag", "Leader's log end minus each voter's (reported by the leader).", "voter"),
    # consumer groups (kafka.server:type=FetcherLagMetrics / consumer lag)
    _g("raftkafka_consumer_group_lag", "High watermark minus committed offset, per group partition.",
       "group", "topic", "partition"),
    # client quotas (kafka.server:type=Produce/Fetch/Request/ControllerMutation, per user and client-id);
    # an empty user or client_id label: the rate is shared by all of them (the quota's precedence level)
    _g("raftkafka_client_quota_rate", "Measured rate per quota entity over the quota windows: bytes/s for "
       "producer_byte_rate and consumer_byte_rate, percent of one thread for request_percentage.",
       "quota", "user", "client_id"),
    _g("raftkafka_client_quota_throttle_time_ms", "Average throttle time given to a quota entity's throttled "
       "requests over the quota windows.", "quota", "user", "client_id"),
    _g("raftkafka_client_quota_bound", "The quota that applies to a measured quota entity.",
       "quota", "user", "client_id"),
    # controller_mutation_rate on the active controller (kafka.controller ControllerMutation group)
    _g("raftkafka_controller_mutation_rate", "Partitions created or deleted per second per quota entity over "
       "the quota windows (active controller).", "user", "client_id"),
    _g("raftkafka_controller_mutation_tokens", "Partitions left in a quota entity's token bucket (negative: "
       "its debt; active controller).", "user", "client_id"),
    _g("raftkafka_controller_mutation_throttle_time_ms", "Average throttle time given to a quota entity's "
       "throttled topic mutations over the quota windows (active controller).", "user", "client_id"),
    _g("raftkafka_controller_mutation_quota", "The controller_mutation_rate quota that applies to a measured "
       "quota entity (active controller).", "user", "client_id"),
]

Number = Union[int, float]
Samples = Union[Number, Mapping[tuple, Number], Iterable[tuple[tuple, Number]]]


def escape_label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: Number) -> str:
    """Prometheus floats: +Inf, -Inf, NaN, integers without a fraction."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def _label_text(names: tuple[str, ...], values: tuple[str, ...], extra: str = "") -> str:
    parts = [f'{n}="{escape_label_value(v)}"' for n, v in zip(names, values)]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}" if parts else ""


class _Metric:
    """A family: one child per label-value tuple (the unlabelled one has the key ())."""

    def __init__(self, defn: MetricDef):
        self.defn = defn
        self._children: dict[tuple[str, ...], object] = {}

    def labels(self, *values, **named):
        """The child for these label values (positional in declared order, or by name)."""
        child = self._children.get(values)
        if child is not None:  # the hot path: the same str values as last time
            return child
        names = self.defn.labels
        if named:
            if values or sorted(named) != sorted(names):
                raise MetricsError(f"{self.defn.name}: labels are {list(names)}, got {sorted(named)}")
            values = tuple(named[n] for n in names)
        key = tuple(str(v) for v in values)
        child = self._children.get(key)
        if child is None:
            if len(key) != len(names):
                raise MetricsError(f"{self.defn.name}: expected {len(names)} label values, got {len(key)}")
            child = self._children[key] = self._new_child()
        return child

    def _unlabelled(self):
        if self.defn.labels:
            raise MetricsError(f"{self.defn.name} has labels {list(self.defn.labels)}: use .labels(...)")
        return self.labels()

    def _new_child(self):
        raise NotImplementedError

    def samples(self) -> list[str]:
        raise NotImplementedError


class _CounterChild:
    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value: Number = 0

    def inc(self, amount: Number = 1) -> None:
        if amount < 0:
            raise MetricsError("a counter never goes down")
        self.value += amount


class Counter(_Metric):
    def _new_child(self) -> _CounterChild:
        return _CounterChild()

    def inc(self, amount: Number = 1) -> None:
        self._unlabelled().inc(amount)

    def value(self, *label_values) -> Number:
        child = self._children.get(tuple(str(v) for v in label_values))
        return 0 if child is None else child.value

    def values(self) -> dict[tuple[str, ...], Number]:
        """{label values: count} of every series counted so far."""
        return {key: child.value for key, child in self._children.items()}

    def samples(self) -> list[str]:
        if not self.defn.labels and not self._children:
            self._children[()] = _CounterChild()  # an unlabelled counter exists from the start
        name, names = self.defn.name, self.defn.labels
        return [f"{name}{_label_text(names, k)} {format_value(c.value)}" for k, c in sorted(self._children.items())]


class _GaugeChild:
    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value: Number = 0

    def set(self, value: Number) -> None:
        self.value = value

    def inc(self, amount: Number = 1) -> None:
        self.value += amount

    def dec(self, amount: Number = 1) -> None:
        self.value -= amount


class Gauge(_Metric):
    """Set directly, or given a function evaluated at scrape time.

    The function returns a number (unlabelled gauge) or, for a labelled one,
    a mapping / pairs of (label values tuple) -> number. If it raises, the
    gauge shows no samples in that scrape (a broken probe must not break the
    endpoint); the error is logged.
    """

    def __init__(self, defn: MetricDef):
        super().__init__(defn)
        self._function: Callable[[], Samples] | None = None

    def _new_child(self) -> _GaugeChild:
        return _GaugeChild()

    def set(self, value: Number) -> None:
        self._unlabelled().set(value)

    def inc(self, amount: Number = 1) -> None:
        self._unlabelled().inc(amount)

    def dec(self, amount: Number = 1) -> None:
        self._unlabelled().dec(amount)

    def set_function(self, function: Callable[[], Samples] | None) -> None:
        self._function = function

    def current(self) -> dict[tuple[str, ...], Number]:
        """Label values -> value, as a scrape would see them now."""
        if self._function is None:
            if not self.defn.labels and not self._children:
                return {(): 0}
            return {k: c.value for k, c in self._children.items()}
        try:
            result = self._function()
            if not self.defn.labels:
                return {(): float(result) if not isinstance(result, int) else result}
            pairs = result.items() if isinstance(result, Mapping) else result
            out = {}
            for values, value in pairs:
                key = tuple(str(v) for v in values)
                if len(key) != len(self.defn.labels):
                    raise MetricsError(f"{self.defn.name}: sample {key} does not match {list(self.defn.labels)}")
                out[key] = value
            return out
        except Exception as exc:  # e.g. a part that is not running yet
            log.warning("gauge %s: no samples: %s: %s", self.defn.name, type(exc).__name__, exc)
            return {}

    def samples(self) -> list[str]:
        name, names = self.defn.name, self.defn.labels
        return [f"{name}{_label_text(names, k)} {format_value(v)}" for k, v in sorted(self.current().items())]


class _HistogramChild:
    __slots__ = ("bounds", "counts", "sum", "count")

    def __init__(self, bounds: tuple[float, ...]):
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last slot is +Inf
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        # bisect_left: the first bound >= value, i.e. Prometheus' "le" (less than or equal).
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value
        self.count += 1


class Histogram(_Metric):
    def __init__(self, defn: MetricDef):
        bounds = defn.buckets
        if not bounds or list(bounds) != sorted(set(bounds)) or not all(math.isfinite(b) for b in bounds):
            raise MetricsError(f"{defn.name}: buckets must be finite, distinct and ascending")
        super().__init__(defn)

    def _new_child(self) -> _HistogramChild:
        return _HistogramChild(self.defn.buckets)

    def observe(self, value: float) -> None:
        self._unlabelled().observe(value)

    def samples(self) -> list[str]:
        name, names = self.defn.name, self.defn.labels
        les = [f'le="{float(b)!r}"' for b in self.defn.buckets] + ['le="+Inf"']
        out = []
        for key, child in sorted(self._children.items()):
            running = 0
            for le, n in zip(les, child.counts):
                running += n
                out.append(f"{name}_bucket{_label_text(names, key, le)} {running}")
            labels = _label_text(names, key)
            out.append(f"{name}_sum{labels} {format_value(child.sum)}")
            out.append(f"{name}_count{labels} {child.count}")
        return out


_KINDS = {COUNTER: Counter, GAUGE: Gauge, HISTOGRAM: Histogram}
_BY_NAME = {d.name: d for d in CATALOGUE}


class MetricsRegistry:
    """A node's metrics by name; `render()` is the body of GET /metrics."""

    def __init__(self) -> None:
        self._definitions: dict[str, MetricDef] = dict(_BY_NAME)
        self._metrics: dict[str, _Metric] = {}

    def define(self, defn: MetricDef) -> None:
        """Add a metric outside the catalogue (tests, plugins); redefining differently is an error."""
        existing = self._definitions.get(defn.name)
        if existing is not None and existing != defn:
            raise MetricsError(f"{defn.name} is already defined differently")
        if defn.kind not in _KINDS:
            raise MetricsError(f"{defn.name}: unknown kind {defn.kind!r}")
        self._definitions[defn.name] = defn

    def _get(self, name: str, kind: str):
        metric = self._metrics.get(name)
        if metric is None:
            defn = self._definitions.get(name)
            if defn is None:
                raise MetricsError(f"unknown metric {name!r} (add it to metrics.registry.CATALOGUE)")
            metric = self._metrics[name] = _KINDS[defn.kind](defn)
        if metric.defn.kind != kind:
            raise MetricsError(f"{name} is a {metric.defn.kind}, not a {kind}")
        return metric

    def counter(self, name: str) -> Counter:
        return self._get(name, COUNTER)

    def gauge(self, name: str) -> Gauge:
        return self._get(name, GAUGE)

    def histogram(self, name: str) -> Histogram:
        return self._get(name, HISTOGRAM)

    def render(self) -> str:
        """Text exposition format 0.0.4: HELP, TYPE, then samples; families sorted by name."""
        lines = []
        for name in sorted(self._metrics):
            metric = self._metrics[name]
            lines.append(f"# HELP {name} {escape_help(metric.defn.help)}")
            lines.append(f"# TYPE {name} {metric.defn.kind}")
            lines.extend(metric.samples())
        return "\n".join(lines) + "\n" if lines else ""
