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
"""
from __future__ import annotations

import logging
import sys

import trio

from raftkafka.config import add_config_arguments, load_config, settings_from_args
from raftkafka.node import run_node
from storage.env import RealEnv

__all__ = ["add_parser", "run"]


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("node", help="run a node (controller, broker or both)")
    add_config_arguments(p)
    p.set_defaults(run=run)


def run(args) -> int:
    config = load_config(settings_from_args(args))
    logging.basicConfig(
        stream=sys.stderr,
        level=getattr(logging, config.log_level.upper(), logging.INFO),
        format=f"%(asctime)s %(levelname)s [node {config.node_id}] %(name)s: %(message)s",
    )
    trio.run(run_node, RealEnv(), config)
    return 0
