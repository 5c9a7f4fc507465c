"""Command-line interface. Subcommands mirror Kafka's tools (DESIGN §9).

One module per subcommand, each with `add_parser(subparsers)` (which sets
`run`) and `run(args) -> exit code`. Expected failures (bad settings, an
unformatted data dir, an unreachable cluster) are one line on stderr and exit
code 1, never a traceback.
"""
from __future__ import annotations

import argparse
import sys

USAGE = """\
python -m raftkafka [COMMAND] [OPTIONS]
       python -m raftkafka [--base-port 9092] [--data-dir ./raftkafka-data]
           (no command: one node serving Kafka clients at localhost:9092)
"""


def _expected_errors(command: str | None = None) -> tuple[type[BaseException], ...]:
    from process.halt import DirectoryHalt  # a disk error halted the node (like Kafka)
    from raftkafka.node.config import ConfigError
    from storage.meta_properties import DataDirError
    from storage.quorum_state_file import CorruptQuorumStateError

    node_errors = (ConfigError, DataDirError, CorruptQuorumStateError, DirectoryHalt)
    if command == NODE_ONLY:
        return node_errors
    from raftkafka.cli.common import CommandError
    from raftkafka.cli.quorum import QuorumCommandError

    return (*node_errors, QuorumCommandError, CommandError)


def _first_leaf(group: BaseExceptionGroup) -> BaseException:
    while isinstance(group, BaseExceptionGroup):
        group = group.exceptions[0]
    return group


def _client_commands():
    """The commands that talk to brokers with our client (Kafka's console tools)."""
    from raftkafka.cli import (acls, bench, cluster, configs, connect_standalone, console_consumer, console_producer,
                               consumer_groups, delete_records, get_offsets, leader_election, log_dirs, mirror,
                               reassign_partitions, topics, transactions)

    return (topics, console_producer, console_consumer, configs, consumer_groups, get_offsets, acls, transactions,
            bench, reassign_partitions, leader_election, cluster, delete_records, log_dirs, connect_standalone,
            mirror)


# `node` alone gets a parser of its own: a (re)started node then imports none of the client
# tools, about 0.4 s of CPU, which is seconds of wall time on a loaded host (docs/failover.md).
NODE_ONLY = "node"


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Every command's parser, or only `node`'s when `command` is NODE_ONLY."""
    from raftkafka.cli import node

    parser = argparse.ArgumentParser(
        prog="python -m raftkafka", usage=USAGE,
    )
    if command != NODE_ONLY:
        from raftkafka.cli import default

        default.add_arguments(parser)  # the bare command: one node on 9092/9093
    # An explicit prog keeps the custom usage text out of every subcommand's usage line.
    subparsers = parser.add_subparsers(dest="command", prog="python -m raftkafka", metavar="COMMAND")
    node.add_parser(subparsers)
    if command != NODE_ONLY:
        from raftkafka.cli import dev, format_storage, quorum, simulate

        for module in (format_storage, quorum, dev, simulate, *_client_commands()):
            module.add_parser(subparsers)
    version = f"raftkafka {package_version()}"
    parser.add_argument("--version", action="version", version=version)
    for sub in subparsers.choices.values():  # as Kafka's tools: --version on every command
        sub.add_argument("--version", action="version", version=version)
    return parser


def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("raftkafka")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    command = NODE_ONLY if argv[:1] == [NODE_ONLY] else None
    parser = build_parser(command)
    args = parser.parse_args(argv)
    if args.command is None:
        from raftkafka.cli import default

        args.run = default.run
    expected = _expected_errors(command)
    try:
        code = args.run(args)
    except expected as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
    except BaseExceptionGroup as group:
        # trio wraps errors raised inside nurseries; an expected one is still one line.
        matched, rest = group.split(expected)
        if matched is None or rest is not None:
            raise
        print(f"error: {_first_leaf(matched)}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
    sys.exit(code)
