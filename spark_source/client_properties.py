"""Kafka client properties given as `kafka.*` options, as Spark's Kafka source takes them.

Spark hands every `kafka.`-prefixed option to its Kafka consumer (source) or producer
(sink). Here the ones our client has a setting for are applied (CONSUMER for the
source, PRODUCER for the sink, typed and checked at planning), the ones with no
effect on our client are logged once per process and name, and only contradictions
are refused (the caller's table of options Spark refuses, a value that does not parse,
idempotence asked for without acks=all).

    client_properties(opts, role="source", handled={"kafka.bootstrap.servers", ...})
    # -> (("max_poll_records", 100), ...): keyword arguments of our Consumer
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

__all__ = ["ClientTuning", "CONSUMER", "PRODUCER", "client_properties", "PropertyError"]

log = logging.getLogger("raftkafka.spark")


class PropertyError(ValueError):
    """A `kafka.*` option whose value our client cannot take; the message names it."""


def _positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise ValueError
    return value


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError
    return value


def _bool(text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise ValueError
    return text.lower() == "true"


def _one_of(*choices: str):
    def parse(text: str) -> str:
        if text.lower() not in choices:
            raise ValueError
        return text.lower()
    parse.choices = choices
    return parse


# Kafka property -> (our client's keyword, parser).
CONSUMER = {
    "max.poll.records": ("max_poll_records", _positive),
    "fetch.max.bytes": ("fetch_max_bytes", _positive),
    "max.partition.fetch.bytes": ("max_partition_fetch_bytes", _positive),
    "fetch.min.bytes": ("fetch_min_bytes", _non_negative),
    "fetch.max.wait.ms": ("fetch_max_wait_ms", _non_negative),
    "isolation.level": ("isolation_level", _one_of("read_uncommitted", "read_committed")),
    "retry.backoff.ms": ("retry_backoff_ms", _non_negative),
    "metadata.max.age.ms": ("metadata_max_age_ms", _non_negative),
}
PRODUCER = {
    "acks": ("acks", _one_of("all", "-1", "0", "1")),
    "compression.type": ("compression", _one_of("none", "gzip", "snappy", "lz4", "zstd")),
    "linger.ms": ("linger_ms", _non_negative),
    "batch.size": ("batch_size", _positive),
    "enable.idempotence": ("enable_idempotence", _bool),
    "delivery.timeout.ms": ("delivery_timeout_ms", _positive),
    "max.request.size": ("max_request_size", _positive),
    "buffer.memory": ("buffer_memory", _positive),
    "max.block.ms": ("max_block_ms", _non_negative),
    "max.in.flight.requests.per.connection": ("max_in_flight_requests_per_connection", _positive),
    "retry.backoff.ms": ("retry_backoff_ms", _non_negative),
    "metadata.max.age.ms": ("metadata_max_age_ms", _non_negative),
}


@dataclass(frozen=True)
class ClientTuning:
    """What the `kafka.*` options change in our clients (hashable: it keys the shared client)."""

    consumer: tuple[tuple[str, object], ...] = ()
    producer: tuple[tuple[str, object], ...] = ()
    group_id: str | None = None  # names the source's consumers; they assign, so nothing joins or commits
    offset_retries: int = 3  # fetchOffset.numRetries: ListOffsets attempts after the first
    offset_retry_interval_ms: int = 10  # fetchOffset.retryIntervalMs


_warned: set[str] = set()
_warned_lock = threading.Lock()


def _warn_once(name: str, role: str) -> None:
    with _warned_lock:
        if name in _warned:
            return
        _warned.add(name)
    log.warning("option 'kafka.%s' has no effect on the raftkafka %s (our client has no such setting); ignored",
                name, role)


def client_properties(opts: dict[str, str], *, role: str, handled: set[str]) -> tuple[tuple[str, object], ...]:
    """Our client's keyword arguments for the `kafka.*` options of `opts` (lower-cased) not in
    `handled`; the others are warned about once."""
    table = CONSUMER if role == "source" else PRODUCER
    applied: dict[str, object] = {}
    for key in sorted(opts):
        if not key.startswith("kafka.") or key in handled:
            continue
        name = key[len("kafka."):]
        if name not in table:
            _warn_once(name, role)
            continue
        keyword, parse = table[name]
        text = opts[key].strip()
        try:
            applied[keyword] = parse(text)
        except ValueError:
            expected = (" (one of " + ", ".join(parse.choices) + ")") if hasattr(parse, "choices") else ""
            raise PropertyError(f"option 'kafka.{name}': invalid value '{opts[key]}'{expected}") from None
    if applied.get("enable_idempotence") and applied.get("acks", "all") not in ("all", "-1"):
        raise PropertyError(f"options 'kafka.enable.idempotence'=true and 'kafka.acks'={applied['acks']} "
                            "contradict each other: idempotence needs acks=all")
    if "acks" in applied and applied["acks"] not in ("all", "-1") and "enable_idempotence" not in applied:
        applied["enable_idempotence"] = False  # as Kafka's producer: idempotence off when acks is not all
    return tuple(sorted(applied.items()))
