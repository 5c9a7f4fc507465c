"""`python -m raftkafka transactions`: inspect transactions and abort hanging ones, like
kafka-transactions.

    transactions --bootstrap-server H:P list [--state S ...] [--producer-id N ...] [--duration-ms N]
    transactions --bootstrap-server H:P describe --transactional-id ID
    transactions --bootstrap-server H:P describe-producers --topic T --partition P
    transactions --bootstrap-server H:P find-hanging [--topic T] [--max-transaction-timeout MINUTES]
    transactions --bootstrap-server H:P abort --topic T --partition P
                 (--start-offset O | --producer-id N --producer-epoch E --coordinator-epoch C)

A hanging transaction is one a partition still holds open (its last stable offset stays
behind it, so read_committed consumers stop there) while no coordinator knows it as
ongoing there; `find-hanging` lists partitions' open transactions older than the maximum
transaction timeout (15 minutes, Kafka's transaction.max.timeout.ms) that their
coordinator does not list as ongoing, and `abort` writes an ABORT marker for one.
Output columns are tab-separated, with Kafka's headers.
"""
from __future__ import annotations

from raftkafka.cli.common import CommandError, add_bootstrap, add_command, open_admin, run_client
from raftkafka.client.transactions_admin import (
    abort_transaction, describe_producers, describe_transaction, list_transactions,
)

__all__ = ["add_parser", "run"]

_DEFAULT_MAX_TIMEOUT_MIN = 15


def add_parser(subparsers) -> None:
    p = add_command(subparsers, "transactions", "list, describe and abort transactions (kafka-transactions)")
    add_bootstrap(p)
    commands = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = commands.add_parser("list", help="transactions of every coordinator")
    listing.add_argument("--state", action="append", default=[], help="only in this state (e.g. Ongoing)")
    listing.add_argument("--producer-id", action="append", type=int, default=[], help="only of this producer id")
    listing.add_argument("--duration-ms", type=int, default=-1, help="only open at least this long")
    describe = commands.add_parser("describe", help="one transactional id's state")
    describe.add_argument("--transactional-id", required=True)
    producers = commands.add_parser("describe-producers", help="a partition's producers")
    producers.add_argument("--topic", required=True)
    producers.add_argument("--partition", type=int, required=True)
    hanging = commands.add_parser("find-hanging", help="open transactions no coordinator knows")
    hanging.add_argument("--topic", help="only this topic (default: all)")
    hanging.add_argument("--max-transaction-timeout", type=int, default=_DEFAULT_MAX_TIMEOUT_MIN, metavar="MINUTES")
    abort = commands.add_parser("abort", help="write an ABORT marker for a hanging transaction")
    abort.add_argument("--topic", required=True)
    abort.add_argument("--partition", type=int, required=True)
    abort.add_argument("--start-offset", type=int, help="the open transaction's first offset (describe-producers)")
    abort.add_argument("--producer-id", type=int)
    abort.add_argument("--producer-epoch", type=int)
    abort.add_argument("--coordinator-epoch", type=int)
    p.set_defaults(run=run)


def run(args) -> int:
    if args.action == "abort":
        explicit = (args.producer_id, args.producer_epoch, args.coordinator_epoch)
        if (args.start_offset is None) == all(v is None for v in explicit):
            raise CommandError("abort needs --start-offset, or --producer-id, --producer-epoch and --coordinator-epoch")
        if args.start_offset is None and any(v is None for v in explicit):
            raise CommandError("--producer-id, --producer-epoch and --coordinator-epoch go together")
    return run_client(_main, args)


def _row(*cells) -> None:
    print("\t".join(str(c) for c in cells))


async def _main(args) -> int:
    async with open_admin(args) as admin:
        if args.action == "list":
            found = await list_transactions(admin, states=args.state, producer_ids=args.producer_id,
                                            duration_ms=args.duration_ms)
            _row("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
            for t in found:
                _row(t.transactional_id, t.coordinator, t.producer_id, t.state)
        elif args.action == "describe":
            t = await describe_transaction(admin, args.transactional_id)
            now = int(admin.env.wall_ms())
            duration = now - t.start_time_ms if t.start_time_ms >= 0 else "None"
            _row("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                 "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs", "TopicPartitions")
            _row(t.coordinator, t.transactional_id, t.producer_id, t.producer_epoch, t.state, t.timeout_ms,
                 t.start_time_ms if t.start_time_ms >= 0 else "None", duration,
                 ",".join(f"{topic}-{p}" for topic, p in t.partitions))
        elif args.action == "describe-producers":
            found = await describe_producers(admin, args.topic, args.partition)
            _row("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                 "CurrentTransactionStartOffset")
            for p in found:
                _row(p.producer_id, p.producer_epoch, p.coordinator_epoch, p.last_sequence, p.last_timestamp,
                     p.current_txn_start_offset if p.current_txn_start_offset >= 0 else "None")
        elif args.action == "find-hanging":
            await _find_hanging(admin, args)
        else:
            await _abort(admin, args)
    return 0


async def _find_hanging(admin, args) -> None:
    now = int(admin.env.wall_ms())
    limit_ms = args.max_transaction_timeout * 60_000
    topics = await admin.list_topics(include_internal=False)
    names = [args.topic] if args.topic else sorted(topics)
    _row("Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset", "LastTimestamp",
         "Duration(min)")
    for name in names:
        info = topics.get(name)
        if info is None:
            raise CommandError(f"topic {name!r} does not exist")
        for partition in sorted(info.partitions):
            for p in await describe_producers(admin, name, partition):
                if p.current_txn_start_offset < 0 or now - p.last_timestamp < limit_ms:
                    continue
                ongoing = await list_transactions(admin, states=["Ongoing"], producer_ids=[p.producer_id])
                if ongoing:
                    continue  # its coordinator still knows it: it will end (or time out) there
                _row(name, partition, p.producer_id, p.producer_epoch, p.coordinator_epoch,
                     p.current_txn_start_offset, p.last_timestamp, (now - p.last_timestamp) // 60_000)


async def _abort(admin, args) -> None:
    if args.start_offset is not None:
        matching = [p for p in await describe_producers(admin, args.topic, args.partition)
                    if p.current_txn_start_offset == args.start_offset]
        if not matching:
            raise CommandError(f"no open transaction starts at offset {args.start_offset} of "
                               f"{args.topic}-{args.partition}")
        p = matching[0]
        pid, epoch, coordinator_epoch = p.producer_id, p.producer_epoch, p.coordinator_epoch
    else:
        pid, epoch, coordinator_epoch = args.producer_id, args.producer_epoch, args.coordinator_epoch
    await abort_transaction(admin, args.topic, args.partition, pid, epoch, coordinator_epoch)
    print(f"aborted the transaction of producer {pid} (epoch {epoch}) on {args.topic}-{args.partition}")
