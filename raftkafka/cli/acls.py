"""`python -m raftkafka acls`: add, remove and list ACLs, like kafka-acls.

    acls --bootstrap-server H:P --add --allow-principal User:alice --operation Read --topic events
    acls --bootstrap-server H:P --add --allow-principal User:bob --producer --topic events
    acls --bootstrap-server H:P --add --allow-principal User:carol --consumer --topic events --group g
    acls --bootstrap-server H:P --list [--topic events] [--principal User:alice]
    acls --bootstrap-server H:P --remove --force --allow-principal User:alice --operation Read --topic events

As kafka-acls: hosts default to `*`, operations to All; `--producer` means Write, Describe
and Create on the topics (IdempotentWrite on the cluster with `--idempotent`, Write and
Describe on `--transactional-id`s); `--consumer` means Read and Describe on the topics and
Read on the group. `--remove` asks before deleting unless `--force`. After `--add` and
`--remove` the resources' current ACLs are listed.
"""
from __future__ import annotations

import sys

from metadata.authorizer import SUPPORTED_OPERATIONS
from raftkafka.cli.common import CommandError, add_bootstrap, add_command, open_admin, run_client
from wire.acl_codes import (
    CLUSTER_NAME, WILDCARD, AclBinding, AclFilter, AclOperation, AclPermission, PatternType, ResourceType,
)

__all__ = ["add_parser", "run", "format_resource", "format_entry"]

_OPERATIONS = {op.name.replace("_", "").lower(): op for op in AclOperation
               if op not in (AclOperation.UNKNOWN, AclOperation.ANY)}
_PATTERNS = {p.name.lower(): p for p in PatternType if p != PatternType.UNKNOWN}


def add_parser(subparsers) -> None:
    p = add_command(subparsers, "acls", "add, remove and list ACLs (kafka-acls)")
    add_bootstrap(p)
    action = p.add_mutually_exclusive_group(required=True)
    for name in ("add", "remove", "list"):
        action.add_argument(f"--{name}", dest="action", action="store_const", const=name)
    p.add_argument("--allow-principal", action="append", default=[], metavar="TYPE:NAME")
    p.add_argument("--deny-principal", action="append", default=[], metavar="TYPE:NAME")
    p.add_argument("--allow-host", action="append", default=[], metavar="HOST", help="default * (every host)")
    p.add_argument("--deny-host", action="append", default=[], metavar="HOST", help="default * (every host)")
    p.add_argument("--principal", action="append", default=[], metavar="TYPE:NAME", help="--list: only these")
    p.add_argument("--operation", action="append", default=[], metavar="OP",
                   help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
                        "AlterConfigs, IdempotentWrite, All (default All)")
    p.add_argument("--topic", action="append", default=[], metavar="TOPIC")
    p.add_argument("--group", action="append", default=[], metavar="GROUP")
    p.add_argument("--transactional-id", action="append", default=[], metavar="ID")
    p.add_argument("--cluster", action="store_true")
    p.add_argument("--resource-pattern-type", default="literal", metavar="TYPE",
                   help="literal (default), prefixed; --list/--remove also any, match")
    p.add_argument("--producer", action="store_true", help="the ACLs a producer needs")
    p.add_argument("--consumer", action="store_true", help="the ACLs a consumer needs (with --group)")
    p.add_argument("--idempotent", action="store_true", help="--producer: IdempotentWrite on the cluster")
    p.add_argument("--force", action="store_true", help="--remove without asking")
    p.set_defaults(run=run)


def run(args) -> int:
    pattern = _pattern(args.resource_pattern_type, args.action)
    resources = _resources(args, pattern)
    if args.action == "list":
        if args.allow_principal or args.deny_principal or args.operation or args.producer or args.consumer:
            raise CommandError("--list takes resources and --principal only")
        return run_client(_list, args, resources)
    if not resources:
        raise CommandError("You must provide at least one resource: --topic, --group, --cluster or "
                           "--transactional-id")
    wanted = _bindings(args, resources)
    if args.action == "remove":
        return run_client(_remove, args, resources, wanted)
    if not wanted:
        raise CommandError("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
    return run_client(_add, args, wanted)


def _pattern(text: str, action: str) -> PatternType:
    pattern = _PATTERNS.get(text.strip().lower())
    if pattern is None:
        raise CommandError(f"--resource-pattern-type: {text!r} is not one of literal, prefixed, any, match")
    if action == "add" and pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise CommandError(f"A '{pattern.name}' resource pattern type is not valid when adding ACLs; "
                           "use literal or prefixed")
    return pattern


def _resources(args, pattern: PatternType) -> list[tuple[ResourceType, str, PatternType]]:
    out = [(ResourceType.TOPIC, t, pattern) for t in args.topic]
    out += [(ResourceType.GROUP, g, pattern) for g in args.group]
    out += [(ResourceType.TRANSACTIONAL_ID, t, pattern) for t in args.transactional_id]
    if args.cluster or (args.producer and args.idempotent):
        out.append((ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL))
    if any(not name for _, name, _ in out):
        raise CommandError("resource names must not be empty")
    return out


def _operations(args) -> list[AclOperation]:
    ops = []
    for text in args.operation:
        op = _OPERATIONS.get(text.replace("_", "").replace("-", "").lower())
        if op is None:
            raise CommandError(f"--operation: {text!r} is not an operation ({', '.join(_display_ops())})")
        ops.append(op)
    return ops


def _display_ops() -> list[str]:
    return [_camel(op.name) for op in _OPERATIONS.values()]


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def _convenience_ops(args, rtype: ResourceType) -> list[AclOperation]:
    """What --producer / --consumer mean for one resource type (kafka-acls' expansion)."""
    O = AclOperation
    ops: list[AclOperation] = []
    if args.producer:
        ops += {ResourceType.TOPIC: [O.WRITE, O.DESCRIBE, O.CREATE], ResourceType.CLUSTER: [O.IDEMPOTENT_WRITE],
                ResourceType.TRANSACTIONAL_ID: [O.WRITE, O.DESCRIBE]}.get(rtype, [])
    if args.consumer:
        ops += {ResourceType.TOPIC: [O.READ, O.DESCRIBE], ResourceType.GROUP: [O.READ]}.get(rtype, [])
    return ops


def _bindings(args, resources) -> list[AclBinding]:
    if args.consumer and not args.group:
        raise CommandError("With --consumer you must specify a --group")
    if (args.producer or args.consumer) and args.operation:
        raise CommandError("--operation cannot be combined with --producer or --consumer")
    explicit = _operations(args)
    entries = [(p, h, AclPermission.ALLOW) for p in args.allow_principal for h in (args.allow_host or [WILDCARD])]
    entries += [(p, h, AclPermission.DENY) for p in args.deny_principal for h in (args.deny_host or [WILDCARD])]
    if (args.allow_host and not args.allow_principal) or (args.deny_host and not args.deny_principal):
        raise CommandError("--allow-host/--deny-host need --allow-principal/--deny-principal")
    out = []
    for rtype, name, pattern in resources:
        ops = _convenience_ops(args, rtype) if (args.producer or args.consumer) else (explicit or [AclOperation.ALL])
        for op in ops:
            if op != AclOperation.ALL and op not in SUPPORTED_OPERATIONS[rtype]:
                raise CommandError(f"ResourceType {rtype.name} only supports operations "
                                   f"{','.join(_camel(o.name) for o in SUPPORTED_OPERATIONS[rtype])},All")
        out += [AclBinding(rtype, name, pattern, principal, host, op, perm)
                for principal, host, perm in entries for op in dict.fromkeys(ops)]
    for b in out:
        if ":" not in b.principal:
            raise CommandError(f"{b.principal!r} is not a principal (expected Type:name, e.g. User:alice)")
    return out


# --- output, as kafka-acls prints it ------------------------------------------------------


def format_resource(rtype: int, name: str, pattern: int) -> str:
    return (f"ResourcePattern(resourceType={ResourceType(rtype).name}, name={name}, "
            f"patternType={PatternType(pattern).name})")


def format_entry(b: AclBinding) -> str:
    return (f"(principal={b.principal}, host={b.host}, operation={AclOperation(b.operation).name}, "
            f"permissionType={AclPermission(b.permission).name})")


def _print_block(title: str, resource: tuple, bindings: list[AclBinding]) -> None:
    entries = "\n".join("\t" + format_entry(b) for b in bindings)
    print(f"{title} `{format_resource(*resource)}`: \n {entries} \n")


def _by_resource(bindings: list[AclBinding]) -> dict[tuple, list[AclBinding]]:
    out: dict[tuple, list[AclBinding]] = {}
    for b in sorted(bindings):
        out.setdefault(tuple(b[:3]), []).append(b)
    return out


async def _list(args, resources) -> int:
    filters = [AclFilter(rtype, name, pattern) for rtype, name, pattern in resources] or [AclFilter()]
    async with open_admin(args) as admin:
        found: list[AclBinding] = []
        for f in filters:
            found += [b for b in await admin.describe_acls(f) if b not in found]
    if args.principal:
        found = [b for b in found if b.principal in args.principal]
    for resource, bindings in _by_resource(found).items():
        _print_block("Current ACLs for resource", resource, bindings)
    return 0


async def _show_current(admin, resources) -> None:
    for rtype, name, pattern in dict.fromkeys(resources):
        bindings = await admin.describe_acls(AclFilter(rtype, name, pattern))
        _print_block("Current ACLs for resource", (rtype, name, pattern), sorted(bindings))


async def _add(args, wanted: list[AclBinding]) -> int:
    async with open_admin(args) as admin:
        for resource, bindings in _by_resource(wanted).items():
            _print_block("Adding ACLs for resource", resource, bindings)
        errors = [e for e in await admin.create_acls(wanted) if e is not None]
        if errors:
            raise CommandError(f"Error while adding ACLs: {errors[0]}")
        await _show_current(admin, [tuple(b[:3]) for b in wanted])
    return 0


def _confirm(question: str) -> bool:
    print(f"{question} (y/n)")
    answer = sys.stdin.readline().strip().lower()
    return answer in ("y", "yes")


async def _remove(args, resources, wanted: list[AclBinding]) -> int:
    where = ", ".join(format_resource(*r) for r in resources)
    if wanted:
        filters = [AclFilter(*b) for b in wanted]
        entries = "\n".join("\t" + format_entry(b) for b in wanted)
        question = f"Are you sure you want to remove ACLs: \n {entries} \n from resource filter `{where}`?"
    else:
        filters = [AclFilter(rtype, name, pattern) for rtype, name, pattern in resources]
        question = f"Are you sure you want to delete all ACLs for resource filter `{where}`?"
    if not args.force and not _confirm(question):
        return 0
    async with open_admin(args) as admin:
        await admin.delete_acls(filters)
        if all(p in (PatternType.LITERAL, PatternType.PREFIXED) for _, _, p in resources):
            await _show_current(admin, resources)
    return 0
