"""`mirror mm2.properties`: Kafka's connect-mirror-maker.sh (MirrorMaker 2, dedicated mode).

The file uses MirrorMaker 2's names (raftkafka.connect.mirror_config); runs until stopped.
"""
from __future__ import annotations

from raftkafka.cli.common import CommandError, add_command, client_kwargs, read_properties, run_client, \
    wait_reachable
from raftkafka.client import Admin, Consumer, Producer

__all__ = ["add_parser", "run"]

_CLASSES = {"producer": Producer, "consumer": Consumer, "admin": Admin}


def add_parser(subparsers) -> None:
    parser = add_command(subparsers, "mirror", "replicate topics, configs and group offsets between clusters "
                                               "(MirrorMaker 2)")
    parser.add_argument("config", metavar="mm2.properties", help="MirrorMaker 2 settings (clusters = A, B, "
                        "A.bootstrap.servers, A->B.enabled, A->B.topics, ...)")
    parser.set_defaults(run=run)


def run(args) -> int:
    from raftkafka.connect.mirror import run_mirror
    from raftkafka.connect.mirror_config import parse_mirror_config
    from raftkafka.connect.standalone import log

    try:
        flows, notes = parse_mirror_config(read_properties(args.config))
    except ValueError as e:
        raise CommandError(f"{args.config}: {e}") from None
    for note in notes:
        log(note)
    kwargs = {}
    for flow in flows:
        for cluster in (flow.source, flow.target):
            for kind, cls in _CLASSES.items():
                kwargs[(cluster.alias, kind)] = client_kwargs(cls, cluster.client_settings(kind),
                                                              f"{cluster.alias} {kind}")
    return run_client(run_mirror, flows, kwargs, wait_reachable, log)
