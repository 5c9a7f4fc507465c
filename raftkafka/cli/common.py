"""What the cluster-facing commands share: `--bootstrap-server`, Kafka-style client
properties (`--command-config FILE`, `--producer-property k=v`), one-line errors.

Every expected failure becomes a `CommandError` (printed by `raftkafka.cli.main`
as one line, exit code 1): an unreachable cluster, a broker's error answer, a
bad flag value. `run_client(main, args)` runs a command's trio entry point and
does that translation, including errors trio wrapped in exception groups.
"""
from __future__ import annotations

import argparse
import gc
import inspect
import sys
from contextlib import asynccontextmanager

import trio

from raftkafka.client import Admin, KafkaError
from raftkafka.client.errors import AuthenticationError
from raftkafka.client.cluster import parse_bootstrap
from raftkafka.client.security import SECURITY_PROPERTIES, ClientSecurity
from storage.env import RealEnv
from storage.java_properties import PropertiesError, parse_properties

__all__ = [
    "CommandError", "add_command", "add_bootstrap", "one_line_errors", "parse_key_values", "read_properties",
    "client_kwargs", "run_client", "open_admin", "wait_reachable", "format_table", "TOPIC_WAIT_S",
]

# How long a command keeps trying to reach its first broker, or to find a topic, before giving up.
CONNECT_WAIT_S = 5.0
TOPIC_WAIT_S = 5.0


class CommandError(Exception):
    """An expected failure of a command: one line for the user, exit code 1."""


def add_command(subparsers, name: str, help: str) -> argparse.ArgumentParser:
    """A subcommand parser whose flag errors are one line (see `one_line_errors`)."""
    return one_line_errors(subparsers.add_parser(name, help=help, prog=f"python -m raftkafka {name}"))


def one_line_errors(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Bad flags print `error: ...` (one line, exit 2) instead of a usage screen."""
    prog = parser.prog

    def error(message: str):
        print(f"error: {prog}: {message} (see --help)", file=sys.stderr)
        sys.exit(2)

    parser.error = error
    return parser


def add_bootstrap(parser: argparse.ArgumentParser, *, config_flag: str = "--command-config") -> None:
    parser.add_argument("--bootstrap-server", "--bootstrap-servers", dest="bootstrap", required=True,
                        metavar="HOST:PORT", help="a broker's listener (comma-separated list allowed)")
    flags = (config_flag,) if config_flag == "--command-config" else (config_flag, "--command-config")
    parser.add_argument(*flags, dest="command_config", metavar="FILE",
                        help="client properties file (k=v lines, Kafka names such as request.timeout.ms, "
                             "security.protocol, ssl.ca.location)")


def bootstrap_of(args) -> str:
    try:
        parse_bootstrap(args.bootstrap)
    except ValueError as e:
        raise CommandError(f"--bootstrap-server: {e}") from None
    return args.bootstrap


def parse_key_values(items, flag: str) -> dict[str, str]:
    """["a=1", "b=2,c=3"]-style flag values → {"a": "1", ...}; `k=[x,y]` keeps its commas (kafka-configs)."""
    out: dict[str, str] = {}
    for item in items or ():
        for part in _split_top_level(item):
            key, sep, value = part.partition("=")
            key = key.strip()
            if not sep or not key:
                raise CommandError(f"{flag}: {part!r} is not key=value")
            value = value.strip()
            if value.startswith("[") and value.endswith("]"):
                value = value[1:-1]
            out[key] = value
    return out


def known_properties(properties: dict[str, str], defaults: dict, flag: str = "--property") -> dict:
    """The console tools' `--property K=V` settings over their defaults; an unknown name is one clear error."""
    unknown = sorted(set(properties) - set(defaults))
    if unknown:
        raise CommandError(f"unknown {flag} {unknown[0]!r} (known: {', '.join(sorted(defaults))})")
    return {**defaults, **properties}


def true_or_false(settings: dict, name: str, flag: str = "--property") -> bool:
    value = str(settings[name]).lower()
    if value not in ("true", "false"):
        raise CommandError(f"{flag} {name} must be true or false, not {settings[name]!r}")
    return value == "true"


def _split_top_level(text: str) -> list[str]:
    parts, depth, current = [], 0, []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p for p in (s.strip() for s in parts) if p]


def read_properties(path: str | None) -> dict[str, str]:
    """A Java .properties file (storage.java_properties: `key=value`, `key: value`, continuations,
    escapes, `#`/`!` comments)."""
    if not path:
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            return parse_properties(f.read())
    except OSError as e:
        raise CommandError(f"cannot read {path}: {e.strerror or e}") from None
    except (UnicodeDecodeError, PropertiesError) as e:
        raise CommandError(f"{path}: {e}") from None


# Kafka property names whose client keyword is not simply the dotted name with underscores.
_RENAMED = {"compression.type": "compression", "partitioner.class": "partitioner",
            "allow.auto.create.topics": "allow_auto_topic_creation"}
# Accepted for compatibility; they change nothing for our client.
_IGNORED = {"bootstrap.servers", "key.serializer", "value.serializer", "key.deserializer",
            "value.deserializer"}
_ASSIGNORS = {"org.apache.kafka.clients.consumer.RangeAssignor": "range",
              "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin"}


def client_kwargs(client_class, properties: dict[str, str], what: str) -> dict:
    """Kafka property names → keyword arguments of `client_class`, typed like their defaults."""
    params = inspect.signature(client_class.__init__).parameters
    security = {k: v for k, v in properties.items() if k in SECURITY_PROPERTIES}
    out = {}
    if security:
        try:
            out["security"] = ClientSecurity.from_properties(security)
        except ValueError as e:
            raise CommandError(f"{what} properties: {e}") from None
    for name, text in sorted(properties.items()):
        if name in _IGNORED or name in SECURITY_PROPERTIES:
            continue
        key = _RENAMED.get(name, name.replace(".", "_"))
        param = params.get(key)
        if param is None or param.kind != inspect.Parameter.KEYWORD_ONLY:
            raise CommandError(f"unknown {what} property {name!r}")
        out[key] = _convert(name, text, param.default)
    return out


def _convert(name: str, text: str, default):
    try:
        if name == "partition.assignment.strategy":
            return tuple(_ASSIGNORS.get(s.strip(), s.strip()) for s in text.split(",") if s.strip())
        if isinstance(default, bool) or name.startswith("enable."):
            if text.lower() not in ("true", "false"):
                raise ValueError
            return text.lower() == "true"
        if isinstance(default, int) and name != "acks":
            return int(text)
        if isinstance(default, float):
            return float(text)
        return text
    except ValueError:
        raise CommandError(f"property {name}={text!r}: not a valid value") from None


def format_table(header: list[str], rows: list[list]) -> str:
    """Left-aligned columns separated by a space, as Kafka's tools print them; None and "" show as '-'."""
    cells = [header] + [["-" if c is None or c == "" else str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n".join(" ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells)


def describe_error(exc: BaseException) -> str:
    if isinstance(exc, KafkaError):
        return str(exc)
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return str(exc) or type(exc).__name__


_EXPECTED = (CommandError, KafkaError, ValueError, OSError)


def run_client(main, *args):
    """trio.run(main, *args), turning expected failures into one CommandError."""
    # What is loaded by now (modules, classes, the parser: ~10^5 objects) lives as long as the
    # command: out of the collector's sight, a full collection walks only what the client made.
    # A consumer's buffered records reach the oldest generation, and walking the imports at
    # each full collection would be ~40 % of a fast consumer's CPU.
    gc.freeze()
    # A bulk producer or consumer makes millions of short-lived objects with few cycles: young
    # collections every 50 000 allocations rather than 700 save ~8 % of the CPU per record
    # (bench produce --client ours) at a few MB of garbage held a little longer.
    gc.set_threshold(50_000, 20, 20)
    try:
        return trio.run(main, *args)
    except CommandError:
        raise
    except _EXPECTED as e:
        raise CommandError(describe_error(e)) from None
    except BaseExceptionGroup as group:
        matched, rest = group.split(_EXPECTED)
        if matched is None or rest is not None:
            raise
        leaf = matched
        while isinstance(leaf, BaseExceptionGroup):
            leaf = leaf.exceptions[0]
        if isinstance(leaf, CommandError):
            raise leaf from None
        raise CommandError(describe_error(leaf)) from None


async def wait_reachable(cluster, bootstrap: str) -> None:
    """Fail fast, with one line, when no bootstrap server answers."""
    deadline = trio.current_time() + min(CONNECT_WAIT_S, cluster.request_timeout)
    while True:
        try:
            await cluster.any_connection()
            return
        except AuthenticationError as e:  # retrying cannot help
            raise CommandError(f"authentication failed: {e}") from None
        except KafkaError as e:
            if trio.current_time() >= deadline:
                raise CommandError(f"cannot reach any broker at {bootstrap}: {e}") from None
        await trio.sleep(0.2)


def admin_options(args) -> dict:
    return client_kwargs(Admin, read_properties(getattr(args, "command_config", None)), "admin")


@asynccontextmanager
async def open_admin(args):
    """An Admin on RealEnv for `args.bootstrap`, already known to reach a broker."""
    bootstrap = bootstrap_of(args)
    async with Admin(RealEnv(), bootstrap, **admin_options(args)) as admin:
        await wait_reachable(admin.cluster, bootstrap)
        yield admin
