"""Failover benchmark: how long acks=all writes stall when broker processes die (kill -9).

    python -m raftkafka.bench.failover [--rounds 10] [--restart-after 1.0] [--observe 25]
                                       [--faults one,leader,controller,two,pause] [--pause 12]
                                       [--set NAME=VALUE ...] [--keep-logs DIR]
                                       [--producer-debug FILE]

3 combined nodes as OS processes (raftkafka.bench.replication.ReplicationProcesses) with the
production defaults for sessions and Raft timeouts; one topic of 6 partitions, RF=3,
min.insync.replicas=2; one idempotent confluent-kafka producer (acks=all) writes to every
partition continuously. Fault kinds, each `--rounds` times:

- one:    kill -9 one broker (rotating over the nodes);
- leader: kill -9 the broker leading the most partitions;
- survivor: kill -9 the broker leading the most partitions among those that are not the
            active controller (the controller survives: no election, no activation);
- controller: kill -9 the node that is the active controller (a broker too: nodes are combined);
- two:    kill -9 two brokers at once;
- pause:  SIGSTOP the broker leading the most partitions for `--pause` seconds (longer than
          the session), then SIGCONT: it comes back as a zombie leader; the end check shows
          whether it acknowledged anything the new leaders did not keep.

Killed nodes are restarted `--restart-after` seconds later (a supervisor's restart); the
round observes `--observe` seconds from the kill, then waits for every ISR to be full
again. The stall of a round is the longest gap with no acknowledged write after the kill,
per partition and over all partitions (the gap to the first ack after the kill included).
Prints JSON: p50/max of both per fault kind, each round's figures (and whether the killed
set held the active controller: nodes are combined, so it may die too), and the end check:
every acknowledged record consumed back exactly once, nothing duplicated.
"""
from __future__ import annotations

import argparse
import collections
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from raftkafka.bench.raft_quorum import percentile
from raftkafka.bench.replication import ReplicationProcesses

__all__ = ["main", "longest_gap"]

TOPIC = "failover"
PARTITIONS = 6
# The shipped defaults (ReplicationProcesses' own settings are shortened for tests).
DEFAULT_SETTINGS = {
    "controller.quorum.election.timeout.ms": "1000",
    "controller.quorum.fetch.timeout.ms": "2000",
    "broker.heartbeat.interval.ms": "2000",
    "broker.session.timeout.ms": "9000",
}
PRODUCER_DEBUG = "metadata,broker,topic,msg,protocol"
DEFAULT_STATIC = {"replica.lag.time.max.ms": "30000", "replica.fetch.backoff.ms": "1000",
                  "replica.fetch.wait.max.ms": "500"}


def longest_gap(ack_times: list[float], start: float, end: float) -> float:
    """Longest stretch in [start, end] with no ack (sorted times; start counts as an ack)."""
    last, gap = start, 0.0
    for t in ack_times:
        if t <= start:
            continue
        if t > end:
            break
        gap = max(gap, t - last)
        last = t
    return max(gap, end - last)


class Writer:
    """One idempotent acks=all producer writing `rate` records/s spread over every partition."""

    def __init__(self, bootstrap: str, rate: float, debug_log: str | None = None):
        from confluent_kafka import Producer
        config = {
            "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
            "linger.ms": 2, "message.timeout.ms": 300_000, "retry.backoff.ms": 50,
            "retry.backoff.max.ms": 200, "topic.metadata.refresh.interval.ms": 1000}
        if debug_log is not None:
            config.update(debug=PRODUCER_DEBUG, logger=_file_logger(debug_log))
        self.producer = Producer(config)
        self.rate = rate
        self.acks: dict[int, list[float]] = collections.defaultdict(list)
        self.acked: set[bytes] = set()
        self.errors: collections.Counter = collections.Counter()
        self.sent = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _done(self, err, msg) -> None:
        if err is not None:
            self.errors[str(err.name())] += 1
            return
        with self._lock:
            self.acks[msg.partition()].append(time.monotonic())
            self.acked.add(msg.value())

    def _run(self) -> None:
        interval = 1.0 / self.rate
        nxt = time.monotonic()
        while not self._stop.is_set():
            value = f"{self.sent % PARTITIONS}:{self.sent}".encode()
            try:
                self.producer.produce(TOPIC, value, partition=self.sent % PARTITIONS, on_delivery=self._done)
                self.sent += 1
            except BufferError:
                pass
            self.producer.poll(0)
            nxt += interval
            pause = nxt - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            else:
                nxt = time.monotonic()
        self.producer.flush(120)

    def times(self, partition: int) -> list[float]:
        with self._lock:
            return list(self.acks[partition])

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(180)


def _file_logger(path: str) -> logging.Logger:
    """librdkafka's log lines (served from poll) with wall-clock times, to match the node logs."""
    logger = logging.getLogger("failover.producer")
    handler = logging.FileHandler(path, mode="w")
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    return logger


def _admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": bootstrap})


def _create_topic(bootstrap: str) -> None:
    from confluent_kafka.admin import NewTopic
    admin = _admin(bootstrap)
    deadline = time.monotonic() + 60
    while True:
        try:
            admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(10)
            return
        except Exception as exc:  # noqa: BLE001 - brokers still starting, or already created
            if "already exists" in str(exc) or "TOPIC_ALREADY_EXISTS" in str(exc):
                return
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


def _partitions(bootstrap: str):
    md = _admin(bootstrap).list_topics(TOPIC, timeout=5).topics.get(TOPIC)
    return {} if md is None or md.error is not None else md.partitions


def _wait_full_isr(bootstrap: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            parts = _partitions(bootstrap)
            if len(parts) == PARTITIONS and all(len(p.isrs) == 3 and p.leader >= 0 for p in parts.values()):
                return
        except Exception:  # noqa: BLE001 - a node is still starting
            pass
        time.sleep(0.3)
    raise TimeoutError("ISRs did not become full again")


def _active_controller(procs: ReplicationProcesses) -> int | None:
    bootstrap = ",".join(f"127.0.0.1:{p}" for p in procs.controller_ports.values())
    out = subprocess.run([sys.executable, "-m", "raftkafka", "quorum", "describe", "--bootstrap-controller",
                          bootstrap, "--json", "--timeout", "5"], capture_output=True, text=True)
    try:
        return json.loads(out.stdout)["leader_id"]
    except (ValueError, KeyError):
        return None


def _victims(kind: str, round_no: int, procs: ReplicationProcesses, controller: int | None) -> tuple[int, ...]:
    ids = procs.ids
    if kind == "controller" and controller is not None:
        return (controller,)
    if kind == "one":
        return (ids[round_no % len(ids)],)
    if kind == "two":
        first = round_no % len(ids)
        return (ids[first], ids[(first + 1) % len(ids)])
    leaders = collections.Counter(p.leader for p in _partitions(procs.bootstrap).values())
    if kind == "survivor":
        others = [i for i in ids if i != controller]
        return (max(others, key=lambda i: (leaders[i], -i)),)
    return (leaders.most_common(1)[0][0],)


def _run_round(procs, writer: Writer, kind: str, round_no: int, args) -> dict:
    _wait_full_isr(procs.bootstrap)
    time.sleep(1.0)  # let the writer run steadily before the fault
    controller = _active_controller(procs)
    victims = _victims(kind, round_no, procs, controller)
    t_kill, wall_kill = time.monotonic(), time.time()
    if kind == "pause":
        for v in victims:
            procs.signal(v, signal.SIGSTOP)
        time.sleep(args.pause)
        for v in victims:
            procs.signal(v, signal.SIGCONT)
    else:
        for v in victims:
            procs.kill(v)
        time.sleep(args.restart_after)
        for v in victims:
            procs.start(v)
    end = t_kill + args.observe
    time.sleep(max(0.0, end - time.monotonic()))
    per_partition = [longest_gap(writer.times(p), t_kill, end) for p in range(PARTITIONS)]
    overall = longest_gap(sorted(t for p in range(PARTITIONS) for t in writer.times(p)), t_kill, end)
    return {"kind": kind, "at": time.strftime("%H:%M:%S", time.localtime(wall_kill)) + f".{int(wall_kill % 1 * 1000):03d}",
            "killed": list(victims), "active_controller": controller,
            "controller_killed": controller in victims,
            "max_partition_gap_s": round(max(per_partition), 3), "overall_gap_s": round(overall, 3),
            "partition_gaps_s": [round(g, 3) for g in per_partition]}


def _verify(bootstrap: str, acked: set[bytes]) -> dict:
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "failover-verify",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    seen: collections.Counter = collections.Counter()
    idle_since = time.monotonic()
    while time.monotonic() - idle_since < 10:
        msgs = consumer.consume(10_000, 1.0)
        for m in msgs:
            if m.error() is None:
                seen[m.value()] += 1
        if msgs:
            idle_since = time.monotonic()
    consumer.close()
    return {"acknowledged": len(acked), "consumed": sum(seen.values()),
            "lost": len(acked - set(seen)), "duplicated": sum(1 for c in seen.values() if c > 1)}


def _summary(rounds: list[dict]) -> dict:
    out = {}
    for kind in dict.fromkeys(r["kind"] for r in rounds):
        rs = [r for r in rounds if r["kind"] == kind]
        part = sorted(r["max_partition_gap_s"] for r in rs)
        over = sorted(r["overall_gap_s"] for r in rs)
        out[kind] = {"rounds": len(rs),
                     "partition_gap_p50_s": round(percentile(part, 50), 3), "partition_gap_max_s": max(part),
                     "overall_gap_p50_s": round(percentile(over, 50), 3), "overall_gap_max_s": max(over),
                     "rounds_with_controller_killed": sum(r["controller_killed"] for r in rs)}
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--restart-after", type=float, default=1.0, help="seconds before a killed node restarts")
    ap.add_argument("--observe", type=float, default=25.0, help="seconds observed after each kill")
    ap.add_argument("--rate", type=float, default=600.0, help="records/s over all partitions")
    ap.add_argument("--faults", default="one,leader,two,pause")
    ap.add_argument("--pause", type=float, default=12.0, help="seconds a paused leader stays stopped")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="a node setting")
    ap.add_argument("--keep-logs", metavar="DIR", help="copy the nodes' logs (node<i>.log) here at the end")
    ap.add_argument("--producer-debug", metavar="FILE",
                    help=f"write the producer's librdkafka debug log ({PRODUCER_DEBUG}) to FILE")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    overrides = dict(s.partition("=")[::2] for s in args.set)
    settings = {**DEFAULT_SETTINGS, **overrides}
    # Passed as static too: ReplicationProcesses' own static settings (shortened for tests) win
    # over `settings`.
    static = {**DEFAULT_STATIC, **{k: v for k, v in overrides.items() if k in DEFAULT_STATIC}}
    rounds: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="raftkafka-failover-") as base:
        procs = ReplicationProcesses(base, settings=settings, static=static)
        try:
            procs.format()
            for i in procs.ids:
                procs.start(i)
            _create_topic(procs.bootstrap)
            _wait_full_isr(procs.bootstrap)
            writer = Writer(procs.bootstrap, args.rate, args.producer_debug)
            writer.thread.start()
            for kind in args.faults.split(","):
                for n in range(args.rounds):
                    r = _run_round(procs, writer, kind, n, args)
                    print(json.dumps(r), file=sys.stderr, flush=True)
                    rounds.append(r)
            _wait_full_isr(procs.bootstrap)
            writer.stop()
            check = _verify(procs.bootstrap, writer.acked)
            check["send_errors"] = dict(writer.errors)
        finally:
            procs.stop_all()
            if args.keep_logs:
                os.makedirs(args.keep_logs, exist_ok=True)
                for i in procs.ids:
                    shutil.copy(os.path.join(base, f"node{i}.log"), args.keep_logs)
    print(json.dumps({"settings": procs.settings | procs.static, "summary": _summary(rounds),
                      "check": check, "rounds": rounds}, indent=2))


if __name__ == "__main__":
    main()
