"""The retention checker on hand-made histories and logs: each anomaly is reported, a clean
history is not."""
from __future__ import annotations

from types import SimpleNamespace

from simulations.checkers.raft import RaftChecker
from simulations.checkers.retention import RetentionChecker
from simulations.history import History
from simulations.trace import Trace
from simulations.workloads.retention import COMPACTED, RETAINED, RETENTION_BYTES


def make():
    trace = Trace()
    raft = RaftChecker(trace, [1, 2, 3])
    return raft, History(trace), RetentionChecker(raft)


def send(history, topic, value, offset):
    history.ok(history.invoke("keyed0", "log_send", value, topic=topic, partition=0), offset)


def final(history, reads: dict[str, dict[int, bytes]], starts: dict[str, int]) -> dict:
    for topic, records in reads.items():
        history.ok(history.invoke("log-final-reader", "log_final_read", starts.get(topic, 0), topic=topic,
                                  partition=0), sorted(records.items()))
    return reads


def invariants(raft):
    return sorted({v.invariant for v in raft.violations})


async def test_compaction_may_drop_only_superseded_values():
    raft, history, checker = make()
    send(history, COMPACTED, b"k1:a", 0)
    send(history, COMPACTED, b"k2:b", 1)
    send(history, COMPACTED, b"k1:c", 2)
    checker.check(history, final(history, {COMPACTED: {1: b"k2:b", 2: b"k1:c"}}, {}), {})
    assert invariants(raft) == []
    raft, history, checker = make()
    send(history, COMPACTED, b"k1:a", 0)
    send(history, COMPACTED, b"k1:c", 2)
    checker.check(history, final(history, {COMPACTED: {0: b"k1:a"}}, {}), {})  # the latest went
    assert invariants(raft) == ["compaction-lost-latest"]


async def test_retention_keeps_what_is_above_the_log_start_and_at_least_retention_bytes():
    raft, history, checker = make()
    send(history, RETAINED, b"k1:a", 0)
    send(history, RETAINED, b"k1:b", 5)
    reads = final(history, {RETAINED: {5: b"k1:b"}}, {RETAINED: 5})
    checker.check(history, reads, {4: (5, RETENTION_BYTES), 5: (5, 10)})  # 5 started again at 5
    assert invariants(raft) == []
    checker.check(history, reads, {4: (5, RETENTION_BYTES - 1), 6: (5, RETENTION_BYTES - 1)})
    assert invariants(raft) == ["retention-beyond-config"]
    raft, history, checker = make()
    history.ok(history.invoke("trim0", "delete_records", 5, topic=RETAINED, partition=0), 5)
    send(history, RETAINED, b"k1:b", 5)
    send(history, RETAINED, b"k1:c", 6)
    checker.check(history, final(history, {RETAINED: {5: b"k1:b"}}, {RETAINED: 5}), {4: (5, 10)})
    assert invariants(raft) == ["lost-write"]  # below retention.bytes, but DeleteRecords asked for it


async def test_log_bounds_on_every_log():
    raft, _, checker = make()

    def kafka(start, hw, end, epochs=((0, 0), (3, 5))):
        log = SimpleNamespace(closed=False, log_start_offset=start, high_watermark=hw, log_end_offset=end,
                              epoch_cache=SimpleNamespace(entries=lambda: list(epochs)))
        return SimpleNamespace(log_manager=SimpleNamespace(all_logs=lambda: [(("t", 0), log)]))

    checker.observe(4, kafka(0, 5, 5))  # an epoch may start at the log end (a leader that wrote nothing yet)
    assert invariants(raft) == []
    checker.observe(4, kafka(0, 6, 5))
    checker.observe(4, kafka(7, 6, 9))
    assert invariants(raft) == ["log-bounds"] and len(raft.violations) == 2
    checker.observe(4, kafka(0, 4, 4))  # truncated below where epoch 3 began, its entry kept
    assert len(raft.violations) == 3 and "leader epoch 3 starts at 5, past the log end 4" in raft.violations[-1].message


async def test_retention_bytes_allow_for_a_truncated_tail():
    """Retention counted an uncommitted tail that a truncation (or a power loss) later took."""
    raft, history, checker = make()

    def kafka(end, size):
        log = SimpleNamespace(closed=False, log_start_offset=0, high_watermark=0, log_end_offset=end,
                              size_in_bytes=size, epoch_cache=SimpleNamespace(entries=lambda: []))
        return SimpleNamespace(log_manager=SimpleNamespace(all_logs=lambda: [((RETAINED, 0), log)]))

    checker.observe(4, kafka(20, RETENTION_BYTES + 300))
    checker.observe(4, kafka(17, RETENTION_BYTES - 200))  # the tail went
    send(history, RETAINED, b"k1:b", 5)
    reads = final(history, {RETAINED: {5: b"k1:b"}}, {RETAINED: 5})
    checker.check(history, reads, {4: (5, RETENTION_BYTES - 500)})
    assert invariants(raft) == []
    checker.check(history, reads, {4: (5, RETENTION_BYTES - 501)})
    assert invariants(raft) == ["retention-beyond-config"]
