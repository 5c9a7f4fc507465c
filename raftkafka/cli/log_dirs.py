"""`python -m raftkafka log-dirs --describe`: each broker's log dirs with partition sizes and lag,
like kafka-log-dirs.

    log-dirs --describe --bootstrap-server H:P [--broker-list 1,2] [--topic-list a,b]

Prints Kafka's two progress lines and then its JSON: {"version": 1, "brokers": [{"broker":
N, "logDirs": [{"logDir": D, "error": null, "partitions": [{"partition": "t-0", "size":
bytes, "offsetLag": n, "isFuture": false}]}]}]}.
"""
from __future__ import annotations

import json

from raftkafka.cli.common import CommandError, add_bootstrap, add_command, open_admin, run_client
from raftkafka.client.operations import describe_log_dirs

__all__ = ["add_parser", "run"]


def add_parser(subparsers) -> None:
    p = add_command(subparsers, "log-dirs", "describe brokers' log dirs: sizes and lag (kafka-log-dirs)")
    add_bootstrap(p)
    p.add_argument("--describe", action="store_true", required=True, help="describe the log dirs")
    p.add_argument("--broker-list", metavar="1,2", help="brokers to ask (default: every broker)")
    p.add_argument("--topic-list", metavar="a,b", help="topics to show (default: every topic)")
    p.set_defaults(run=run)


def _ids(text: str) -> list[int]:
    try:
        return sorted({int(i) for i in text.split(",") if i.strip()})
    except ValueError:
        raise CommandError(f"--broker-list {text!r}: expected broker ids like 1,2,3") from None


def run(args) -> int:
    brokers = None if args.broker_list is None else _ids(args.broker_list)
    topics = None if args.topic_list is None else {t.strip() for t in args.topic_list.split(",") if t.strip()}
    return run_client(_describe, args, brokers, topics)


async def _describe(args, brokers: list[int] | None, topics: set[str] | None) -> int:
    async with open_admin(args) as admin:
        known = sorted(b.node_id for b in (await admin.describe_cluster()).brokers)
        missing = sorted(set(brokers or ()) - set(known))
        if missing:
            raise CommandError(f"The given brokers do not exist from --broker-list: "
                               f"{','.join(map(str, missing))}. Current existent brokers: "
                               f"{','.join(map(str, known))}")
        brokers = known if brokers is None else brokers
        print("Querying brokers for log directories information", flush=True)
        answers = {b: await describe_log_dirs(admin.cluster, b) for b in brokers}
    print(f"Received log directory information from brokers {','.join(map(str, brokers))}")
    print(json.dumps({"version": 1, "brokers": [
        {"broker": b, "logDirs": [
            {"logDir": d.path, "error": None if d.error is None else str(d.error), "partitions": [
                {"partition": f"{t}-{p}", "size": size, "offsetLag": lag, "isFuture": future}
                for (t, p), (size, lag, future) in sorted(d.partitions.items()) if topics is None or t in topics]}
            for d in dirs]}
        for b, dirs in answers.items()]}, separators=(",", ":")))
    return 0
