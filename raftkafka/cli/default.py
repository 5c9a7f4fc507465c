"""`python -m raftkafka` with no command: one combined node, usable at once by any Kafka client.

    python -m raftkafka [--base-port 9092] [--data-dir ./raftkafka-data]

Serves Kafka clients on 127.0.0.1:P and its controller on P+1 (9092/9093 by default,
as in Kafka's quickstart), keeps its data in the data dir (formatted on first start,
with `node.toml` next to the data so `python -m raftkafka node --config` runs the same
node), prints how to connect, and runs until Ctrl-C or SIGTERM (controlled shutdown).
"""
from __future__ import annotations

import logging
import sys

from raftkafka.cli.dev import check_ports_free, existing_cluster_id, node_layout, prepare_node, voters_of
from raftkafka.cli.format_storage import random_uuid_text
from raftkafka.node.config import load_config
from storage.env import RealEnv

__all__ = ["add_arguments", "run"]


def add_arguments(parser) -> None:
    """The bare command's options (on the top-level parser)."""
    parser.add_argument("--base-port", type=int, default=9092,
                        help="Kafka clients on this port, the controller on the next (default 9092)")
    parser.add_argument("--data-dir", default="raftkafka-data", help="data directory (default ./raftkafka-data)")


def run(args) -> int:
    import trio  # the node's stack is loaded by the command that runs it, not by every command's parser

    from raftkafka.node.assembly import run_node

    layout = node_layout(1, 1, args.base_port, args.data_dir)
    config = load_config(layout.settings)
    check_ports_free([layout])
    cluster_id = existing_cluster_id([layout]) or random_uuid_text(RealEnv())
    if prepare_node(layout, voters_of([layout]), cluster_id):
        print(f"Formatted {layout.data_dir} (cluster {cluster_id})", flush=True)
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    def announce(line: str, **_) -> None:
        print(line, flush=True)
        print(f"""
raftkafka is running: one node, data in {layout.data_dir}
  Connect any Kafka client to  localhost:{layout.client_port}   (bootstrap.servers=localhost:{layout.client_port})
  Try:  python -m raftkafka topics --bootstrap-server localhost:{layout.client_port} --create --topic quickstart
        python -m raftkafka produce --bootstrap-server localhost:{layout.client_port} --topic quickstart
        python -m raftkafka consume --bootstrap-server localhost:{layout.client_port} --topic quickstart --from-beginning
  Stop with Ctrl-C. The same node: python -m raftkafka node --config {layout.config_path}
""", flush=True)

    trio.run(lambda: run_node(RealEnv(), config, announce=announce))
    return 0
