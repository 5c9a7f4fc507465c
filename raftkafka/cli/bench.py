"""`python -m raftkafka bench`: producer and consumer performance tests, like
kafka-producer-perf-test and kafka-consumer-perf-test, plus the standard scenarios.

    bench produce --bootstrap-server H:P --topic T --num-records N --record-size S --throughput -1 [--producers K]
                  [--producer-props acks=all linger.ms=5 ...] [--client ours|librdkafka]
    bench consume --bootstrap-server H:P --topic T --messages N [--timeout MS] [--group G]
    bench --scenario single-partition|consume-10k|rf3-acks-all|latency-10k|many-partitions|all [--producers K]
          --bootstrap-server H:P [--client ours|librdkafka|both] [--num-records N] [--partitions N]

Progress lines go to stderr every `--reporting-interval` ms while a run goes;
the result (one summary line, a table for scenarios, or JSON with `--json`)
goes to stdout. The load comes from librdkafka (confluent-kafka) by default,
since the performance targets are stated for librdkafka clients; `--client
ours` drives it with raftkafka's own client. A run with delivery errors exits 1.
"""
from __future__ import annotations

import json

from raftkafka.bench import load_librdkafka, load_ours
from raftkafka.bench.perf import Progress
from raftkafka.bench.scenarios import SCENARIOS, format_results, run_scenario
from raftkafka.cli.common import (
    CommandError,
    add_bootstrap,
    add_command,
    bootstrap_of,
    parse_key_values,
    read_properties,
    run_client,
)

__all__ = ["add_parser", "run"]


def add_parser(subparsers) -> None:
    p = add_command(subparsers, "bench", "producer / consumer performance test and standard scenarios")
    p.add_argument("workload", nargs="?", choices=("produce", "consume"), help="what to measure (or --scenario)")
    add_bootstrap(p)
    p.add_argument("--scenario", choices=sorted(SCENARIOS) + ["all"], help="run a standard scenario and print a table")
    p.add_argument("--client", choices=("librdkafka", "ours", "both"), default="librdkafka",
                   help="which client drives the load (default librdkafka; 'both' only with --scenario)")
    p.add_argument("--topic")
    p.add_argument("--num-records", type=int, help="produce: records to send (scenarios: override the count)")
    p.add_argument("--record-size", type=int, help="produce: value size in bytes")
    p.add_argument("--throughput", type=float, default=-1, help="produce: records/s cap; -1 = unlimited")
    p.add_argument("--producer-props", nargs="+", metavar="K=V", help="producer settings (Kafka names)")
    p.add_argument("--producer.config", dest="producer_config", metavar="FILE", help="producer properties file")
    p.add_argument("--messages", type=int, help="consume: records to read")
    p.add_argument("--timeout", type=int, default=10_000, metavar="MS",
                   help="consume: give up after this long without a record (default 10000)")
    p.add_argument("--group", help="consume: read as this consumer group (default: assign all partitions)")
    p.add_argument("--consumer-props", nargs="+", metavar="K=V", help="consumer settings (Kafka names)")
    p.add_argument("--consumer.config", dest="consumer_config", metavar="FILE", help="consumer properties file")
    p.add_argument("--producers", type=int,
                   help="librdkafka producer instances sharing the load (default 1; scenarios: their own)")
    p.add_argument("--partitions", type=int, help="scenarios: partition count of the multi-partition scenario")
    p.add_argument("--keep-topics", action="store_true", help="scenarios: leave the benchmark topics in place")
    p.add_argument("--reporting-interval", type=int, default=5000, metavar="MS",
                   help="progress line every MS milliseconds on stderr (0 = none)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(run=run)


def _positive(value, flag: str) -> None:
    if value is None:
        raise CommandError(f"{flag} is required")
    if value < 1:
        raise CommandError(f"{flag} must be at least 1")


def _prepare(args) -> None:
    bootstrap_of(args)
    args.interval_s = max(0, args.reporting_interval) / 1000
    args.timeout_s = args.timeout / 1000
    if args.timeout < 1:
        raise CommandError("--timeout must be at least 1 ms")
    if args.throughput == 0:
        raise CommandError("--throughput must be positive, or -1 for unlimited")
    args.producer_properties = read_properties(args.producer_config)
    args.producer_properties.update(parse_key_values(args.producer_props, "--producer-props"))
    args.consumer_properties = read_properties(args.consumer_config)
    args.consumer_properties.update(parse_key_values(args.consumer_props, "--consumer-props"))


def _need_confluent_kafka(args) -> None:
    """librdkafka runs and the scenarios' topic setup use confluent-kafka: one line when it is missing."""
    if args.client == "ours" and not args.scenario:
        return
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        raise CommandError("bench needs the confluent-kafka package for librdkafka and the scenarios: "
                           "pip install 'raftkafka[bench]' (or run a workload with --client ours)") from None


def run(args) -> int:
    _prepare(args)
    _need_confluent_kafka(args)
    if args.scenario:
        if args.workload:
            raise CommandError("give either a workload (produce/consume) or --scenario, not both")
        return _run_scenarios(args)
    if args.workload is None:
        raise CommandError("name a workload (produce or consume) or a --scenario")
    if args.client == "both":
        raise CommandError("--client both only works with --scenario")
    if not args.topic:
        raise CommandError(f"bench {args.workload} needs --topic")
    if args.workload == "produce":
        _positive(args.num_records, "--num-records")
        _positive(args.record_size, "--record-size")
        extra = () if args.producers is None else (args.producers,)
        if extra and args.client == "ours":
            raise CommandError("--producers only works with --client librdkafka")
        result = _load(args, "produce", args.bootstrap, args.topic, args.num_records, args.record_size,
                       args.throughput, args.producer_properties,
                       Progress("sent", args.interval_s) if args.interval_s else None, *extra)
        verb = "sent"
    else:
        _positive(args.messages, "--messages")
        result = _load(args, "consume", args.bootstrap, args.topic, args.messages, args.timeout_s,
                       args.consumer_properties, args.group,
                       Progress("read", args.interval_s) if args.interval_s else None)
        verb = "read"
    print(json.dumps(result.as_dict(), sort_keys=True) if args.json else result.line(verb))
    if result.errors:
        raise CommandError(f"{result.errors} errors during the run (first: {result.first_error})")
    return 0


def _load(args, kind: str, *load_args):
    if args.client == "ours":
        return run_client(getattr(load_ours, kind), *load_args)
    try:
        return getattr(load_librdkafka, kind)(*load_args)
    except load_librdkafka.LoadError as e:
        raise CommandError(str(e)) from None


def _run_scenarios(args) -> int:
    if args.topic or args.messages or args.record_size:
        raise CommandError("--scenario picks its own topic, sizes and counts (override with --num-records)")
    if args.num_records is not None:
        _positive(args.num_records, "--num-records")
    if args.partitions is not None:
        _positive(args.partitions, "--partitions")
    if args.producers is not None:
        _positive(args.producers, "--producers")
    names = sorted(SCENARIOS) if args.scenario == "all" else [args.scenario]
    clients = ["librdkafka", "ours"] if args.client == "both" else [args.client]
    rows = []
    for name in names:
        for client in clients:
            try:
                rows += run_scenario(args, SCENARIOS[name], client)
            except load_librdkafka.LoadError as e:
                raise CommandError(f"scenario {name}: {e}") from None
    if args.json:
        print(json.dumps([{"scenario": r.scenario, "client": r.client, "phase": r.phase, "note": r.note,
                           **(r.result.as_dict() if r.result else {})} for r in rows], sort_keys=True))
    else:
        print(format_results(rows))
    failed = [r for r in rows if r.result is not None and r.result.errors]
    if failed:
        raise CommandError(f"{len(failed)} run(s) had errors (see the table)")
    return 0
