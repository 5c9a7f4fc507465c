"""`python -m raftkafka groups`: list, describe, reset and delete consumer groups, like kafka-consumer-groups.

    groups --bootstrap-server H:P --list
    groups --bootstrap-server H:P --describe --group G [--members | --state]
    groups --bootstrap-server H:P --reset-offsets (--group G ... | --all-groups) (--topic T[:P,P] ... | --all-topics)
           (--to-earliest | --to-latest | --to-current | --to-datetime ISO | --by-duration PnDTnHnMnS
            | --to-offset N | --shift-by N | --from-file CSV) [--execute] [--export]
    groups --bootstrap-server H:P --delete --group G
    groups --bootstrap-server H:P --delete-offsets --group G --topic T[:P,P]

Describe shows, per partition, the committed offset, the log end offset and
the lag, with the member the partition is assigned to; `--state` adds the
coordinator. A reset is a dry run (the plan is printed) unless `--execute` is
given, and, as in Kafka, only allowed while the group has no active members.
`--export` prints the plan as kafka-consumer-groups' CSV (`topic,partition,offset`,
with a leading `group,` column when several groups are reset), which `--from-file`
reads back as the target offsets.
"""
from __future__ import annotations

import csv
import datetime as dt
import io
import re
import time

from raftkafka.cli.common import (
    CommandError,
    add_bootstrap,
    add_command,
    format_table,
    open_admin,
    run_client,
)
from raftkafka.client.group import GroupMembership

__all__ = ["add_parser", "run", "parse_datetime", "parse_duration_ms", "plan_reset", "export_csv", "read_reset_csv"]

_INACTIVE = ("Empty", "Dead")


def add_parser(subparsers) -> None:
    p = add_command(subparsers, "groups", "list, describe, reset and delete consumer groups")
    add_bootstrap(p)
    action = p.add_mutually_exclusive_group(required=True)
    for name in ("list", "describe", "reset-offsets", "delete", "delete-offsets"):
        action.add_argument(f"--{name}", dest="action", action="store_const", const=name)
    p.add_argument("--group", action="append", help="group id (repeatable)")
    p.add_argument("--all-groups", action="store_true", help="describe/delete/reset: every group")
    p.add_argument("--members", action="store_true", help="describe: members and their partition counts")
    p.add_argument("--state", action="store_true", help="describe: coordinator, protocol, state, member count")
    p.add_argument("--topic", action="append", metavar="T[:P,...]",
                   help="reset/delete-offsets: topic, optionally partitions")
    p.add_argument("--all-topics", action="store_true", help="reset: every topic the group committed")
    target = p.add_mutually_exclusive_group()
    target.add_argument("--to-earliest", dest="to", action="store_const", const=("earliest", None))
    target.add_argument("--to-latest", dest="to", action="store_const", const=("latest", None))
    target.add_argument("--to-current", dest="to", action="store_const", const=("current", None))
    target.add_argument("--to-datetime", metavar="ISO", help="e.g. 2024-01-31T12:00:00.000 (local time unless zoned)")
    target.add_argument("--by-duration", metavar="PnDTnHnMnS", help="e.g. PT1H30M: the offsets of that long ago")
    target.add_argument("--to-offset", type=int, metavar="N")
    target.add_argument("--shift-by", type=int, metavar="N")
    target.add_argument("--from-file", metavar="CSV", help="reset to the offsets in a file written by --export")
    p.add_argument("--dry-run", action="store_true", help="reset: only print the plan (the default)")
    p.add_argument("--execute", action="store_true", help="reset: commit the new offsets")
    p.add_argument("--export", action="store_true", help="reset: print the plan as CSV (for --from-file)")
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


_DURATION = re.compile(r"([-+]?)P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+)(?:[.,](\d{1,9}))?S)?)?",
                       re.IGNORECASE)


def parse_duration_ms(text: str) -> int:
    """ISO-8601 duration as Java's Duration.parse takes it (PnDTnHnMn.nS) → milliseconds, >= 0."""
    m = _DURATION.fullmatch(text.strip())
    if not m or not any(m.group(i) for i in (2, 3, 4, 5)) or text.strip().upper().endswith("T"):
        raise CommandError(f"--by-duration {text!r} is not an ISO-8601 duration like PT1H30M or P1DT2H")
    days, hours, minutes, seconds = (int(m.group(i) or 0) for i in (2, 3, 4, 5))
    fraction = int((m.group(6) or "0").ljust(3, "0")[:3])
    ms = ((days * 24 + hours) * 60 + minutes) * 60_000 + seconds * 1000 + (fraction if seconds >= 0 else -fraction)
    ms = -ms if m.group(1) == "-" else ms
    if ms < 0:
        raise CommandError(f"--by-duration {text!r} must not be negative")
    return ms


def read_reset_csv(path: str) -> dict[str | None, dict[tuple[str, int], int]]:
    """kafka-consumer-groups' export: `topic,partition,offset` (group None) or `group,topic,partition,offset`."""
    try:
        with open(path, encoding="utf-8", newline="") as f:
            rows = [r for r in csv.reader(f) if r and any(c.strip() for c in r)]
    except OSError as e:
        raise CommandError(f"--from-file {path}: {e.strerror or e}") from None
    out: dict[str | None, dict[tuple[str, int], int]] = {}
    for number, row in enumerate(rows, 1):
        if len(row) not in (3, 4):
            raise CommandError(f"--from-file {path}:{number}: expected topic,partition,offset "
                               "or group,topic,partition,offset")
        group = row[0].strip() if len(row) == 4 else None
        topic, partition, offset = (c.strip() for c in row[-3:])
        try:
            out.setdefault(group, {})[(topic, int(partition))] = int(offset)
        except ValueError:
            raise CommandError(f"--from-file {path}:{number}: partition and offset must be numbers") from None
    if len(out) > 1 and None in out:
        raise CommandError(f"--from-file {path}: rows with and without a group column")
    return out


def export_csv(plans: dict[str, dict[tuple[str, int], int]]) -> str:
    """The plans as kafka-consumer-groups --export writes them (a group column for several groups)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    for group, plan in sorted(plans.items()):
        for (topic, partition), offset in sorted(plan.items()):
            writer.writerow(([group] if len(plans) > 1 else []) + [topic, partition, offset])
    return buffer.getvalue()


def _reset_target(args):
    if args.to is not None:
        return args.to
    if args.to_datetime is not None:
        return "datetime", parse_datetime(args.to_datetime)
    if args.by_duration is not None:
        return "datetime", int(time.time() * 1000) - parse_duration_ms(args.by_duration)
    if args.from_file is not None:
        return "file", read_reset_csv(args.from_file)
    if args.to_offset is not None:
        return "offset", args.to_offset
    if args.shift_by is not None:
        return "shift", args.shift_by
    raise CommandError("--reset-offsets needs one of --to-earliest, --to-latest, --to-current, "
                       "--to-datetime, --by-duration, --to-offset, --shift-by, --from-file")


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
    if args.action != "list" and not (args.group or (args.all_groups and args.action != "delete-offsets")):
        raise CommandError(f"--{args.action} needs --group" + ("" if args.action == "delete-offsets"
                                                               else " or --all-groups"))
    if args.action == "reset-offsets":
        if args.dry_run and args.execute:
            raise CommandError("--dry-run and --execute exclude each other")
        target = _reset_target(args)
        if not args.topic and not args.all_topics and target[0] != "file":
            raise CommandError("--reset-offsets needs --topic or --all-topics")
        return run_client(_reset, args, target, _topic_specs(args.topic))
    if args.action == "delete-offsets":
        if not args.group or len(args.group) != 1 or not args.topic:
            raise CommandError("--delete-offsets takes exactly one --group and at least one --topic")
        return run_client(_delete_offsets, args, _topic_specs(args.topic))
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
                coordinator = await admin.find_coordinator(group)
                print(format_table(["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
                                   [[group, f"{coordinator.host}:{coordinator.port} ({coordinator.node_id})",
                                     description.protocol or "", description.state, len(description.members)]]))
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
        elif kind == "file":
            offset = value[tp]
        elif kind == "shift":
            offset = (current[tp] if current[tp] is not None else high) + value
        else:  # datetime: the first record at or after it, or the end if none is that recent
            found = by_time.get(tp)
            offset = found if found is not None and found >= 0 else high
        plan[tp] = min(max(offset, low), high)
    return plan


async def _reset(args, target, topics: dict) -> int:
    plans: dict[str, dict[tuple[str, int], int]] = {}
    async with open_admin(args) as admin:
        groups = await _groups(admin, args)
        if target[0] == "file":
            groups = _file_groups(target[1], groups, args.from_file)
        for group in groups:
            plans[group] = await _plan_group(admin, args, group, target, topics)
        if args.execute:
            for group, plan in sorted(plans.items()):
                await GroupMembership(admin.env, admin.cluster, group).commit(plan, as_member=False)
    if args.export:
        print(export_csv(plans), end="")
        return 0
    print()
    print(format_table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
                       [[group, t, p, o] for group, plan in sorted(plans.items())
                        for (t, p), o in sorted(plan.items())]))
    return 0


def _file_groups(by_group: dict, groups: list[str], path: str) -> list[str]:
    if None in by_group:  # rows without a group column: the offsets of each named group
        return groups
    missing = sorted(set(groups) - set(by_group))
    if missing:
        raise CommandError(f"--from-file {path} has no offsets for group '{missing[0]}'")
    return groups


async def _plan_group(admin, args, group: str, target, topics: dict) -> dict[tuple[str, int], int]:
    description = (await admin.describe_groups([group]))[group]
    if description.state not in _INACTIVE:
        raise CommandError(f"Assignments can only be reset if the group '{group}' is inactive, "
                           f"but the current state is {description.state}.")
    committed = await admin.list_consumer_group_offsets(group)
    if target[0] == "file":
        by_group = target[1]
        target = ("file", by_group.get(group, by_group.get(None, {})))
        partitions = sorted(target[1])
        await _check_partitions(admin, {t: sorted({p for tt, p in partitions if tt == t})
                                        for t in {t for t, _ in partitions}})
    elif args.all_topics:
        partitions = sorted(committed)
        if not partitions:
            raise CommandError(f"group '{group}' has no committed offsets to reset (name the --topic)")
    else:
        partitions = await _check_partitions(admin, topics)
    current = {tp: committed.get(tp) for tp in partitions}
    earliest = {tp: o for tp, (o, _) in (await admin.list_offsets({tp: "earliest" for tp in partitions})).items()}
    latest = {tp: o for tp, (o, _) in (await admin.list_offsets({tp: "latest" for tp in partitions})).items()}
    by_time = {}
    if target[0] == "datetime":
        by_time = {tp: o for tp, (o, _) in (await admin.list_offsets({tp: target[1] for tp in partitions})).items()}
    return plan_reset(target, current, earliest, latest, by_time)


async def _check_partitions(admin, topics: dict) -> list[tuple[str, int]]:
    """The partitions `topics` names (all of a topic given without any), each checked to exist."""
    infos = await admin.describe_topics(sorted(topics))
    partitions = []
    for name, wanted in sorted(topics.items()):
        known = sorted(infos[name].partitions)
        missing = sorted(set(wanted or ()) - set(known))
        if missing:
            raise CommandError(f"topic {name!r} has no partition {missing[0]}")
        partitions += [(name, p) for p in (wanted or known)]
    return partitions


async def _delete_offsets(args, topics: dict) -> int:
    group = args.group[0]
    async with open_admin(args) as admin:
        partitions = await _check_partitions(admin, topics)
        results = await admin.delete_consumer_group_offsets(group, partitions)
    failed = {tp: e for tp, e in results.items() if e is not None}
    names = ", ".join(sorted(topics))
    if failed:
        print(f"Request failed for deleting offsets with topic {names} group {group}")
    else:
        print(f"Request succeed for deleting offsets with topic {names} group {group}")
    print()
    print(format_table(["TOPIC", "PARTITION", "STATUS"],
                       [[t, p, "Successful" if results.get((t, p)) is None else f"Error: {results[(t, p)]}"]
                        for t, p in sorted(results)]))
    if failed:
        raise CommandError(str(next(iter(failed.values()))))
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
