"""`python -m raftkafka leader-election`: elect preferred or unclean leaders, like kafka-leader-election.

    leader-election --bootstrap-server H:P --election-type PREFERRED|UNCLEAN
                    (--all-topic-partitions | --topic T --partition N | --path-to-json-file F)

The JSON file is Kafka's: `{"partitions": [{"topic": "t", "partition": 0}, ...]}`. Output as
kafka-leader-election: the partitions elected, those whose valid leader was already in place,
and one line per failure (then exit code 1).
"""
from __future__ import annotations

import json

from raftkafka.cli.common import CommandError, add_bootstrap, add_command, open_admin, run_client
from wire.error_codes import ErrorCode

__all__ = ["add_parser", "run", "parse_partitions_json"]

_TYPES = {"PREFERRED": 0, "UNCLEAN": 1}


def add_parser(subparsers) -> None:
    p = add_command(subparsers, "leader-election", "elect preferred or unclean leaders (kafka-leader-election)")
    add_bootstrap(p, config_flag="--admin.config")
    p.add_argument("--election-type", help="PREFERRED or UNCLEAN")
    p.add_argument("--all-topic-partitions", action="store_true", help="every partition of every topic")
    p.add_argument("--topic", help="the topic of --partition")
    p.add_argument("--partition", type=int, help="the partition of --topic")
    p.add_argument("--path-to-json-file", metavar="FILE", help='{"partitions": [{"topic": T, "partition": N}]}')
    p.set_defaults(run=run)


def run(args) -> int:
    if not args.election_type:
        raise CommandError("Missing required option(s): election-type")
    if args.election_type.upper() not in _TYPES:
        raise CommandError(f"Unknown election type {args.election_type!r}: PREFERRED or UNCLEAN")
    chosen = [bool(args.all_topic_partitions), args.topic is not None, args.path_to_json_file is not None]
    if sum(chosen) != 1:
        raise CommandError("One and only one of the following options is required: "
                           "all-topic-partitions, topic, path-to-json-file")
    if args.topic is not None and args.partition is None:
        raise CommandError("Missing required option(s): partition")
    if args.partition is not None and args.topic is None:
        raise CommandError("Option partition is only allowed if topic is used")
    return run_client(_main, args)


def parse_partitions_json(text: str, path: str) -> list[tuple[str, int]]:
    try:
        data = json.loads(text)
    except ValueError as e:
        raise CommandError(f"{path} is not valid JSON: {e}") from None
    entries = data.get("partitions") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise CommandError(f"{path}: expected {{\"partitions\": [{{\"topic\": T, \"partition\": N}}, ...]}}")
    out = []
    for e in entries:
        if not isinstance(e, dict) or not isinstance(e.get("topic"), str) or type(e.get("partition")) is not int:
            raise CommandError(f"{path}: each entry needs \"topic\" and \"partition\": {json.dumps(e)}")
        out.append((e["topic"], e["partition"]))
    duplicates = sorted({tp for tp in out if out.count(tp) > 1})
    if duplicates:
        raise CommandError("Replica election data contains duplicate partitions: "
                           + ",".join(f"{t}-{p}" for t, p in duplicates))
    return out


def _partitions(args) -> list[tuple[str, int]] | None:
    if args.all_topic_partitions:
        return None
    if args.topic is not None:
        return [(args.topic, args.partition)]
    try:
        with open(args.path_to_json_file, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise CommandError(f"cannot read {args.path_to_json_file}: {e.strerror or e}") from None
    return parse_partitions_json(text, args.path_to_json_file)


def _exception_name(code: int) -> str:
    return "".join(w.capitalize() for w in ErrorCode.of(code).name.split("_")) + "Exception"


async def _main(args) -> int:
    kind = args.election_type.upper()
    partitions = _partitions(args)
    async with open_admin(args) as admin:
        results = await admin.elect_leaders(_TYPES[kind], partitions)
    succeeded = sorted(tp for tp, e in results.items() if e is None)
    noop = sorted(tp for tp, e in results.items() if e is not None and e.code == ErrorCode.ELECTION_NOT_NEEDED)
    failed = sorted(((tp, e) for tp, e in results.items() if e is not None and e.code != ErrorCode.ELECTION_NOT_NEEDED),
                    key=lambda item: item[0])
    if succeeded:
        print(f"Successfully completed leader election ({kind}) for partitions "
              + ", ".join(f"{t}-{p}" for t, p in succeeded))
    if noop:
        print("Valid replica already elected for partitions " + ", ".join(f"{t}-{p}" for t, p in noop))
    for (t, p), e in failed:
        print(f"Error completing leader election ({kind}) for partition: {t}-{p}: "
              f"org.apache.kafka.common.errors.{_exception_name(e.code)}: {e}")
    if failed:
        raise CommandError(f"{len(failed)} replica(s) could not be elected")
    return 0
