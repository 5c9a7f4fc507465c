"""`python -m raftkafka groups`: list, describe, reset and delete consumer groups, like kafka-consumer-groups.

    groups --bootstrap-server H:P --list
    groups --bootstrap-server H:P --describe --group G [--members | --state]
    groups --bootstrap-server H:P --reset-offsets --group G (--topic T[:P,P] ... | --all-topics)
           (--to-earliest | --to-latest | --to-datetime ISO | --to-offset N | --shift-by N) [--execute]
    groups --bootstrap-server H:P --delete --group G

Describe shows, per partition, the committed offset, the log end offset and
the lag, with the member the partition is assigned to. A reset is a dry run
(the plan is printed) unless `--execute` is given, and, as in Kafka, only
allowed while the group has no active members.
"""
from __future__ import annotations

import datetime as dt

from raftkafka.cli.common import CommandError, add_bootstrap, add_command, format_table, open_admin, run_client
from raftkafka.client.group import GroupMembership

__all__ = ["add_parser", "run", "parse_datetime", "plan_reset"]

_INACTIVE = ("Empty", "Dead")


def add_parser(subparsers) -> None:
    p = add_command(subparsers, "groups", "list, describe, reset and delete consumer groups")
    add_bootstrap(p)
    action = p.add_mutually_exclusive_group(required=True)
    for name in ("list", "describe", "reset-offsets", "delete"):
        action.add_argument(f"--{name}", dest="action", action="store_const", const=name)
    p.add_argument("--group", action="append", help="group id (repeatable)")
    p.add_argument("--all-groups", action="store_true", help="describe/delete: every group")
    p.add_argument("--members", action="store_true", help="describe: members and their partition counts")
    p.add_argument("--state", action="store_true", help="describe: coordinator, protocol, state, member count")
    p.add_argument("--topic", action="append", metavar="T[:P,...]", help="reset: topic, optionally partitions")
    p.add_argument("--all-topics", action="store_true", help="reset: every topic the group committed")
    target = p.add_mutually_exclusive_group()
    target.add_argument("--to-earliest", dest="to", action="store_const", const=("earliest", None))
    target.add_argument("--to-latest", dest="to", action="store_const", const=("latest", None))
    target.add_argument("--to-current", dest="to", action="store_const", const=("current", None))
    target.add_argument("--to-datetime", metavar="ISO", help="e.g. 2024-01-31T12:00:00.000 (local time unless zoned)")
    target.add_argument("--to-offset", type=int, metavar="N")
    target.add_argument("--shift-by", type=int, metavar="N")
    p.add_argument("--dry-run", action="store_true", help="reset: only print the plan (the default)")
    p.add_argument("--execute", action="store_true", help="reset: commit the new offsets")
    p.set_defaults(run=run)


def parse_datetime(text: str) -> int:
    """ISO-8601 → epoch ms; a time without a zone is local time, as kafka-consumer-groups takes it."""
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        raise CommandError(f"--to-datetime {text!r} is not an ISO date-time like 2024-01-31T12:00:00.000") from None
    if moment.tzinfo is None:
        moment = moment.astimezone()
    return int(moment.timestamp() * 1000)


def _reset_target(args):
    if args.to is not None:
        return args.to
    if args.to_datetime is not None:
        return "datetime", parse_datetime(args.to_datetime)
    if args.to_offset is not None:
        return "offset", args.to_offset
    if args.shift_by is not None:
        return "shift", args.shift_by
    raise CommandError("--reset-offsets needs one of --to-earliest, --to-latest, --to-current, "
                       "--to-datetime, --to-offset, --shift-by")


def _topic_specs(items) -> dict[str, list[int] | None]:
    out: dict[str, list[int] | None] = {}
    for item in items or ():
        name, sep, parts = item.partition(":")
        if not name:
            raise CommandError(f"--topic {item!r}: no topic name")
        try:
            out[name] = sorted({int(p) for p in parts.split(",") if p.strip()}) if sep else None
        except ValueError:
            raise CommandError(f"--topic {item!r}: partitions must be numbers, as in topic:0,1") from None
    return out


def run(args) -> int:
    if args.action != "list" and not (args.group or (args.all_groups and args.action != "reset-offsets")):
        raise CommandError(f"--{args.action} needs --group")
    if args.action == "reset-offsets":
        if args.dry_run and args.execute:
            raise CommandError("--dry-run and --execute exclude each other")
        if not args.topic and not args.all_topics:
            raise CommandError("--reset-offsets needs --topic or --all-topics")
        target = _reset_target(args)
        return run_client(_reset, args, target, _topic_specs(args.topic))
    return run_client(_ACTIONS[args.action], args)


async def _groups(admin, args) -> list[str]:
    if args.all_groups:
        return [g for g, _ in await admin.list_groups()]
    return sorted(set(args.group))


async def _list(args) -> int:
    async with open_admin(args) as admin:
        for group, _ in await admin.list_groups():
            print(group)
    return 0


async def _describe(args) -> int:
    async with open_admin(args) as admin:
        for group in await _groups(admin, args):
            description = (await admin.describe_groups([group]))[group]
            if description.error is not None:
                raise CommandError(str(description.error))
            committed = await admin.list_consumer_group_offsets(group)
            if description.state == "Dead" and not committed:
                raise CommandError(f"Consumer group '{group}' does not exist.")
            print()
            if args.state:
                print(format_table(["GROUP", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
                                   [[group, description.protocol or "", description.state,
                                     len(description.members)]]))
                continue
            if not description.members and description.state in _INACTIVE:
                print(f"Consumer group '{group}' has no active members.\n")
            if args.members:
                print(format_table(["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"],
                                   [[group, m.member_id, m.client_host, m.client_id, len(m.assignment),
                                     ",".join(f"{t}-{p}" for t, p in m.assignment)]
                                    for m in description.members]))
                continue
            owner = {tp: m for m in description.members for tp in m.assignment}
            partitions = sorted(set(owner) | set(committed))
            ends = await admin.list_offsets({tp: "latest" for tp in partitions}) if partitions else {}
            rows = []
            for tp in partitions:
                offset = committed.get(tp)
                end = ends[tp][0] if tp in ends else None
                lag = max(0, end - offset) if offset is not None and end is not None else None
                member = owner.get(tp)
                rows.append([group, tp[0], tp[1], offset, end, lag, member and member.member_id,
                             member and member.client_host, member and member.client_id])
            print(format_table(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                                "CONSUMER-ID", "HOST", "CLIENT-ID"], rows))
    return 0


def plan_reset(target, current: dict, earliest: dict, latest: dict, by_time: dict) -> dict:
    """New offset per partition; offsets outside [earliest, latest] are clamped, as Kafka does."""
    kind, value = target
    plan = {}
    for tp in sorted(current):
        low, high = earliest[tp], latest[tp]
        if kind == "earliest":
            offset = low
        elif kind == "latest":
            offset = high
        elif kind == "current":
            offset = current[tp] if current[tp] is not None else high
        elif kind == "offset":
            offset = value
        elif kind == "shift":
            offset = (current[tp] if current[tp] is not None else high) + value
        else:  # datetime: the first record at or after it, or the end if none is that recent
            found = by_time.get(tp)
            offset = found if found is not None and found >= 0 else high
        plan[tp] = min(max(offset, low), high)
    return plan


async def _reset(args, target, topics: dict) -> int:
    group = args.group[0] if len(args.group) == 1 else None
    if group is None:
        raise CommandError("--reset-offsets takes exactly one --group")
    async with open_admin(args) as admin:
        description = (await admin.describe_groups([group]))[group]
        if description.state not in _INACTIVE:
            raise CommandError(f"Assignments can only be reset if the group '{group}' is inactive, "
                               f"but the current state is {description.state}.")
        committed = await admin.list_consumer_group_offsets(group)
        if args.all_topics:
            partitions = sorted(committed)
            if not partitions:
                raise CommandError(f"group '{group}' has no committed offsets to reset (name the --topic)")
        else:
            infos = await admin.describe_topics(sorted(topics))
            partitions = []
            for name, wanted in sorted(topics.items()):
                known = sorted(infos[name].partitions)
                missing = sorted(set(wanted or ()) - set(known))
                if missing:
                    raise CommandError(f"topic {name!r} has no partition {missing[0]}")
                partitions += [(name, p) for p in (wanted or known)]
        current = {tp: committed.get(tp) for tp in partitions}
        earliest = {tp: o for tp, (o, _) in (await admin.list_offsets({tp: "earliest" for tp in partitions})).items()}
        latest = {tp: o for tp, (o, _) in (await admin.list_offsets({tp: "latest" for tp in partitions})).items()}
        by_time = {}
        if target[0] == "datetime":
            by_time = {tp: o for tp, (o, _) in (await admin.list_offsets({tp: target[1] for tp in partitions})).items()}
        plan = plan_reset(target, current, earliest, latest, by_time)
        if args.execute:
            await GroupMembership(admin.env, admin.cluster, group).commit(plan, as_member=False)
    print()
    print(format_table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
                       [[group, t, p, o] for (t, p), o in sorted(plan.items())]))
    return 0


async def _delete(args) -> int:
    async with open_admin(args) as admin:
        groups = await _groups(admin, args)
        results = await admin.delete_groups(groups)
    failed = [str(e) for _, e in sorted(results.items()) if e is not None]
    if failed:
        raise CommandError("; ".join(failed))
    quoted = ", ".join(f"'{g}'" for g in groups)
    print(f"Deletion of requested consumer groups ({quoted}) was successful.")
    return 0


_ACTIONS = {"list": _list, "describe": _describe, "delete": _delete}
