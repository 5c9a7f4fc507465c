"""`python -m raftkafka produce`: the console producer, like kafka-console-producer.

    produce --bootstrap-server H:P --topic T [--property parse.key=true --property key.separator=:]
            [--producer-property acks=1 ...] [--producer.config FILE] [--sync]

Each line of stdin is one record (the line without its newline, UTF-8 bytes as
given). With `parse.key=true` the text before the first `key.separator`
(default a tab) is the key. With `parse.headers=true` the line starts with
headers, up to `headers.delimiter` (default a tab): `k1:v1,k2:v2` (separators
`headers.separator`, `headers.key.separator`; a header without the key separator
has a null value). `null.marker=X` sends a null key, value or header value where
the text equals X (a tombstone, for compacted topics); Kafka's LineMessageReader
rules. The first delivery error is reported and every failed record counted; the
command then exits 1 after sending the rest. Plain lines (no key, headers or null
marker) go to the producer a block of stdin at a time (`Producer.send_values`), in
batches of up to 1 MB (within the topic's max.message.bytes) unless batch.size is given.
"""
from __future__ import annotations

import sys
from contextlib import aclosing

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
from raftkafka.client import KafkaError, Producer
from raftkafka.client.admin import RESOURCE_TOPIC
from storage.env import RealEnv
from wire.protocol import DescribeConfigsRequest

__all__ = ["add_parser", "run", "LineReader", "stdin_chunks"]

CONSOLE_BATCH_SIZE = 1_000_000
_KAFKA_BATCH_SIZE = 16_384
_READER_PROPERTIES = {"parse.key": "false", "key.separator": "\t", "ignore.error": "false", "null.marker": None,
                      "parse.headers": "false", "headers.delimiter": "\t", "headers.separator": ",",
                      "headers.key.separator": ":"}


def add_parser(subparsers) -> None:
    p = add_command(subparsers, "produce", "console producer: one record per line of stdin")
    add_bootstrap(p, config_flag="--producer.config")
    p.add_argument("--topic", required=True)
    p.add_argument("--property", action="append", metavar="K=V",
                   help="line reader: parse.key, key.separator, parse.headers, headers.delimiter, "
                        "headers.separator, headers.key.separator, ignore.error, null.marker")
    p.add_argument("--producer-property", action="append", metavar="K=V",
                   help="producer setting with Kafka's name (acks, linger.ms, compression.type, ...)")
    p.add_argument("--request-required-acks", metavar="ACKS", help="acks: all, -1, 0 or 1 (default all)")
    p.add_argument("--compression-codec", metavar="CODEC", help="none, gzip, snappy, lz4 or zstd")
    p.add_argument("--sync", action="store_true", help="wait for each record's acknowledgement before the next")
    p.set_defaults(run=run)


class LineReader:
    """Turns input lines into (key, value) pairs per kafka-console-producer's reader properties."""

    def __init__(self, properties: dict[str, str]):
        settings = known_properties(properties, _READER_PROPERTIES)
        self.parse_key = true_or_false(settings, "parse.key")
        self.ignore_error = true_or_false(settings, "ignore.error")
        self.separator = settings["key.separator"].encode()
        if not self.separator:
            raise CommandError("--property key.separator must not be empty")
        marker = settings["null.marker"]
        self.null_marker = marker.encode() if marker else None
        self.parse_headers = true_or_false(settings, "parse.headers")
        self.headers_delimiter = settings["headers.delimiter"].encode()
        self.headers_separator = settings["headers.separator"].encode()
        self.header_key_separator = settings["headers.key.separator"].encode()
        for name in ("headers.delimiter", "headers.separator", "headers.key.separator"):
            if self.parse_headers and not settings[name]:
                raise CommandError(f"--property {name} must not be empty")
            if self.parse_headers and self.null_marker is not None and settings[name] == marker:
                raise CommandError(f"--property null.marker must differ from {name}")
        # Each line is the value as it is: no key, no headers, nothing to compare (the fast path).
        self.plain = not self.parse_key and not self.parse_headers and self.null_marker is None

    def record(self, line: bytes, number: int) -> tuple[bytes | None, bytes | None, list]:
        """(key, value, headers) of one line."""
        headers = []
        if self.parse_headers:
            text, sep, rest = line.partition(self.headers_delimiter)
            if not sep:
                if not self.ignore_error:
                    raise CommandError(f"no headers delimiter {self.headers_delimiter.decode()!r} found on line {number}")
                text, rest = b"", line
            headers = self._headers(text, number)
            line = rest
        key, value = self._key_value(line, number)
        return key, value, headers

    def _headers(self, text: bytes, number: int) -> list[tuple[str, bytes | None]]:
        if not text or (self.null_marker is not None and text == self.null_marker):
            return []
        out = []
        for item in text.split(self.headers_separator):
            name, sep, value = item.partition(self.header_key_separator)
            if self.null_marker is not None and name == self.null_marker:
                raise CommandError(f"line {number}: a header key equals null.marker {self.null_marker.decode()!r}")
            out.append((name.decode("utf-8", "replace"), self._null(value) if sep else None))
        return out

    def _key_value(self, line: bytes, number: int) -> tuple[bytes | None, bytes | None]:
        key = None
        if self.parse_key:
            key, sep, value = line.partition(self.separator)
            if not sep:
                if not self.ignore_error:
                    raise CommandError(f"no key separator {self.separator.decode()!r} found on line {number}")
                key, value = None, line
        else:
            value = line
        return self._null(key), self._null(value)

    def _null(self, data: bytes | None) -> bytes | None:
        return None if data is not None and self.null_marker is not None and data == self.null_marker else data


def producer_options(args) -> dict:
    properties = read_properties(args.command_config)
    properties.update(parse_key_values(args.producer_property, "--producer-property"))
    if args.request_required_acks is not None:
        properties["acks"] = args.request_required_acks
    if args.compression_codec is not None:
        properties["compression.type"] = args.compression_codec
    properties.setdefault("client.id", "console-producer")
    return client_kwargs(Producer, properties, "producer")  # the Producer itself checks the values


def run(args) -> int:
    reader = LineReader(parse_key_values(args.property, "--property"))
    options = producer_options(args)
    # Batches of up to 1 MB, librdkafka's default and so kcat's: a file of lines goes in ~60x
    # fewer Produce requests than with Kafka's 16 KiB, each round trip carrying more (a typed
    # line still goes at once: linger.ms is 5). Held within the topic's max.message.bytes
    # (`_fit_batches`); --producer-property batch.size=N is taken as given.
    fit = "batch_size" not in options
    options.setdefault("batch_size", CONSOLE_BATCH_SIZE)
    return run_client(_main, args, reader, options, fit)


async def stdin_chunks(size: int = 1 << 20):
    """Raw chunks of stdin, read in a worker thread so the producer keeps sending meanwhile."""
    stream = getattr(sys.stdin, "buffer", None)
    read = getattr(stream, "read1", None) or getattr(stream, "read", None)
    if read is None:  # a text-only stdin (tests): encode what it gives
        text_read = sys.stdin.read
        read = lambda n: text_read(n).encode()  # noqa: E731
    while True:
        chunk = await trio.to_thread.run_sync(read, size)
        if not chunk:
            return
        yield chunk


async def _fit_batches(producer: Producer, topic: str) -> None:
    """Keep the console's default batches within the topic's max.message.bytes (the broker
    refuses a larger batch); Kafka's 16 KiB when the topic's configuration cannot be read."""
    limit = _KAFKA_BATCH_SIZE
    try:
        response = await producer.cluster.request_any(DescribeConfigsRequest(include_synonyms=False, resources=[
            DescribeConfigsRequest.DescribeConfigsResource(resource_type=RESOURCE_TOPIC, resource_name=topic,
                                                           configuration_keys=["max.message.bytes"])]))
        result = response.results[0]
        if not result.error_code:
            limit = next(int(c.value) for c in result.configs if c.name == "max.message.bytes")
    except (KafkaError, StopIteration, ValueError, TypeError, IndexError):
        pass  # not authorized to describe it, an old broker, ...: Kafka's default
    # Nothing is queued yet: the accumulator takes the size for every batch it opens.
    producer.accumulator.batch_size = max(1, min(producer.accumulator.batch_size, limit))


async def _main(args, reader: LineReader, options: dict, fit: bool) -> int:
    bootstrap = bootstrap_of(args)
    failures = _Failures(args.topic)
    stopped: CommandError | None = None
    number = 0
    async with Producer(RealEnv(), bootstrap, **options) as producer:
        await wait_reachable(producer.cluster, bootstrap)
        # An unknown topic: one clear error before any input is read.
        await producer.cluster.topic(args.topic, wait=TOPIC_WAIT_S)
        if fit:
            await _fit_batches(producer, args.topic)
        try:
            async with aclosing(_line_blocks()) as blocks:
                async for lines in blocks:
                    number = await _send_lines(producer, args, reader, lines, number, failures)
        except CommandError as e:
            stopped = e  # a bad line or a refused send: what came before is still delivered
        await producer.flush()
    if stopped is not None:
        raise stopped
    if failures.count:
        raise CommandError(f"{failures.count} of {number} records were not delivered ({failures.first})")
    return 0


class _Failures:
    """Delivery errors: the first is reported at once, all are counted."""

    def __init__(self, topic: str):
        self.topic = topic
        self.count = 0
        self.first: str | None = None

    def add(self, error: BaseException, records: int = 1) -> None:
        if self.first is None:
            self.first = str(error)
            print(f"error: sending to {self.topic} failed: {error}", file=sys.stderr)
        self.count += records

    def of_record(self, future) -> None:
        error = future.exception()
        if error is not None:
            self.add(error)

    def of_block(self, block) -> None:
        if block.failed:
            self.add(block.exception(), block.failed)


async def _line_blocks():
    """The lines of stdin (without line ends), a list per chunk read."""
    pending = b""
    async for chunk in stdin_chunks():
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop()
        if b"\r" in chunk:
            lines = [line.rstrip(b"\r") for line in lines]
        yield lines
    if pending:
        yield [pending.rstrip(b"\r")]


async def _send_lines(producer: Producer, args, reader: LineReader, lines: list[bytes], number: int,
                      failures: _Failures) -> int:
    """Send one record per line; returns the number of the last line sent."""
    if args.sync:
        for line in lines:
            number += 1
            key, value, headers = reader.record(line, number)
            future = await _send(producer.send(args.topic, value, key, headers=headers), args.topic)
            future.add_callback(failures.of_record)
            try:
                await future
            except KafkaError:
                pass  # failures reports it
        return number
    if reader.plain:  # each line is a value: the block goes as it is, a batch at a time
        block = await _send(producer.send_values(args.topic, lines), args.topic)
        block.add_callback(failures.of_block)
        return number + len(lines)
    records, stopped = [], None
    try:
        for line in lines:
            key, value, headers = reader.record(line, number + len(records) + 1)
            records.append((key, value, headers))
    except CommandError as e:
        stopped = e  # the lines before it are still sent
    for future in await _send(producer.send_many(args.topic, records), args.topic):
        future.add_callback(failures.of_record)
    if stopped is not None:
        raise stopped
    return number + len(records)


async def _send(sending, topic: str):
    """The outcome of a send, a refusal as one error line."""
    try:
        return await sending
    except KafkaError as e:
        raise CommandError(f"cannot send to {topic}: {e}") from None
