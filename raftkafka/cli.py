"""Command-line interface. Subcommands mirror Kafka's tools (DESIGN §9)."""
from __future__ import annotations

import argparse
import sys

USAGE = """\
usage: python -m raftkafka [COMMAND] [OPTIONS]

Commands:
  node       run a node (controller, broker or both) from --config FILE
  format     format a data directory (--cluster-id, --node-id, initial voters)
  dev        run a local multi-node cluster in child processes
  topics     create, list, describe, alter and delete topics
  produce    console producer
  consume    console consumer
  groups     list, describe and reset consumer groups
  quorum     describe the metadata quorum
  configs    describe and alter configs
  simulate   deterministic simulation of a whole cluster
  bench      producer / consumer performance test
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m raftkafka", usage=USAGE)
    parser.add_subparsers(dest="command")
    return parser


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        # Until the broker exists, the bare command explains itself.
        print(USAGE, end="")
        sys.exit(0)
