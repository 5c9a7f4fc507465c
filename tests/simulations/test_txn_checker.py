"""The transactional checker on hand-made histories: each anomaly (G1a, G1b, lost,
non-atomic, duplicate, order, offsets) is reported; a clean history is not."""
from __future__ import annotations

import trio

from simulations.checkers.raft import RaftChecker
from simulations.checkers.transactions import TransactionChecker
from simulations.history import History
from simulations.trace import Trace


def make():
    trace = Trace()
    return RaftChecker(trace, [1, 2, 3]), History(trace)


def txn(history, process, n, values, outcome, commit_at=None):
    op = history.invoke(process, "txn", {"n": n, "values": values, "commit": outcome != "fail"})
    if commit_at is not None:
        op.value["commit_at"] = commit_at
    {"ok": history.ok, "fail": lambda o: history.fail(o, "aborted"),
     "info": lambda o: history.info(o, "timeout")}[outcome](op)
    return op


def finals(history, committed, uncommitted, offsets):
    for isolation, records in (("read_committed", committed), ("read_uncommitted", uncommitted)):
        history.ok(history.invoke("txn-final", "txn_final", isolation), records)
    history.ok(history.invoke("txn-final", "txn_offsets", "g"), offsets)


def poll(history, isolation, *records):
    history.ok(history.invoke(f"txn-{isolation}", "txn_poll", isolation), list(records))


def found(raft, history):
    TransactionChecker(raft, history).check()
    return {v.invariant for v in raft.violations}


def clean_history():
    raft, history = make()
    txn(history, "txn-producer0", 1, [(0, b"a"), (1, b"b")], "ok", commit_at=0.0)
    txn(history, "txn-producer0", 2, [(0, b"x")], "fail")
    txn(history, "txn-producer1", 1, [(1, b"c")], "info", commit_at=0.0)
    poll(history, "read_committed", (0, 0, b"a"))
    poll(history, "read_uncommitted", (0, 1, b"x"))
    return raft, history


async def test_clean_history_passes():
    raft, history = clean_history()
    finals(history, {0: [(0, b"a")], 1: [(0, b"b"), (1, b"c")]},
           {0: [(0, b"a"), (1, b"x")], 1: [(0, b"b"), (1, b"c")]}, {0: 1, 1: 1})
    assert found(raft, history) == set()


async def test_aborted_read_and_intermediate_read():
    raft, history = clean_history()
    poll(history, "read_committed", (0, 1, b"x"))  # G1a: of the aborted transaction
    late = txn(history, "txn-producer1", 2, [(1, b"d")], "ok", commit_at=trio.current_time() + 5)
    poll(history, "read_committed", (1, 2, b"d"))  # G1b: before its commit was asked for
    assert late.value["commit_at"] > history.ops[-1].completed_at
    finals(history, {0: [(0, b"a")], 1: [(0, b"b"), (1, b"c"), (2, b"d")]},
           {0: [(0, b"a"), (1, b"x")], 1: [(0, b"b"), (1, b"c"), (2, b"d")]}, {0: 1, 1: 2})
    assert found(raft, history) == {"G1a", "G1b"}


async def test_lost_non_atomic_duplicate_and_out_of_order_writes():
    raft, history = clean_history()
    txn(history, "txn-producer0", 3, [(1, b"e"), (1, b"f")], "ok", commit_at=0.0)
    txn(history, "txn-producer1", 2, [(0, b"g"), (1, b"h")], "info", commit_at=0.0)
    finals(history, {0: [(0, b"a"), (1, b"a"), (2, b"g")], 1: [(0, b"c"), (1, b"f"), (2, b"e")]},
           {}, {0: 3, 1: 2})
    assert found(raft, history) == {"lost-committed-write", "non-atomic-transaction", "duplicate-committed-write",
                                    "committed-write-order"}


async def test_offsets_apply_if_and_only_if_their_transaction_committed():
    raft, history = clean_history()
    finals(history, {0: [(0, b"a")], 1: [(0, b"b"), (1, b"c")]}, {}, {0: 2})  # 2 was aborted; 1's lost
    assert found(raft, history) == {"txn-offsets"}
