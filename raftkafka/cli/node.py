"""`python -m raftkafka node`: run a node until SIGTERM/SIGINT.

    python -m raftkafka node --config node.toml
    python -m raftkafka node --roles controller --node-id 1 --log-dir DIR \\
        --listeners CONTROLLER://127.0.0.1:9093
    python -m raftkafka node --roles broker --node-id 4 --log-dir DIR \\
        --listeners PLAINTEXT://127.0.0.1:9092 --controller-quorum-voters 1@127.0.0.1:9093

Roles: controller (a Raft voter of the metadata quorum), broker (the Kafka listener,
following the metadata log as an observer) or both. Once serving, the node prints one
line with its addresses. SIGTERM/SIGINT is a controlled shutdown: partition leadership
moves away, Raft leadership is handed over, logs are flushed and the clean-shutdown
marker is written (the next start skips the recovery scan).

A log dir that fails (a write or fsync error: ENOSPC, EIO, ...) halts the node as
Kafka halts a broker: no controlled shutdown, no clean-shutdown marker (the next
start runs the recovery scan); the last line on stderr says which dir failed and
why, and the exit status is 1.
"""
from __future__ import annotations

import logging
import sys

from process.halt import DirectoryHalt
from raftkafka.node.config import add_config_arguments, load_config, settings_from_args

__all__ = ["add_parser", "run"]


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("node", help="run a node (controller, broker or both)")
    add_config_arguments(p)
    p.set_defaults(run=run)


def run(args) -> int:
    import trio  # the node's stack is loaded by the command that runs it, not by every command's parser

    from raftkafka.node.assembly import run_node
    from storage.env import RealEnv

    config = load_config(settings_from_args(args))
    logging.basicConfig(
        stream=sys.stderr,
        level=getattr(logging, config.log_level.upper(), logging.INFO),
        format=f"%(asctime)s %(levelname)s [node {config.node_id}] %(name)s: %(message)s",
    )
    try:
        trio.run(run_node, RealEnv(), config)
    except (DirectoryHalt, BaseExceptionGroup) as exc:
        halt = find_halt(exc)
        if halt is None:
            raise
        print(f"error: {halt}", file=sys.stderr, flush=True)
        return 1
    return 0


def find_halt(exc: BaseException) -> DirectoryHalt | None:
    """The disk-failure halt (a log dir or the metadata log dir) that ended a run, wherever
    trio's nurseries nested it."""
    if isinstance(exc, DirectoryHalt):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = find_halt(inner)
            if found is not None:
                return found
    return None
