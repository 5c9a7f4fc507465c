"""The standard benchmark scenarios, run with `python -m raftkafka bench --scenario NAME` (or `all`).

Each scenario creates its own topic (`bench-<name>-<random>`; replicated and multi-partition ones get
one acknowledged warm-up record per partition first), drives load with
the chosen client, deletes the topic again (unless kept) and yields rows for
the table: a scenario needing more brokers than the cluster has is reported
as skipped, not failed.
"""
from __future__ import annotations

import secrets
from dataclasses import dataclass, replace

import trio

from raftkafka.bench import load_librdkafka, load_ours
from raftkafka.bench.perf import Progress, Result
from raftkafka.cli.common import format_table, open_admin, run_client
from raftkafka.client import Producer
from storage.env import RealEnv

__all__ = ["Scenario", "SCENARIOS", "run_scenario", "format_results"]


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    partitions: int
    replication_factor: int
    record_size: int
    num_records: int
    throughput: float = -1  # records/s; -1 = as fast as possible
    acks: str = "1"
    consume: bool = False  # preload the records, then measure reading them
    producers: int = 1  # librdkafka producer instances sharing the load (our client: always one)


SCENARIOS = {s.name: s for s in (
    Scenario("single-partition", "1 partition, RF=1, acks=1, 100-byte records, unlimited rate",
             partitions=1, replication_factor=1, record_size=100, num_records=200_000),
    Scenario("consume-10k", "consume 10 KiB records from 1 partition (RF=1), after preloading them",
             partitions=1, replication_factor=1, record_size=10 * 1024, num_records=20_000, consume=True),
    Scenario("rf3-acks-all", "1 partition, RF=3, acks=all, 100-byte records, unlimited rate",
             partitions=1, replication_factor=3, record_size=100, num_records=100_000, acks="all"),
    Scenario("latency-10k", "latency at 10 000 records/s: 1 partition, RF=3, acks=all, 100-byte records",
             partitions=1, replication_factor=3, record_size=100, num_records=100_000, throughput=10_000,
             acks="all"),
    Scenario("many-partitions", "1000 partitions, RF=1, acks=1, 100-byte records spread over all by 100 producers",
             partitions=1000, replication_factor=1, record_size=100, num_records=200_000, producers=100),
)}


@dataclass(frozen=True)
class Row:
    scenario: str
    client: str
    phase: str  # "produce" or "consume"
    result: Result | None
    note: str = ""


async def _prepare(args, scenario: Scenario, topic: str) -> str | None:
    """Create the topic and wait for its leaders; a reason to skip, or None."""
    async with open_admin(args) as admin:
        brokers = len((await admin.describe_cluster()).brokers)
        if brokers < scenario.replication_factor:
            return f"skipped: needs {scenario.replication_factor} brokers, the cluster has {brokers}"
        await admin.create_topic(topic, scenario.partitions, scenario.replication_factor)
        with trio.fail_after(30):
            while True:
                info = (await admin.describe_topics([topic]))[topic]
                if len(info.partitions) == scenario.partitions and len(info.available()) == scenario.partitions:
                    break
                await trio.sleep(0.1)
    if scenario.replication_factor > 1 or scenario.partitions > 1:
        await _warm_up(args.bootstrap, topic, scenario.partitions)
    return None


async def _warm_up(bootstrap: str, topic: str, partitions: int) -> None:
    """One acks=all record per partition, so the run measures logs that exist and replication that
    is already flowing (a broker given 1000 new partitions takes seconds to create their logs, and
    their followers to start fetching), not the topic's start-up."""
    async with Producer(RealEnv(), bootstrap, acks="all", linger_ms=0) as producer:
        with trio.fail_after(60):
            futures = [await producer.send(topic, b"warm-up", partition=p) for p in range(partitions)]
            for future in futures:
                await future


async def _drop(args, topic: str) -> None:
    async with open_admin(args) as admin:
        await admin.delete_topics([topic])


def _produce(args, client: str, scenario: Scenario, topic: str, progress) -> Result:
    properties = {"acks": scenario.acks, **args.producer_properties}
    if client == "ours":
        return run_client(load_ours.produce, args.bootstrap, topic, scenario.num_records, scenario.record_size,
                          scenario.throughput, properties, progress)
    return load_librdkafka.produce(args.bootstrap, topic, scenario.num_records, scenario.record_size,
                                   scenario.throughput, properties, progress, scenario.producers)


def _consume(args, client: str, scenario: Scenario, topic: str, progress) -> Result:
    if client == "ours":
        return run_client(load_ours.consume, args.bootstrap, topic, scenario.num_records, args.timeout_s,
                          args.consumer_properties, None, progress)
    return load_librdkafka.consume(args.bootstrap, topic, scenario.num_records, args.timeout_s,
                                   args.consumer_properties, None, progress)


def run_scenario(args, scenario: Scenario, client: str) -> list[Row]:
    """Run one scenario; `args` carries bootstrap, command_config, overrides and progress settings."""
    if args.num_records is not None:
        scenario = replace(scenario, num_records=args.num_records)
    if args.partitions is not None and scenario.partitions > 1:
        scenario = replace(scenario, partitions=args.partitions)
    if getattr(args, "producers", None) is not None:
        scenario = replace(scenario, producers=args.producers)
    topic = f"bench-{scenario.name}-{secrets.token_hex(4)}"
    skip = run_client(_prepare, args, scenario, topic)
    if skip is not None:
        return [Row(scenario.name, client, "consume" if scenario.consume else "produce", None, skip)]
    rows = []
    try:
        progress = Progress("sent", args.interval_s) if args.interval_s > 0 else None
        rows.append(Row(scenario.name, client, "produce", _produce(args, client, scenario, topic, progress),
                        "preload" if scenario.consume else ""))
        if scenario.consume:
            progress = Progress("read", args.interval_s) if args.interval_s > 0 else None
            rows.append(Row(scenario.name, client, "consume", _consume(args, client, scenario, topic, progress)))
    finally:
        if not args.keep_topics:
            run_client(_drop, args, topic)
    return rows


def _ms(value: float | None) -> str | None:
    return None if value is None else f"{value:.1f}"


def format_results(rows: list[Row]) -> str:
    header = ["SCENARIO", "CLIENT", "PHASE", "RECORDS", "REC/S", "MB/S", "AVG-MS", "P50-MS", "P99-MS",
              "P99.9-MS", "MAX-MS", "ERRORS", "NOTE"]
    table = []
    for row in rows:
        r = row.result
        if r is None:
            table.append([row.scenario, row.client, row.phase] + [None] * 9 + [row.note])
            continue
        note = row.note if not r.errors else f"{row.note} first error: {r.first_error}".strip()
        table.append([row.scenario, row.client, row.phase, r.records, f"{r.records_per_s:.0f}",
                      f"{r.mb_per_s:.2f}", _ms(r.avg_ms), _ms(r.p50_ms), _ms(r.p99_ms), _ms(r.p999_ms),
                      _ms(r.max_ms), r.errors, note])
    return format_table(header, table)
