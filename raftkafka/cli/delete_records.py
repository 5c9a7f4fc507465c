"""`python -m raftkafka delete-records`: move partitions' log start offsets up, like kafka-delete-records.

    delete-records --bootstrap-server H:P --offset-json-file F [--command-config FILE]

F is kafka-delete-records' JSON:

    {"partitions": [{"topic": "orders", "partition": 0, "offset": 100}], "version": 1}

An offset of -1 means the high watermark (everything committed). Prints each partition's
new low watermark, or its error, as Kafka's tool does (exit code 0 either way).
"""
from __future__ import annotations

import json

from raftkafka.cli.common import CommandError, add_bootstrap, add_command, open_admin, run_client
from raftkafka.client.operations import delete_records

__all__ = ["add_parser", "run", "parse_offset_json"]


def add_parser(subparsers) -> None:
    p = add_command(subparsers, "delete-records", "delete records below an offset (kafka-delete-records)")
    add_bootstrap(p)
    p.add_argument("--offset-json-file", required=True, metavar="FILE",
                   help='{"partitions": [{"topic": T, "partition": P, "offset": O}], "version": 1}')
    p.set_defaults(run=run)


def parse_offset_json(text: str) -> dict[tuple[str, int], int]:
    """The file's partitions as {(topic, partition): offset}; a clear CommandError otherwise."""
    try:
        data = json.loads(text)
    except ValueError as e:
        raise CommandError(f"--offset-json-file: not JSON ({e})") from None
    if not isinstance(data, dict):
        raise CommandError("--offset-json-file: expected a JSON object")
    if data.get("version", 1) != 1:
        raise CommandError(f"--offset-json-file: not supported version field value {data['version']!r}")
    if "partitions" not in data:
        raise CommandError("--offset-json-file: missing partitions field")
    out: dict[tuple[str, int], int] = {}
    duplicates = []
    for entry in data["partitions"] if isinstance(data["partitions"], list) else [None]:
        if not (isinstance(entry, dict) and isinstance(entry.get("topic"), str) and entry["topic"]
                and _is_int(entry.get("partition")) and _is_int(entry.get("offset"))):
            raise CommandError(f"--offset-json-file: each partition needs topic (text), partition and "
                               f"offset (integers), not {entry!r}")
        tp = (entry["topic"], entry["partition"])
        if tp in out:
            duplicates.append(f"{tp[0]}-{tp[1]}")
        out[tp] = entry["offset"]
    if duplicates:
        raise CommandError(f"Offset json file contains duplicate topic partitions: {','.join(duplicates)}")
    return out


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def run(args) -> int:
    try:
        with open(args.offset_json_file, encoding="utf-8") as f:
            offsets = parse_offset_json(f.read())
    except OSError as e:
        raise CommandError(f"cannot read {args.offset_json_file}: {e.strerror or e}") from None
    return run_client(_delete, args, offsets)


async def _delete(args, offsets: dict[tuple[str, int], int]) -> int:
    print("Executing records delete operation", flush=True)
    async with open_admin(args) as admin:
        results = await delete_records(admin.cluster, offsets)
    print("Records delete operation completed:")
    for (topic, partition), result in sorted(results.items()):
        if isinstance(result, int):
            print(f"partition: {topic}-{partition}\tlow_watermark: {result}")
        else:
            print(f"partition: {topic}-{partition}\terror: {result}")
    return 0  # as Kafka's tool: a partition's error is printed, not the exit code
