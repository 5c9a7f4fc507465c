"""The broker's instruments: its counters and request histogram from the node's registry,
one method per event, and Kafka's request names for the `api` label.
"""
from __future__ import annotations

from metrics.registry import MetricsRegistry
from wire.error_codes import ErrorCode
from wire.protocol import ApiKey
from wire.protocol.error_counts import error_counts

__all__ = ["BrokerMetrics", "api_name"]


class BrokerMetrics:
    """The broker's hot-path instruments, looked up once; one method per event.

    The broker's code needs no metric names of its own:
    `self.metrics = BrokerMetrics(registry)`, then e.g.
    `broker.metrics.produced(topic, info.size, info.last_offset - info.first_offset + 1)`.
    """

    def __init__(self, registry: MetricsRegistry):
        self.registry = registry
        self._bytes_in = registry.counter("raftkafka_broker_topic_bytes_in_total")
        self._messages_in = registry.counter("raftkafka_broker_topic_messages_in_total")
        self._bytes_out = registry.counter("raftkafka_broker_topic_bytes_out_total")
        self._failed_produce = registry.counter("raftkafka_broker_topic_failed_produce_requests_total")
        self._replication_bytes_in = registry.counter("raftkafka_broker_topic_replication_bytes_in_total")
        self._replication_bytes_out = registry.counter("raftkafka_broker_topic_replication_bytes_out_total")
        self._requests = registry.counter("raftkafka_request_total")
        self.errors = registry.counter("raftkafka_request_errors_total")
        self._latency = registry.histogram("raftkafka_request_latency_seconds")
        self.isr_shrinks = registry.counter("raftkafka_isr_shrinks_total")
        self.isr_expands = registry.counter("raftkafka_isr_expands_total")

    def request(self, api_key: int, seconds: float) -> None:
        """One request answered (or dropped) after `seconds`; the api key names the series."""
        api = _API_NAMES.get(api_key) or api_name(api_key)
        self._requests.labels(api).inc()
        self._latency.labels(api).observe(seconds)

    def answered(self, api_key: int, response) -> None:
        """A response is going out: count each of its error codes (Kafka's ErrorsPerSec)."""
        api = _API_NAMES.get(api_key) or api_name(api_key)
        for code, n in error_counts(response).items():
            self.errors.labels(api, ErrorCode.name_of(code)).inc(n)

    def produced(self, topic: str, nbytes: int, nrecords: int) -> None:
        self._bytes_in.labels(topic).inc(nbytes)
        self._messages_in.labels(topic).inc(nrecords)

    def produce_failed(self, topic: str) -> None:
        self._failed_produce.labels(topic).inc()

    def fetched(self, topic: str, nbytes: int, *, follower: bool = False) -> None:
        """Record bytes in a Fetch answer; a follower's replica fetch counts as replication."""
        if nbytes:
            (self._replication_bytes_out if follower else self._bytes_out).labels(topic).inc(nbytes)

    def replicated_in(self, topic: str, nbytes: int) -> None:
        """Record bytes a follower appended from its leader."""
        self._replication_bytes_in.labels(topic).inc(nbytes)


_API_NAMES: dict[int, str] = {}


def api_name(api_key: int) -> str:
    """Kafka's request name for an api key (`Produce`, `ListOffsets`, ...), as in its RequestMetrics."""
    try:
        name = "".join(word.capitalize() for word in ApiKey(api_key).name.split("_"))
    except ValueError:
        return "Unknown"  # one series for every undefined key: a client cannot grow the registry
    _API_NAMES[api_key] = name
    return name
