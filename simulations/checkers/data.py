"""Data-plane checker, in Jepsen's terms, over a client History plus the final reads.

Invariants (reference/simulation.md §6.3; Jepsen's Kafka/Redpanda analyses):
- lost-write: an acknowledged acks=all send is in the final read of its partition, at
  the offset it was acknowledged with (else inconsistent-offsets if it sits elsewhere). A send
  acknowledged with offset -1 (DUPLICATE_SEQUENCE_NUMBER: a resend of a batch written earlier
  whose offset the broker no longer keeps; Kafka's producer reports it so) only has to be there.
- inconsistent-offsets: one value per (partition, offset) across every observation
  (acks, polls, final reads); a polled record never vanishes or changes later.
- duplicate: a value from an idempotent producer appears at most once in the log.
- phantom-write: every value read was sent by someone.
- poll-skip / nonmonotonic-poll: an assign-mode consumer sees each partition as
  0, 1, 2, ... with no gap and no step back, across its sessions.
- nonmonotonic-send: an idempotent producer session's acknowledged sends to one
  partition get increasing offsets in the order they were sent.
- committed-offset-regressed: once a group commit is acknowledged, no later read
  of the group's committed offsets shows less for that partition.
- replicas-diverge (at quiescence): all replicas of a partition hold byte-identical
  batches below their common high watermark.
"""
from __future__ import annotations

from simulations.checkers.raft import RaftChecker
from simulations.history import History

__all__ = ["DataChecker", "batch_spans"]


class DataChecker:
    def __init__(self, report: RaftChecker, history: History, *, idempotent: set[str]):
        self.report = report  # violations go to the one list the run reports
        self.history = history
        self.idempotent = idempotent  # process names whose producers were idempotent

    def violate(self, invariant: str, message: str) -> None:
        self.report.violate(invariant, message)

    def check(self, final: dict[tuple[str, int], dict[int, bytes]]) -> None:
        sends = self.history.of("send")
        self._offsets(sends, final)
        self._lost_and_duplicates(sends, final)
        self._polls()
        self._sends_in_order(sends)
        self._committed_offsets()

    # ------------------------------------------------------------------ writes
    def _offsets(self, sends, final) -> None:
        at: dict[tuple[str, int, int], tuple[bytes, str]] = {}

        def see(tp, offset, value, where):
            key = (tp[0], tp[1], offset)
            first = at.setdefault(key, (value, where))
            if first[0] != value:
                self.violate("inconsistent-offsets", f"{tp[0]}-{tp[1]}@{offset}: {_v(first[0])} ({first[1]}) "
                             f"but {_v(value)} ({where})")

        for op in sends:
            if op.type == "ok" and op.result >= 0:
                see((op.topic, op.partition), op.result, op.value, f"ack to {op.process}")
        for op in self.history.of("poll", "ok"):
            for t, p, o, v in op.result:
                see((t, p), o, v, f"poll by {op.process} at op {op.index}")
        for tp, records in sorted(final.items()):
            for offset, value in sorted(records.items()):
                see(tp, offset, value, "final read")

    def _lost_and_duplicates(self, sends, final) -> None:
        sent = {op.value: op for op in sends}
        where: dict[bytes, list[tuple[str, int, int]]] = {}
        for tp, records in sorted(final.items()):
            for offset, value in sorted(records.items()):
                where.setdefault(value, []).append((tp[0], tp[1], offset))
                if value not in sent:
                    self.violate("phantom-write", f"{tp[0]}-{tp[1]}@{offset} holds {_v(value)}, never sent")
        for op in sends:
            tp = (op.topic, op.partition)
            if op.type == "ok" and tp in final and final[tp].get(op.result) != op.value:
                found = where.get(op.value)
                if found and op.result < 0:
                    pass  # written, at an offset the acknowledgement did not give
                elif found:
                    self.violate("inconsistent-offsets", f"{_v(op.value)} acknowledged at {tp[0]}-{tp[1]}@{op.result} "
                                 f"but read at {found}")
                else:
                    self.violate("lost-write", f"{_v(op.value)} acknowledged at {tp[0]}-{tp[1]}@{op.result} "
                                 f"(op {op.index} by {op.process}) is not in the final read")
            copies = where.get(op.value, [])
            if len(copies) > 1 and op.process in self.idempotent:
                self.violate("duplicate", f"{_v(op.value)} from idempotent {op.process} is at {copies}")

    def _sends_in_order(self, sends) -> None:
        last: dict[tuple, tuple[int, int]] = {}  # (process, session, tp) -> (offset, op index)
        for op in sends:  # ops are in invocation order
            if op.type != "ok" or op.process not in self.idempotent or op.result < 0:
                continue
            key = (op.process, getattr(op, "session", 0), op.topic, op.partition)
            prev = last.get(key)
            if prev is not None and op.result <= prev[0]:
                self.violate("nonmonotonic-send", f"{op.process}: op {op.index} acknowledged at "
                             f"{op.topic}-{op.partition}@{op.result}, after op {prev[1]} at {prev[0]}")
            last[key] = (op.result, op.index)

    # ------------------------------------------------------------------ reads
    def _polls(self) -> None:
        expected: dict[tuple[str, str, int], int] = {}  # (process, topic, partition) -> next offset
        for op in self.history.of("poll", "ok"):
            for t, p, o, _ in op.result:
                key = (op.process, t, p)
                want = expected.get(key, 0)
                if o > want:
                    self.violate("poll-skip", f"{op.process} read {t}-{p}@{o} after {want - 1} (op {op.index})")
                elif o < want:
                    self.violate("nonmonotonic-poll", f"{op.process} read {t}-{p}@{o} after {want - 1} "
                                 f"(op {op.index})")
                expected[key] = max(want, o + 1)

    def _committed_offsets(self) -> None:
        acked = sorted((op.completed_at, op.index, op) for op in self.history.of("commit", "ok"))
        reads = sorted((op.invoked_at, op.index, op) for op in self.history.of("read_committed", "ok"))
        floor: dict[tuple[str, int], tuple[int, int]] = {}  # tp -> (offset, op index) known durable
        i = 0
        for invoked_at, _, read in reads:
            while i < len(acked) and acked[i][0] < invoked_at:
                for tp, offset in acked[i][2].result.items():
                    if offset > floor.get(tp, (-1, -1))[0]:
                        floor[tp] = (offset, acked[i][1])
                i += 1
            for tp, (offset, index) in sorted(floor.items()):
                seen = read.result.get(tp)
                if seen is None or seen < offset:
                    self.violate("committed-offset-regressed",
                                 f"{tp[0]}-{tp[1]}: commit of {offset} acknowledged (op {index}), "
                                 f"later read {seen} (op {read.index})")
            for tp, seen in read.result.items():  # what a read saw was durable too
                if seen > floor.get(tp, (-1, -1))[0]:
                    floor[tp] = (seen, read.index)

    # ---------------------------------------------------------- quiescence
    def check_replicas(self, replicas: dict[tuple[str, int], dict[int, tuple[int, bytes]]]) -> None:
        """replicas: tp -> broker -> (high watermark, log bytes from offset 0)."""
        for tp, by_broker in sorted(replicas.items()):
            if len(by_broker) < 2:
                continue
            common = min(hw for hw, _ in by_broker.values())
            spans = {b: [s for s in batch_spans(data) if s[1] < common] for b, (_, data) in sorted(by_broker.items())}
            first_broker, first = next(iter(spans.items()))
            for broker, mine in spans.items():
                if [(s[0], s[2]) for s in mine] != [(s[0], s[2]) for s in first]:
                    self.violate("replicas-diverge", f"{tp[0]}-{tp[1]}: brokers {first_broker} and {broker} "
                                 f"differ below the common high watermark {common}")
                    break


def batch_spans(data: bytes) -> list[tuple[int, int, bytes]]:
    """(base offset, last offset, bytes) of each whole RecordBatch in a log's bytes."""
    out, pos = [], 0
    while pos + 27 <= len(data):
        base = int.from_bytes(data[pos:pos + 8], "big", signed=True)
        length = int.from_bytes(data[pos + 8:pos + 12], "big", signed=True)
        end = pos + 12 + length
        if length <= 0 or end > len(data):
            break
        last_delta = int.from_bytes(data[pos + 23:pos + 27], "big", signed=True)
        out.append((base, base + last_delta, bytes(data[pos:end])))
        pos = end
    return out


def _v(value: bytes | None) -> str:
    return "null" if value is None else value.decode(errors="replace")
