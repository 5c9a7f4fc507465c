"""`connect-standalone WORKER.properties CONNECTOR.properties...`: Kafka's connect-standalone.sh.

The worker and connector files use Kafka Connect's names (raftkafka.connect.worker_config); the
connectors are FileStreamSource and FileStreamSink (raftkafka.connect). Runs until stopped.
"""
from __future__ import annotations

from raftkafka.cli.common import CommandError, add_command, client_kwargs, read_properties, run_client, \
    wait_reachable
from raftkafka.client import Consumer, Producer

__all__ = ["add_parser", "run"]


def add_parser(subparsers) -> None:
    parser = add_command(subparsers, "connect-standalone",
                         "run Kafka Connect connectors in this process (FileStreamSource, FileStreamSink)")
    parser.add_argument("worker", metavar="WORKER.properties", help="the worker's settings (bootstrap.servers, "
                        "converters, offset.storage.file.filename, ...)")
    parser.add_argument("connectors", metavar="CONNECTOR.properties", nargs="+",
                        help="one file per connector (name, connector.class, tasks.max, file, topic/topics, ...)")
    parser.set_defaults(run=run)


def run(args) -> int:
    from raftkafka.connect.standalone import run_worker
    from raftkafka.connect.worker_config import ConnectorConfig, WorkerConfig

    try:
        worker = WorkerConfig.parse(read_properties(args.worker))
    except ValueError as e:
        raise CommandError(f"{args.worker}: {e}") from None
    connectors = []
    for path in args.connectors:
        try:
            connectors.append(ConnectorConfig.parse(read_properties(path), worker))
        except ValueError as e:
            raise CommandError(f"{path}: {e}") from None
    names = [c.name for c in connectors]
    if len(set(names)) != len(names):
        raise CommandError("two connectors have the same name")
    producer = client_kwargs(Producer, worker.client_kwargs("producer"), "producer")
    consumer = client_kwargs(Consumer, worker.client_kwargs("consumer"), "consumer")
    return run_client(run_worker, worker, connectors, producer, consumer, wait_reachable)
