"""`python -m raftkafka cluster`: the cluster id, and decommissioning a broker, like kafka-cluster.

    cluster cluster-id --bootstrap-server H:P
    cluster unregister --bootstrap-server H:P --id N

`unregister` sends UnregisterBroker: the controller forgets broker N's registration. It
refuses a broker that still holds replicas (naming the partitions: reassign them first);
a broker that is still running registers again, so stop it first (its controlled
shutdown moves its leaderships away).
"""
from __future__ import annotations

from raftkafka.cli.common import add_bootstrap, add_command, one_line_errors, open_admin, run_client
from raftkafka.client.operations import unregister_broker

__all__ = ["add_parser", "run"]


def add_parser(subparsers) -> None:
    p = add_command(subparsers, "cluster", "the cluster id; unregister a broker (kafka-cluster)")
    sub = p.add_subparsers(dest="cluster_command", metavar="ACTION", required=True)
    ident = one_line_errors(sub.add_parser("cluster-id", help="print the cluster id",
                                           prog="python -m raftkafka cluster cluster-id"))
    add_bootstrap(ident)
    unregister = one_line_errors(sub.add_parser("unregister", help="unregister (decommission) a broker",
                                                prog="python -m raftkafka cluster unregister"))
    add_bootstrap(unregister)
    unregister.add_argument("--id", type=int, required=True, metavar="N", help="the broker id to unregister")
    p.set_defaults(run=run)


def run(args) -> int:
    return run_client(_unregister if args.cluster_command == "unregister" else _cluster_id, args)


async def _cluster_id(args) -> int:
    async with open_admin(args) as admin:
        description = await admin.describe_cluster()
    print(f"Cluster ID: {description.cluster_id}")
    return 0


async def _unregister(args) -> int:
    async with open_admin(args) as admin:
        await unregister_broker(admin.cluster, args.id)
    print(f"Broker {args.id} is no longer registered.")
    return 0
