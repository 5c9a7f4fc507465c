"""`python -m raftkafka consume`: the console consumer, like kafka-console-consumer.

    consume --bootstrap-server H:P (--topic T | --include REGEX) [--from-beginning] [--group G] [--max-messages N]
            [--partition P [--offset earliest|latest|N]] [--timeout-ms MS]
            [--property print.key=true --property key.separator=: ...] [--consumer-property k=v ...]

Without `--group` the consumer assigns itself every partition (or `--partition`)
and commits nothing; with `--group` it joins the group, resumes from the
group's committed offsets and auto-commits. `--from-beginning` starts where no
committed offset exists at the earliest record instead of the end. The command
stops after `--max-messages`, after `--timeout-ms` without a record, or on
Ctrl-C, and reports "Processed a total of N messages" on stderr.

`--include REGEX` reads every non-internal topic whose whole name matches; at
least one must match when the command starts (else one error line), and topics
or partitions created later are picked up at each metadata refresh
(`metadata.max.age.ms`, 5 minutes unless set with `--consumer-property`), read
from where `auto.offset.reset` says, as Kafka's pattern subscription does.
`--formatter` takes Kafka's default formatter's class names only (its options are
the `--property print.*` ones, also from `--formatter-config FILE`);
`--skip-message-on-error` prints a record the formatter cannot render as an error
line on stderr and goes on, where the command otherwise stops at it.
"""
from __future__ import annotations

import re
import signal
import sys
import threading
from contextlib import asynccontextmanager

import trio

from raftkafka.cli.common import (
    TOPIC_WAIT_S,
    CommandError,
    add_bootstrap,
    add_command,
    bootstrap_of,
    client_kwargs,
    known_properties,
    parse_key_values,
    read_properties,
    run_client,
    true_or_false,
    wait_reachable,
)
from raftkafka.client import Consumer, ConsumerRecord
from storage.env import RealEnv

__all__ = ["add_parser", "run", "RecordFormatter"]

_FORMAT_DEFAULTS = {"print.timestamp": "false", "print.key": "false", "print.offset": "false",
                    "print.partition": "false", "print.headers": "false", "print.value": "true",
                    "key.separator": "\t", "line.separator": "\n", "headers.separator": ",",
                    "null.literal": "null"}


def add_parser(subparsers) -> None:
    p = add_command(subparsers, "consume", "console consumer: print records to stdout")
    add_bootstrap(p, config_flag="--consumer.config")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic")
    which.add_argument("--include", "--whitelist", dest="include", metavar="REGEX",
                       help="read every non-internal topic whose name matches")
    p.add_argument("--group", help="consumer group: resume from and commit to its offsets")
    p.add_argument("--from-beginning", action="store_true",
                   help="with no committed offset, start at the earliest record (default: the end)")
    p.add_argument("--partition", type=int, help="read only this partition (not with --group)")
    p.add_argument("--offset", help="with --partition: earliest, latest or an offset number")
    p.add_argument("--max-messages", type=int, help="stop after this many records")
    p.add_argument("--timeout-ms", type=int, help="stop when no record arrives for this long")
    p.add_argument("--isolation-level", choices=("read_uncommitted", "read_committed"), default="read_uncommitted")
    p.add_argument("--property", action="append", metavar="K=V",
                   help="formatter: print.key, print.value, print.timestamp, print.partition, print.offset, "
                        "print.headers, key.separator, line.separator, headers.separator, null.literal")
    p.add_argument("--formatter", metavar="CLASS", help="Kafka's DefaultMessageFormatter (the only one built in)")
    p.add_argument("--formatter-config", metavar="FILE", help="formatter properties file (print.key=true, ...)")
    p.add_argument("--skip-message-on-error", action="store_true",
                   help="a record the formatter cannot render is reported on stderr and skipped")
    p.add_argument("--consumer-property", action="append", metavar="K=V",
                   help="consumer setting with Kafka's name (fetch.max.wait.ms, client.id, ...)")
    p.set_defaults(run=run)


DEFAULT_FORMATTERS = ("kafka.tools.DefaultMessageFormatter", "org.apache.kafka.tools.consumer.DefaultMessageFormatter")


class RecordFormatter:
    """kafka-console-consumer's default formatter: [timestamp] [partition] [offset] [headers] [key] value."""

    def __init__(self, properties: dict[str, str]):
        s = known_properties(properties, _FORMAT_DEFAULTS)
        self.flags = {name: true_or_false(s, name) for name in (
            "print.timestamp", "print.key", "print.offset", "print.partition", "print.headers", "print.value")}
        self.separator = _unescape(s["key.separator"])
        self.line_separator = _unescape(s["line.separator"])
        self.headers_separator = _unescape(s["headers.separator"])
        self.null = s["null.literal"]
        # Only values printed (the default): a poll's records become one text in one join.
        self.values_only = self.flags["print.value"] and not any(
            on for name, on in self.flags.items() if name != "print.value")

    def format_values(self, records) -> str:
        """`format` of each record, joined, when only values are printed (`values_only`)."""
        null, end = self.null.encode(), self.line_separator.encode()
        # Decoding the joined bytes replaces the same bytes as decoding each value alone:
        # UTF-8 resynchronises at the separator's first byte, so no sequence spans two values.
        return (end.join([null if r.value is None else r.value for r in records]) + end).decode("utf-8", "replace")

    def format(self, r: ConsumerRecord) -> str:
        fields = []
        if self.flags["print.timestamp"]:
            kind = "LogAppendTime" if r.timestamp_type == 1 else "CreateTime"
            fields.append(f"{kind}:{r.timestamp}" if r.timestamp >= 0 else "NO_TIMESTAMP")
        if self.flags["print.partition"]:
            fields.append(f"Partition:{r.partition}")
        if self.flags["print.offset"]:
            fields.append(f"Offset:{r.offset}")
        if self.flags["print.headers"]:
            fields.append(self.headers_separator.join(f"{k}:{self._text(v)}" for k, v in r.headers)
                          if r.headers else "NO_HEADERS")
        if self.flags["print.key"]:
            fields.append(self._text(r.key))
        if self.flags["print.value"]:
            fields.append(self._text(r.value))
        return self.separator.join(fields) + self.line_separator

    def _text(self, data: bytes | None) -> str:
        return self.null if data is None else data.decode("utf-8", "replace")


def _unescape(text: str) -> str:
    # Shells pass "\t" literally; Kafka's tool unescapes the same way.
    return text.replace("\\t", "\t").replace("\\n", "\n").replace("\\r", "\r")


def consumer_options(args) -> dict:
    properties = read_properties(args.command_config)
    properties.update(parse_key_values(args.consumer_property, "--consumer-property"))
    if args.group:
        properties["group.id"] = args.group
    properties["auto.offset.reset"] = "earliest" if args.from_beginning else properties.get("auto.offset.reset",
                                                                                             "latest")
    properties["isolation.level"] = args.isolation_level
    properties.setdefault("client.id", "console-consumer")
    return client_kwargs(Consumer, properties, "consumer")


def _start_offset(args) -> int | str | None:
    if args.offset is None:
        return None
    if args.partition is None:
        raise CommandError("--offset needs --partition")
    if args.offset in ("earliest", "latest"):
        return args.offset
    try:
        offset = int(args.offset)
    except ValueError:
        raise CommandError(f"--offset must be earliest, latest or a number, not {args.offset!r}") from None
    if offset < 0:
        raise CommandError("--offset must not be negative")
    return offset


def run(args) -> int:
    if args.formatter is not None and args.formatter not in DEFAULT_FORMATTERS:
        raise CommandError(f"--formatter {args.formatter}: only Kafka's DefaultMessageFormatter is built in "
                           f"({', '.join(DEFAULT_FORMATTERS)})")
    properties = read_properties(args.formatter_config)
    properties.update(parse_key_values(args.property, "--property"))
    formatter = RecordFormatter(properties)
    if args.include is not None:
        try:
            re.compile(args.include)
        except re.error as e:
            raise CommandError(f"--include {args.include!r}: not a regular expression ({e})") from None
        if args.partition is not None:
            raise CommandError("--partition needs --topic")
    if args.group and args.partition is not None:
        raise CommandError("--partition cannot be used with --group")
    if args.max_messages is not None and args.max_messages < 1:
        raise CommandError("--max-messages must be at least 1")
    start = _start_offset(args)
    options = consumer_options(args)
    return run_client(_main, args, formatter, options, start)


async def _main(args, formatter: RecordFormatter, options: dict, start) -> int:
    bootstrap = bootstrap_of(args)
    count = 0
    async with Consumer(RealEnv(), bootstrap, **options) as consumer:
        await wait_reachable(consumer.cluster, bootstrap)
        topics = await _topics(consumer, args)
        if args.group:
            consumer.subscribe(sorted(topics))
        else:
            assignment = _partitions_of(topics)
            if args.partition is not None:
                if args.partition not in topics[args.topic].partitions:
                    raise CommandError(f"topic {args.topic!r} has no partition {args.partition}")
                assignment = [(args.topic, args.partition)]
            consumer.assign(assignment)
            if isinstance(start, int):
                consumer.seek((args.topic, args.partition), start)
            elif start == "earliest" or (start is None and args.from_beginning):
                consumer.seek_to_beginning()
            else:
                consumer.seek_to_end()
        async with _stop_on_interrupt(), trio.open_nursery() as nursery:
            if args.include is not None:
                nursery.start_soon(_follow_new_topics, consumer, args, topics)
            idle_deadline = _deadline(args.timeout_ms)
            while args.max_messages is None or count < args.max_messages:
                wait = 1.0 if idle_deadline is None else max(0.0, min(1.0, idle_deadline - trio.current_time()))
                limit = None if args.max_messages is None else args.max_messages - count
                records = await consumer.poll(wait, max_records=limit)
                if records:
                    count += len(records)
                    _write(formatter.format_values(records) if formatter.values_only else
                           "".join(_render(formatter, r, args.skip_message_on_error) for r in records))
                    idle_deadline = _deadline(args.timeout_ms)
                elif idle_deadline is not None and trio.current_time() >= idle_deadline:
                    break
            nursery.cancel_scope.cancel()
    print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0


async def _topics(consumer, args) -> dict:
    """name -> TopicInfo of --topic, or of every topic --include matches now."""
    if args.topic is not None:
        return {args.topic: await consumer.cluster.topic(args.topic, wait=TOPIC_WAIT_S)}
    found = await _matching_topics(consumer, re.compile(args.include))
    if not found:
        raise CommandError(f"no topic matches --include {args.include!r}")
    return found


async def _follow_new_topics(consumer, args, topics: dict) -> None:
    """Every metadata refresh interval, read topics (and partitions) --include matches since."""
    pattern = re.compile(args.include)
    known = _partitions_of(topics)
    while True:
        await trio.sleep(consumer.cluster.metadata_max_age)
        found = await _matching_topics(consumer, pattern)
        if set(_partitions_of(found)) <= set(known):
            continue
        known = _partitions_of(found)
        if args.group:
            consumer.subscribe(sorted(found))
        else:
            consumer.assign(known)  # partitions already read keep their positions


def _partitions_of(topics: dict) -> list[tuple[str, int]]:
    return [(t, p) for t in sorted(topics) for p in sorted(topics[t].partitions)]


async def _matching_topics(consumer, pattern: re.Pattern) -> dict:
    cluster = consumer.cluster
    cluster.want_all_topics = True
    try:
        await cluster.refresh()
    finally:
        cluster.want_all_topics = False
    found = {name: info for name, info in sorted(cluster.topics.items())
             if not name.startswith("__") and info.partitions and pattern.fullmatch(name)}
    cluster.add_topics(sorted(found))
    return found


def _render(formatter: RecordFormatter, record: ConsumerRecord, skip: bool) -> str:
    try:
        return formatter.format(record)
    except Exception as e:  # noqa: BLE001 - a formatter's failure is about this record alone
        if not skip:
            raise CommandError(f"cannot format {record.topic}-{record.partition}@{record.offset}: {e}") from None
        print(f"error: skipped {record.topic}-{record.partition}@{record.offset}: {e}", file=sys.stderr)
        return ""


def _deadline(timeout_ms: int | None) -> float | None:
    return None if timeout_ms is None else trio.current_time() + timeout_ms / 1000


def _write(text: str) -> None:
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:  # `consume ... | head`: the reader is gone, so are we
        raise CommandError("output closed") from None


@asynccontextmanager
async def _stop_on_interrupt():
    """Ctrl-C ends the loop, not the process: the consumer still commits and leaves its group."""
    with trio.CancelScope() as scope:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        with trio.open_signal_receiver(signal.SIGINT) as signals:
            async with trio.open_nursery() as nursery:
                async def watch():
                    async for _ in signals:
                        scope.cancel()
                        return

                nursery.start_soon(watch)
                yield
                nursery.cancel_scope.cancel()
