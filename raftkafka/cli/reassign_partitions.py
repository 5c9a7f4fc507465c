"""`python -m raftkafka reassign-partitions`: move partitions between brokers, like
kafka-reassign-partitions (KIP-455 through AlterPartitionReassignments).

    reassign-partitions --bootstrap-server H:P --topics-to-move-json-file F --broker-list 1,2,3 --generate
    reassign-partitions --bootstrap-server H:P --reassignment-json-file F --execute [--throttle B/s] [--additional]
    reassign-partitions --bootstrap-server H:P --reassignment-json-file F --verify [--preserve-throttles]
    reassign-partitions --bootstrap-server H:P --reassignment-json-file F --cancel [--preserve-throttles]
    reassign-partitions --bootstrap-server H:P --list

The JSON formats are Kafka's: `{"version":1,"topics":[{"topic":"t"}]}` for the topics to move
and `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any","any"]}]}`
for an assignment (`log_dirs` is optional; only "any" is supported). `--execute` prints the
current assignment (to roll back with) before starting; `--throttle` sets the
leader/follower.replication.throttled.rate of every broker involved and the topics'
*.replication.throttled.replicas for the moving replicas, and `--verify` clears them once every
listed reassignment has completed. Raising a topic's replication factor is an assignment with
longer replica lists.
"""
from __future__ import annotations

import json

from metadata.controller.placement import place_replicas
from raftkafka.cli.common import CommandError, add_bootstrap, add_command, open_admin, run_client
from raftkafka.client import RESOURCE_TOPIC
from raftkafka.client.admin import RESOURCE_BROKER

__all__ = ["add_parser", "run", "parse_reassignment", "assignment_json", "move_throttles"]

TopicPartition = tuple[str, int]
_BROKER_THROTTLES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
_TOPIC_THROTTLES = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
_VERIFY_WARNING = ("Warning: You must run --verify periodically, until the reassignment completes, "
                   "to ensure the throttle is removed.")


def add_parser(subparsers) -> None:
    p = add_command(subparsers, "reassign-partitions", "move partitions between brokers (kafka-reassign-partitions)")
    add_bootstrap(p)
    action = p.add_mutually_exclusive_group(required=True)
    for name in ("generate", "execute", "verify", "cancel", "list"):
        action.add_argument(f"--{name}", dest="action", action="store_const", const=name)
    p.add_argument("--topics-to-move-json-file", metavar="FILE", help="generate: the topics to move")
    p.add_argument("--broker-list", metavar="1,2,3", help="generate: the brokers to move them to")
    p.add_argument("--reassignment-json-file", metavar="FILE", help="execute/verify/cancel: the assignment")
    p.add_argument("--throttle", type=int, default=-1, metavar="B/s",
                   help="execute: replication throttle for the moving replicas, bytes/s")
    p.add_argument("--additional", action="store_true",
                   help="execute: start even though reassignments are in progress")
    p.add_argument("--preserve-throttles", action="store_true", help="verify/cancel: leave the throttles set")
    p.add_argument("--disable-rack-aware", action="store_true", help="generate: ignore racks")
    p.add_argument("--timeout", type=int, default=10_000, metavar="MS", help="execute: request timeout (ms)")
    p.set_defaults(run=run)


def run(args) -> int:
    if args.action == "generate" and not (args.topics_to_move_json_file and args.broker_list):
        raise CommandError("--generate needs --topics-to-move-json-file and --broker-list")
    if args.action in ("execute", "verify", "cancel") and not args.reassignment_json_file:
        raise CommandError(f"--{args.action} needs --reassignment-json-file")
    if args.throttle != -1 and (args.action != "execute" or args.throttle < 0):
        raise CommandError("--throttle is a number of bytes/s (at least 0) for --execute")
    return run_client(_main, args)


async def _main(args) -> int:
    async with open_admin(args) as admin:
        return await _ACTIONS[args.action](admin, args)


# -- JSON ---------------------------------------------------------------------------------
def _read_json(path: str):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise CommandError(f"cannot read {path}: {e.strerror or e}") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise CommandError(f"{path} is not valid JSON: {e}") from None


def _check_version(data, path: str) -> None:
    if not isinstance(data, dict):
        raise CommandError(f"{path}: expected a JSON object")
    if data.get("version", 1) != 1:
        raise CommandError(f"{path}: Not supported version field value {data.get('version')}")


def parse_reassignment(data, path: str = "reassignment JSON") -> dict[TopicPartition, list[int]]:
    """Kafka's parsePartitionReassignmentData, with its checks, as (topic, partition) -> replicas."""
    _check_version(data, path)
    entries = data.get("partitions")
    if not isinstance(entries, list) or not entries:
        raise CommandError("Partition reassignment list cannot be empty")
    out: dict[TopicPartition, list[int]] = {}
    for e in entries:
        if (not isinstance(e, dict) or not isinstance(e.get("topic"), str) or type(e.get("partition")) is not int
                or not isinstance(e.get("replicas"), list) or not all(type(r) is int for r in e["replicas"])):
            raise CommandError(f"{path}: each partition needs \"topic\", \"partition\" and \"replicas\" "
                               f"(a list of broker ids): {json.dumps(e)}")
        key, replicas = (e["topic"], e["partition"]), e["replicas"]
        if key in out:
            raise CommandError(f"Duplicate replica assignment found: {key[0]}-{key[1]}")
        if len(set(replicas)) != len(replicas):
            raise CommandError(f"Partition replica lists may not contain duplicate entries: {key[0]}-{key[1]} "
                               f"has replicas {replicas}")
        dirs = e.get("log_dirs")
        if dirs is not None:
            if not isinstance(dirs, list) or len(dirs) != len(replicas):
                raise CommandError(f"Size of replicas list {replicas} is different from size of log dirs list "
                                   f"{dirs} for partition {key[0]}-{key[1]}")
            if any(d != "any" for d in dirs):
                raise CommandError(f"{key[0]}-{key[1]}: moving replicas between log dirs is not supported "
                                   "(log_dirs must be \"any\")")
        out[key] = list(replicas)
    return out


def assignment_json(assignment: dict[TopicPartition, list[int] | tuple[int, ...]]) -> str:
    """Kafka's formatAsReassignmentJson: compact, sorted by topic and partition."""
    return json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(r), "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(assignment.items())]}, separators=(",", ":"))


def _names(parts) -> str:
    return ",".join(f"{t}-{p}" for t, p in sorted(parts))


def _plural(items) -> str:
    return "" if len(items) == 1 else "s"


async def _current(admin, topics) -> dict[TopicPartition, tuple[int, ...]]:
    infos = await admin.describe_topics(sorted(set(topics)))
    return {(name, pid): p.replicas for name, info in infos.items() for pid, p in info.partitions.items()}


# -- generate -----------------------------------------------------------------------------
async def _generate(admin, args) -> int:
    data = _read_json(args.topics_to_move_json_file)
    _check_version(data, args.topics_to_move_json_file)
    topics = data.get("topics")
    if (not isinstance(topics, list) or not topics
            or not all(isinstance(t, dict) and isinstance(t.get("topic"), str) for t in topics)):
        raise CommandError(f"{args.topics_to_move_json_file}: expected \"topics\": [{{\"topic\": NAME}}, ...]")
    try:
        brokers = [int(b) for b in args.broker_list.split(",") if b.strip()]
    except ValueError:
        raise CommandError(f"--broker-list {args.broker_list!r} is not a list of broker ids") from None
    if len(set(brokers)) != len(brokers):
        raise CommandError(f"Broker list contains duplicate entries: {args.broker_list}")
    cluster = await admin.describe_cluster()
    racks = {b.node_id: b.rack for b in cluster.brokers}
    unknown = sorted(set(brokers) - set(racks))
    if unknown:
        raise CommandError(f"Unknown broker id(s) in --broker-list: {','.join(map(str, unknown))}")
    names = list(dict.fromkeys(t["topic"] for t in topics))
    current = await _current(admin, names)
    proposed: dict[TopicPartition, tuple[int, ...]] = {}
    for name in names:
        parts = sorted(p for t, p in current if t == name)
        rf = len(current[(name, parts[0])]) if parts else 0
        if rf > len(brokers):
            raise CommandError(f"Replication factor: {rf} larger than available brokers: {len(brokers)}.")
        eligible = {b: None if args.disable_rack_aware else racks[b] for b in brokers}
        for pid, replicas in zip(parts, place_replicas(eligible, len(parts), rf, start_index=0)):
            proposed[(name, pid)] = replicas
    print(f"Current partition replica assignment\n{assignment_json(current)}\n")
    print(f"Proposed partition reassignment configuration\n{assignment_json(proposed)}")
    return 0


# -- execute ------------------------------------------------------------------------------
def move_throttles(current: dict[TopicPartition, tuple[int, ...]], proposed: dict[TopicPartition, list[int]]):
    """Kafka's calculateLeaderThrottles / calculateFollowerThrottles / calculateReassigningBrokers:
    per topic, `partition:broker` of every current replica (leader side) and of every new
    replica (follower side) of the partitions that move; and every broker involved."""
    leader: dict[str, list[str]] = {}
    follower: dict[str, list[str]] = {}
    brokers: set[int] = set()
    for (topic, pid), target in sorted(proposed.items()):
        sources = list(current.get((topic, pid), ()))
        destinations = [r for r in target if r not in sources]
        if not destinations and list(target) == sources:
            continue
        leader.setdefault(topic, []).extend(f"{pid}:{b}" for b in sources)
        follower.setdefault(topic, []).extend(f"{pid}:{b}" for b in destinations)
        brokers |= set(sources) | set(destinations)
    return ({t: ",".join(v) for t, v in leader.items()}, {t: ",".join(v) for t, v in follower.items()},
            sorted(brokers))


async def _execute(admin, args) -> int:
    proposed = parse_reassignment(_read_json(args.reassignment_json_file), args.reassignment_json_file)
    ongoing = await admin.list_partition_reassignments()
    if ongoing and not args.additional:
        raise CommandError("Cannot execute because there is an existing partition assignment.  Use --additional "
                           "to override this and create a new partition assignment in addition to the existing one. "
                           "The --additional flag can also be used to change the throttle by resubmitting the "
                           "current reassignment.")
    current = await _current(admin, [t for t, _ in proposed])
    missing = sorted(set(proposed) - set(current))
    if missing:
        raise CommandError(f"Unable to find partition: {_names(missing)}")
    print("Current partition replica assignment\n\n"
          f"{assignment_json({tp: current[tp] for tp in proposed})}\n\n"
          "Save this to use as the --reassignment-json-file option during rollback")
    if args.throttle >= 0:
        print(_VERIFY_WARNING)
        leader, follower, brokers = move_throttles(current, proposed)
        for topic in sorted(set(leader) | set(follower)):
            await admin.alter_configs((RESOURCE_TOPIC, topic), {
                _TOPIC_THROTTLES[0]: leader.get(topic), _TOPIC_THROTTLES[1]: follower.get(topic)})
        for broker in brokers:
            await admin.alter_configs((RESOURCE_BROKER, str(broker)),
                                      {name: str(args.throttle) for name in _BROKER_THROTTLES})
        print(f"The inter-broker throttle limit was set to {args.throttle} B/s")
    errors = await admin.alter_partition_reassignments(dict(proposed), timeout_ms=args.timeout)
    failed = {tp: e for tp, e in errors.items() if e is not None}
    if failed:
        raise CommandError("Error reassigning partition(s): " + "; ".join(str(e) for _, e in sorted(failed.items())))
    print(f"Successfully started partition reassignment{_plural(proposed)} for {_names(proposed)}")
    return 0


# -- verify / cancel / list -------------------------------------------------------------------
async def _verify(admin, args) -> int:
    proposed = parse_reassignment(_read_json(args.reassignment_json_file), args.reassignment_json_file)
    ongoing = await admin.list_partition_reassignments(sorted(proposed))
    current = await _current(admin, [t for t, _ in proposed])
    lines = ["Status of partition reassignment:"]
    for tp in sorted(proposed):
        name = f"{tp[0]}-{tp[1]}"
        if tp in ongoing:
            lines.append(f"Reassignment of partition {name} is still in progress.")
        elif list(current.get(tp, ())) == proposed[tp]:
            lines.append(f"Reassignment of partition {name} is completed.")
        else:
            shown = ",".join(map(str, current.get(tp, ())))
            lines.append(f"There is no active reassignment of partition {name}, but replica set is "
                         f"[{shown}] rather than [{','.join(map(str, proposed[tp]))}].")
    print("\n".join(lines))
    if not ongoing and not args.preserve_throttles:
        await _clear_throttles(admin, proposed)
    return 0


async def _clear_throttles(admin, proposed: dict[TopicPartition, list[int]]) -> None:
    cluster = await admin.describe_cluster()
    brokers = sorted({b.node_id for b in cluster.brokers} | {r for rs in proposed.values() for r in rs})
    print(f"Clearing broker-level throttles on broker{_plural(brokers)} {','.join(map(str, brokers))}")
    for broker in brokers:
        await admin.alter_configs((RESOURCE_BROKER, str(broker)), dict.fromkeys(_BROKER_THROTTLES))
    topics = sorted({t for t, _ in proposed})
    print(f"Clearing topic-level throttles on topic{_plural(topics)} {','.join(topics)}")
    for topic in topics:
        await admin.alter_configs((RESOURCE_TOPIC, topic), dict.fromkeys(_TOPIC_THROTTLES))


async def _cancel(admin, args) -> int:
    proposed = parse_reassignment(_read_json(args.reassignment_json_file), args.reassignment_json_file)
    ongoing = await admin.list_partition_reassignments(sorted(proposed))
    cancel = sorted(tp for tp in proposed if tp in ongoing)
    if cancel:
        errors = await admin.alter_partition_reassignments(dict.fromkeys(cancel))
        failed = {tp: e for tp, e in errors.items() if e is not None}
        if failed:
            raise CommandError("Error cancelling partition reassignment(s): "
                               + "; ".join(str(e) for _, e in sorted(failed.items())))
        print(f"Successfully cancelled partition reassignment{_plural(cancel)} for: {_names(cancel)}")
    else:
        print("None of the specified partition reassignments are active.")
    if not args.preserve_throttles:
        await _clear_throttles(admin, proposed)
    return 0


async def _list(admin, args) -> int:
    ongoing = await admin.list_partition_reassignments()
    if not ongoing:
        print("No partition reassignments found.")
        return 0
    print("Current partition reassignments:")
    for (topic, pid), (replicas, adding, removing) in sorted(ongoing.items()):
        print(f"{topic}-{pid}: replicas: {','.join(map(str, replicas))}. adding: {','.join(map(str, adding))}. "
              f"removing: {','.join(map(str, removing))}.")
    return 0


_ACTIONS = {"generate": _generate, "execute": _execute, "verify": _verify, "cancel": _cancel, "list": _list}
