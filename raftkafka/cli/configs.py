"""`python -m raftkafka configs`: describe and alter topic, broker and user configs, like kafka-configs.

    configs --bootstrap-server H:P --describe --entity-type topics --entity-name T [--all]
    configs --bootstrap-server H:P --describe --entity-type brokers (--entity-name 1 | --entity-default)
    configs --bootstrap-server H:P --alter --entity-type topics --entity-name T \\
            --add-config retention.ms=60000,cleanup.policy=[compact,delete] --delete-config segment.ms
    configs --bootstrap-server H:P --alter --topic T --add-config-file FILE   (a .properties file)

Users and clients (`--entity-type users|clients`) have client quotas (raftkafka.cli.quota_configs)
and users SCRAM credentials (raftkafka.cli.user_configs) as their configs.
`--topic T`, `--broker N` and `--broker-defaults` are shorthands, as in Kafka.
Describe lists the overrides at the entity's own level (everything with
`--all`); alter is incremental: settings not named keep their values.
"""
from __future__ import annotations

from raftkafka.cli.common import (
    CommandError,
    add_bootstrap,
    add_command,
    open_admin,
    parse_key_values,
    read_properties,
    run_client,
)
from raftkafka.client import RESOURCE_BROKER, RESOURCE_TOPIC
from raftkafka.cli.quota_configs import EntityArg, entities_of, run_quotas, split_configs
from raftkafka.cli.user_configs import run_users

__all__ = ["add_parser", "run", "format_entries"]

SOURCE_NAMES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
                3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
                6: "DYNAMIC_BROKER_LOGGER_CONFIG"}
_QUOTA_TYPES = ("users", "user", "clients", "client", "ips", "ip")
_ENTITY_TYPES = {"topics": RESOURCE_TOPIC, "topic": RESOURCE_TOPIC, "brokers": RESOURCE_BROKER,
                 "broker": RESOURCE_BROKER}


def add_parser(subparsers) -> None:
    p = add_command(subparsers, "configs", "describe and alter topic, broker, user and client configs "
                                           "(quotas, SCRAM credentials)")
    add_bootstrap(p)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", dest="action", action="store_const", const="describe")
    action.add_argument("--alter", dest="action", action="store_const", const="alter")
    p.add_argument("--entity-type", action=EntityArg, choices=sorted([*_ENTITY_TYPES, *_QUOTA_TYPES]),
                   help="topics, brokers, users, clients or ips (users and clients: twice, for a user's client-id)")
    p.add_argument("--entity-name", action=EntityArg, help="topic name, broker id, user name or client-id")
    p.add_argument("--entity-default", action=EntityArg, nargs=0, default=False,
                   help="brokers: the cluster-wide default; users, clients: the <default> entity")
    p.add_argument("--topic", help="shorthand for --entity-type topics --entity-name TOPIC")
    p.add_argument("--broker", help="shorthand for --entity-type brokers --entity-name ID")
    p.add_argument("--broker-defaults", action="store_true",
                   help="shorthand for --entity-type brokers --entity-default")
    p.add_argument("--add-config", action="append", metavar="K=V,...", help="settings to set (alter)")
    p.add_argument("--add-config-file", metavar="FILE", help="settings to set, from a .properties file (alter)")
    p.add_argument("--delete-config", action="append", metavar="K,...", help="settings to remove (alter)")
    p.add_argument("--all", action="store_true", help="describe: every setting with its source, not just overrides")
    p.set_defaults(run=run)


def entity_of(args) -> tuple[int, str | None]:
    """(resource type, name); name None = every topic; "" = the brokers' cluster default."""
    chosen = [x for x in (args.topic and "topic", args.broker and "broker", args.broker_defaults and "defaults") if x]
    if len(chosen) > 1 or (chosen and (args.entity_type or args.entity_name or args.entity_default)):
        raise CommandError("name one entity: --entity-type/--entity-name, --topic, --broker or --broker-defaults")
    if args.topic:
        return RESOURCE_TOPIC, args.topic
    if args.broker:
        return RESOURCE_BROKER, _broker_id(args.broker)
    if args.broker_defaults:
        return RESOURCE_BROKER, ""
    if not args.entity_type:
        raise CommandError("--entity-type is required (topics or brokers)")
    kind = _ENTITY_TYPES[args.entity_type]
    if args.entity_default:
        if kind != RESOURCE_BROKER or args.entity_name:
            raise CommandError("--entity-default only applies to brokers, without --entity-name")
        return kind, ""
    if args.entity_name is None:
        if kind == RESOURCE_BROKER or args.action == "alter":
            raise CommandError("--entity-name (or --entity-default for brokers) is required")
        return kind, None
    return kind, _broker_id(args.entity_name) if kind == RESOURCE_BROKER else args.entity_name


def _broker_id(text: str) -> str:
    if not text.isdigit():
        raise CommandError(f"broker id must be a number, not {text!r}")
    return str(int(text))


def run(args) -> int:
    if any(kind == "type" and value in _QUOTA_TYPES for kind, value in getattr(args, "entity_order", None) or ()):
        return _run_users_and_clients(args)
    entity = entity_of(args)
    if args.action == "alter":
        if args.add_config and args.add_config_file:
            raise CommandError("only one of --add-config or --add-config-file may be given")
        changes: dict[str, str | None] = (read_properties(args.add_config_file) if args.add_config_file
                                          else dict(parse_key_values(args.add_config, "--add-config")))
        for item in args.delete_config or ():
            for name in (n.strip() for n in item.split(",")):
                if not name:
                    continue
                if name in changes:
                    raise CommandError(f"{name} is both added and deleted")
                changes[name] = None
        if not changes:
            raise CommandError("--alter needs --add-config, --add-config-file and/or --delete-config")
        return run_client(_alter, args, entity, changes)
    if args.add_config or args.add_config_file or args.delete_config:
        raise CommandError("--add-config/--add-config-file/--delete-config need --alter")
    return run_client(_describe, args, entity)


def _run_users_and_clients(args) -> int:
    """Quotas (raftkafka.cli.quota_configs) and a user's SCRAM credentials (user_configs)."""
    entities = entities_of(args)
    if any(t not in ("user", "client-id", "ip") for t, _ in entities):
        raise CommandError("users, clients and ips cannot be combined with topics or brokers")
    quota_add, quota_delete, scram_add, scram_delete = split_configs(args)
    one_user = [t for t, _ in entities] == ["user"] and not args.entity_default
    if args.action == "describe":
        if args.add_config or args.delete_config:
            raise CommandError("--add-config/--delete-config need --alter")
        status = run_quotas(args, {}, [])
        return run_users(args) if one_user and status == 0 else status
    if (scram_add or scram_delete) and not one_user:
        raise CommandError("SCRAM credentials belong to one named user (--entity-type users --entity-name N)")
    status = 0
    if quota_add or quota_delete or not (scram_add or scram_delete):
        status = run_quotas(args, quota_add, quota_delete)
    if status == 0 and (scram_add or scram_delete):
        args.add_config, args.delete_config = scram_add or None, scram_delete or None
        status = run_users(args)
    return status


def _label(entity: tuple[int, str]) -> str:
    kind, name = entity
    if kind == RESOURCE_TOPIC:
        return f"topic {name}"
    return "brokers in the cluster" if name == "" else f"broker {name}"


async def _alter(args, entity, changes) -> int:
    async with open_admin(args) as admin:
        if entity[0] == RESOURCE_TOPIC:
            await admin.describe_topics([entity[1]])  # an unknown topic: UNKNOWN_TOPIC_OR_PARTITION
        await admin.alter_configs(entity, changes)
    default = "default " if entity == (RESOURCE_BROKER, "") else ""
    print(f"Completed updating {default}config for {_label(entity)}.")
    return 0


async def _describe(args, entity) -> int:
    kind, name = entity
    async with open_admin(args) as admin:
        names = [name] if name is not None else sorted(await admin.list_topics(include_internal=True))
        if kind == RESOURCE_TOPIC and name is not None:
            await admin.describe_topics([name])
        described = await admin.describe_configs([(kind, n) for n in names]) if names else {}
    for n in names:
        entries = described.get((kind, n), {})
        own = {RESOURCE_TOPIC: 1, RESOURCE_BROKER: 3 if n == "" else 2}[kind]
        shown = entries if args.all else {k: e for k, e in entries.items() if e.source == own}
        what = "All" if args.all else ("Default" if (kind, n) == (RESOURCE_BROKER, "") else "Dynamic")
        print(f"{what} configs for {_label((kind, n))} are:")
        text = format_entries(shown)
        if text:
            print(text)
    return 0


def format_entries(entries) -> str:
    lines = []
    for name, e in sorted(entries.items()):
        value = "null" if e.value is None else e.value
        lines.append(f"  {name}={value} sensitive={str(e.sensitive).lower()} "
                     f"source={SOURCE_NAMES.get(e.source, e.source)}")
    return "\n".join(lines)
