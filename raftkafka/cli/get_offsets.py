"""`python -m raftkafka get-offsets`: offsets of topic partitions, like kafka-get-offsets.

    get-offsets --bootstrap-server H:P [--topic REGEX] [--partitions 0,2-4] [--time -1|-2|-3|TIMESTAMP_MS]
                [--topic-partitions T:0,T2:1-3,...] [--exclude-internal-topics] [--command-config FILE]

Prints `topic:partition:offset` per partition, sorted. `--time`: -1 or `latest`
(the end, default), -2 or `earliest` (the log start), -3 or `max-timestamp` (the
record with the largest timestamp), or a timestamp in ms (the first offset whose
record is at least that recent). A partition with no such record is left out, as
Kafka's tool does. `--topic` is a regular expression over whole names; without it
every topic is queried.
"""
from __future__ import annotations

import re

from raftkafka.cli.common import CommandError, add_bootstrap, add_command, open_admin, run_client

__all__ = ["add_parser", "run", "parse_partitions", "parse_time"]

_NAMED_TIMES = {"latest": -1, "earliest": -2, "max-timestamp": -3}


def add_parser(subparsers) -> None:
    p = add_command(subparsers, "get-offsets", "offsets of topic partitions (kafka-get-offsets)")
    add_bootstrap(p)
    p.add_argument("--topic", metavar="REGEX", help="topics whose whole name matches (default: all)")
    p.add_argument("--partitions", metavar="LIST", help="partition ids and ranges, e.g. 0,2-4 (with --topic)")
    p.add_argument("--topic-partitions", metavar="LIST",
                   help="topic:partitions pairs, e.g. orders:0-2,audit (a regex before the colon)")
    p.add_argument("--time", default="-1", help="-1/latest (default), -2/earliest, -3/max-timestamp or epoch ms")
    p.add_argument("--exclude-internal-topics", action="store_true", help="leave out internal topics")
    p.set_defaults(run=run)


def parse_partitions(text: str, flag: str = "--partitions") -> set[int] | None:
    """'0,2-4' → {0, 2, 3, 4}; '' → None (every partition)."""
    if not text.strip():
        return None
    out: set[int] = set()
    for item in (i.strip() for i in text.split(",")):
        low, sep, high = item.partition("-")
        try:
            first = int(low)
            last = int(high) if sep else first
        except ValueError:
            raise CommandError(f"{flag} {text!r}: expected ids and ranges like 0,2-4") from None
        if first < 0 or last < first:
            raise CommandError(f"{flag} {text!r}: bad range {item!r}")
        out.update(range(first, last + 1))
    return out


def parse_time(text: str) -> int:
    value = _NAMED_TIMES.get(text.strip().lower())
    if value is not None:
        return value
    try:
        value = int(text)
    except ValueError:
        value = -4
    if value < -3:
        raise CommandError(f"--time {text!r}: expected -1, -2, -3, latest, earliest, max-timestamp or a timestamp in ms")
    return value


def _filters(args) -> list[tuple[re.Pattern, set[int] | None]]:
    """(topic pattern, partitions or None for all) pairs the partitions must match one of."""
    if args.topic_partitions is not None:
        if args.topic is not None or args.partitions is not None:
            raise CommandError("--topic-partitions cannot be used with --topic or --partitions")
        pairs = []
        for item in re.split(r",(?=[^,:]*(?::|$))", args.topic_partitions):  # commas between topic:ranges
            topic, sep, parts = item.strip().partition(":")
            pairs.append((_regex(topic or ".*"), parse_partitions(parts, "--topic-partitions") if sep else None))
        return pairs
    return [(_regex(args.topic or ".*"), parse_partitions(args.partitions or ""))]


def _regex(text: str) -> re.Pattern:
    try:
        return re.compile(text)
    except re.error as e:
        raise CommandError(f"{text!r} is not a regular expression ({e})") from None


def run(args) -> int:
    return run_client(_main, args, _filters(args), parse_time(args.time))


async def _main(args, filters, timestamp: int) -> int:
    async with open_admin(args) as admin:
        topics = await admin.list_topics(include_internal=not args.exclude_internal_topics)
        wanted = sorted((name, p) for name, info in topics.items() for p in info.partitions
                        if any(pattern.fullmatch(name) and (parts is None or p in parts) for pattern, parts in filters))
        if not wanted:
            raise CommandError("no topic partition matches")
        found = await admin.list_offsets({tp: timestamp for tp in wanted})
    for (topic, partition), (offset, _) in sorted(found.items()):
        if offset >= 0:
            print(f"{topic}:{partition}:{offset}")
    return 0
