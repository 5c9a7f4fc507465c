"""`python -m raftkafka topics`: create, list, describe, alter and delete topics, like kafka-topics.

    topics --bootstrap-server H:P --create --topic T [--partitions N] [--replication-factor R] [--config k=v ...]
    topics --bootstrap-server H:P --list [--topic REGEX] [--exclude-internal]
    topics --bootstrap-server H:P --describe [--topic REGEX] [--under-replicated-partitions | --unavailable-partitions]
    topics --bootstrap-server H:P --alter --topic T --partitions N
    topics --bootstrap-server H:P --delete --topic T

As in Kafka, `--topic` for list/describe/alter/delete is a regular expression
matched against whole names; describe prints one header line per topic, then
one tab-separated line per partition with its leader, replicas, ISR and (KIP-966) eligible
leader replicas, asked with DescribeTopicPartitions (`N/A` from a cluster without it).
"""
from __future__ import annotations

import re

from raftkafka.cli.common import CommandError, add_bootstrap, add_command, open_admin, parse_key_values, run_client
from raftkafka.client import RESOURCE_TOPIC, KafkaError, NewTopic
from wire.error_codes import ErrorCode
from wire.kafka_uuid import uuid_to_str

__all__ = ["add_parser", "run", "format_describe"]

_DYNAMIC_TOPIC_CONFIG = 1  # Kafka's ConfigSource for a per-topic override


def add_parser(subparsers) -> None:
    p = add_command(subparsers, "topics", "create, list, describe, alter and delete topics")
    add_bootstrap(p)
    action = p.add_mutually_exclusive_group(required=True)
    for name in ("create", "list", "describe", "alter", "delete"):
        action.add_argument(f"--{name}", dest="action", action="store_const", const=name)
    p.add_argument("--topic", help="topic name (a regular expression for list/describe/alter/delete)")
    p.add_argument("--partitions", type=int, help="partition count (create; alter raises it)")
    p.add_argument("--replication-factor", type=int, help="replicas per partition (create)")
    p.add_argument("--config", action="append", metavar="K=V", help="topic config override (create; repeatable)")
    p.add_argument("--if-not-exists", action="store_true", help="create: succeed if the topic exists")
    p.add_argument("--if-exists", action="store_true", help="alter/delete/describe: succeed if nothing matches")
    p.add_argument("--exclude-internal", action="store_true", help="list/describe: leave out internal topics")
    p.add_argument("--under-replicated-partitions", action="store_true",
                   help="describe: only partitions whose ISR is smaller than their replica set")
    p.add_argument("--unavailable-partitions", action="store_true", help="describe: only partitions without a leader")
    p.add_argument("--topics-with-overrides", action="store_true", help="describe: only topics with config overrides")
    p.set_defaults(run=run)


def run(args) -> int:
    if args.action != "list" and args.action != "describe" and not args.topic:
        raise CommandError(f"--{args.action} needs --topic")
    if args.partitions is not None and args.partitions < 1:
        raise CommandError("--partitions must be at least 1")
    if args.replication_factor is not None and args.replication_factor < 1:
        raise CommandError("--replication-factor must be at least 1")
    if args.action == "alter" and args.partitions is None:
        raise CommandError("--alter needs --partitions (change configs with the configs command)")
    if args.action != "create" and (args.config or args.replication_factor is not None):
        raise CommandError("--config and --replication-factor only apply to --create")
    return run_client(_main, args)


async def _main(args) -> int:
    async with open_admin(args) as admin:
        return await _ACTIONS[args.action](admin, args)


async def _create(admin, args) -> int:
    configs = parse_key_values(args.config, "--config")
    topic = NewTopic(args.topic, args.partitions if args.partitions is not None else -1,
                     args.replication_factor if args.replication_factor is not None else -1, configs)
    error = (await admin.create_topics([topic]))[args.topic]
    if error is not None:
        if error.code == ErrorCode.TOPIC_ALREADY_EXISTS:
            if args.if_not_exists:
                return 0
            raise CommandError(f"Topic '{args.topic}' already exists.")
        raise CommandError(str(error))
    print(f"Created topic {args.topic}.")
    return 0


async def _matching(admin, args, *, internal: bool = True) -> list[str]:
    topics = await admin.list_topics(include_internal=internal and not args.exclude_internal)
    if not args.topic:
        return sorted(topics)
    try:
        pattern = re.compile(args.topic)
    except re.error as e:
        raise CommandError(f"--topic {args.topic!r} is not a valid regular expression: {e}") from None
    return sorted(n for n in topics if n == args.topic or pattern.fullmatch(n))


async def _matching_or_fail(admin, args) -> list[str]:
    names = await _matching(admin, args)
    if not names and args.topic and not args.if_exists:
        raise CommandError(f"Topic '{args.topic}' does not exist as expected")
    return names


async def _list(admin, args) -> int:
    for name in await _matching(admin, args):
        print(name)
    return 0


async def _describe(admin, args) -> int:
    names = await _matching_or_fail(admin, args)
    infos = await admin.describe_topic_partitions(names) if names else {}
    overrides = {}
    if names:
        described = await admin.describe_configs([(RESOURCE_TOPIC, n) for n in names])
        overrides = {name: {k: e.value for k, e in sorted(entries.items()) if e.source == _DYNAMIC_TOPIC_CONFIG}
                     for (_, name), entries in described.items()}
    reassignments = {}
    if names:
        try:  # as kafka-topics: partitions being reassigned show their adding and removing replicas
            reassignments = await admin.list_partition_reassignments(
                [(n, p) for n in names for p in infos[n].partitions])
        except KafkaError:  # e.g. no DESCRIBE on the cluster: the rest of the description stands
            pass
    text = format_describe(infos, overrides, under_replicated=args.under_replicated_partitions,
                           unavailable=args.unavailable_partitions, with_overrides=args.topics_with_overrides,
                           reassignments=reassignments)
    if text:
        print(text)
    return 0


def format_describe(infos, overrides, *, under_replicated=False, unavailable=False, with_overrides=False,
                    reassignments=None) -> str:
    """kafka-topics' describe layout; with a partition filter only matching partition lines.
    `reassignments`: (topic, partition) -> (replicas, adding, removing) of those being reassigned."""
    reassignments = reassignments or {}
    filtered = under_replicated or unavailable
    lines = []
    for name, info in sorted(infos.items()):
        configs = overrides.get(name, {})
        if with_overrides and not configs:
            continue
        partitions = [p for _, p in sorted(info.partitions.items())]
        if not filtered:
            rf = len(partitions[0].replicas) if partitions else 0
            if partitions and (name, partitions[0].partition) in reassignments:  # the RF it keeps
                rf -= len(reassignments[(name, partitions[0].partition)][2])
            config_text = ",".join(f"{k}={v}" for k, v in sorted(configs.items()))
            topic_id = "" if info.topic_id is None else f"TopicId: {uuid_to_str(info.topic_id)}\t"
            lines.append(f"Topic: {name}\t{topic_id}PartitionCount: {len(partitions)}\tReplicationFactor: {rf}\t"
                         f"Configs: {config_text}")
        for p in partitions:
            if under_replicated and not len(p.isr) < len(p.replicas):
                continue
            if unavailable and p.leader >= 0:
                continue
            leader = "none" if p.leader < 0 else str(p.leader)
            line = (f"\tTopic: {name}\tPartition: {p.partition}\tLeader: {leader}\t"
                    f"Replicas: {_ids(p.replicas)}\tIsr: {_ids(p.isr)}")
            moving = reassignments.get((name, p.partition))
            if moving is not None:
                line += f"\tAdding Replicas: {_ids(moving[1])}\tRemoving Replicas: {_ids(moving[2])}"
            line += f"\tElr: {_ids_or_na(p.elr)}\tLastKnownElr: {_ids_or_na(p.last_known_elr)}"
            lines.append(line)
    return "\n".join(lines)


def _ids(ids) -> str:
    return ",".join(str(i) for i in ids)


def _ids_or_na(ids) -> str:
    """As kafka-topics 3.7+: N/A when the cluster could not say (no DescribeTopicPartitions)."""
    return "N/A" if ids is None else _ids(ids)


async def _alter(admin, args) -> int:
    names = await _matching_or_fail(admin, args)
    if not names:
        return 0
    results = await admin.create_partitions({n: args.partitions for n in names})
    failed = [str(e) for _, e in sorted(results.items()) if e is not None]
    if failed:
        raise CommandError("; ".join(failed))
    for name in names:
        print(f"Topic {name} now has {args.partitions} partitions.")
    return 0


async def _delete(admin, args) -> int:
    names = await _matching_or_fail(admin, args)
    internal = [n for n in names if n.startswith("__")]
    if internal:
        raise CommandError(f"refusing to delete internal topic(s) {', '.join(internal)}")
    if not names:
        return 0
    results = await admin.delete_topics(names)
    failed = [str(e) for _, e in sorted(results.items()) if e is not None]
    if failed:
        raise CommandError("; ".join(failed))
    for name in names:
        print(f"Deleted topic {name}.")
    return 0


_ACTIONS = {"create": _create, "list": _list, "describe": _describe, "alter": _alter, "delete": _delete}

