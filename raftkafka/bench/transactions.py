"""Transactional throughput next to the idempotent producer, with confluent-kafka (librdkafka)
against a 3-node cluster of real processes (RF 3, min.insync.replicas 2).

    python -m raftkafka.bench.transactions [--seconds 10] [--sizes 1,10,100] [--value-bytes 100]

For each transaction size N: one transactional producer runs begin / N produces / commit
for `--seconds`, spreading records over the topic's partitions; reported are transactions/s
and records/s. The baseline is an idempotent producer (enable.idempotence, acks=all) that
flushes every N records, the same synchronous shape without the transaction. Prints one
JSON line per run and a table.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time

from raftkafka.bench.replication import ReplicationProcesses, wait_for_topic

__all__ = ["main"]

TOPIC = "bench-txn"
PARTITIONS = 6


def _create_topic(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        parts = admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions.values()
        if all(len(p.isrs) == 3 for p in parts):
            return
        time.sleep(0.2)
    raise RuntimeError(f"{TOPIC}: ISRs did not fill")


def _run(bootstrap: str, size: int, seconds: float, value: bytes, transactional: bool) -> dict:
    from confluent_kafka import Producer
    config = {"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all", "enable.idempotence": True}
    if transactional:
        config["transactional.id"] = f"bench-{size}-{time.monotonic_ns()}"
    producer = Producer(config)
    if transactional:
        producer.init_transactions(60)
    batches = records = 0
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        if transactional:
            producer.begin_transaction()
        for i in range(size):
            producer.produce(TOPIC, value=value, partition=(records + i) % PARTITIONS)
        if transactional:
            producer.commit_transaction(60)
        elif producer.flush(60):
            raise RuntimeError("idempotent flush timed out")
        batches += 1
        records += size
    elapsed = time.monotonic() - start
    return {"mode": "transactional" if transactional else "idempotent", "records_per_batch": size,
            "batches_per_s": round(batches / elapsed, 1), "records_per_s": round(records / elapsed, 1),
            "seconds": round(elapsed, 1)}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m raftkafka.bench.transactions", description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0, help="per run")
    ap.add_argument("--sizes", default="1,10,100", help="records per transaction")
    ap.add_argument("--value-bytes", type=int, default=100)
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    value = b"x" * args.value_bytes
    results = []
    with tempfile.TemporaryDirectory(prefix="raftkafka-txn-bench-") as base:
        procs = ReplicationProcesses(base)
        try:
            procs.format()
            for i in procs.ids:
                procs.start(i)
            wait_for_topic(procs.bootstrap, "bench-warmup")
            _create_topic(procs.bootstrap)
            for size in sizes:
                for transactional in (False, True):
                    result = _run(procs.bootstrap, size, args.seconds, value, transactional)
                    print(json.dumps(result), file=sys.stderr, flush=True)
                    results.append(result)
        finally:
            procs.stop_all()
    print(f"{'records/txn':>11}  {'mode':<13}  {'txn or flush/s':>14}  {'records/s':>10}")
    for r in results:
        print(f"{r['records_per_batch']:>11}  {r['mode']:<13}  {r['batches_per_s']:>14}  {r['records_per_s']:>10}")


if __name__ == "__main__":
    main()
