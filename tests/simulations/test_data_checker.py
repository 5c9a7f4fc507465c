"""The data-plane and metadata checkers on hand-made histories: each anomaly is reported,
a clean history is not."""
from __future__ import annotations

import dataclasses

from metadata.image import EMPTY_IMAGE
from simulations.checkers.data import DataChecker, batch_spans
from simulations.checkers.metadata import MetadataChecker
from simulations.checkers.raft import RaftChecker
from simulations.history import History
from simulations.trace import Trace

TP = ("t", 0)


def make():
    trace = Trace()
    raft = RaftChecker(trace, [1, 2, 3])
    history = History(trace)
    return raft, history, DataChecker(raft, history, idempotent={"p"})


def send(history, value, offset=None, process="p", kind="ok"):
    op = history.invoke(process, "send", value, topic=TP[0], partition=TP[1])
    op.session = 1
    if kind == "ok":
        history.ok(op, offset)
    else:
        history.info(op, "timeout")
    return op


def poll(history, *offsets_values, process="c"):
    op = history.invoke(process, "poll")
    history.ok(op, [(TP[0], TP[1], o, v) for o, v in offsets_values])


def invariants(raft):
    return {v.invariant for v in raft.violations}


async def test_clean_history_passes():
    raft, h, checker = make()
    send(h, b"a", 0)
    send(h, b"b", 1)
    send(h, b"c", kind="info")  # unknown outcome: may or may not be there
    poll(h, (0, b"a"), (1, b"b"))
    checker.check({TP: {0: b"a", 1: b"b", 2: b"c"}})
    assert raft.violations == []


async def test_lost_write_and_inconsistent_offsets():
    raft, h, checker = make()
    send(h, b"a", 0)
    send(h, b"b", 1)
    checker.check({TP: {0: b"a"}})
    assert invariants(raft) == {"lost-write"}
    raft, h, checker = make()
    send(h, b"a", 0)
    send(h, b"b", 1)
    checker.check({TP: {0: b"a", 1: b"x", 2: b"b"}})
    assert {"inconsistent-offsets", "phantom-write"} <= invariants(raft)


async def test_a_send_acknowledged_without_an_offset_only_has_to_be_there():
    # DUPLICATE_SEQUENCE_NUMBER: a resend of a batch written earlier, its offset no longer known.
    raft, h, checker = make()
    send(h, b"a", 0)
    send(h, b"b", -1)
    send(h, b"c", -1)
    send(h, b"d", 3)
    checker.check({TP: {0: b"a", 1: b"b", 2: b"c", 3: b"d"}})
    assert raft.violations == []
    raft, h, checker = make()
    send(h, b"a", 0)
    send(h, b"b", -1)
    checker.check({TP: {0: b"a"}})
    assert invariants(raft) == {"lost-write"}


async def test_duplicates_only_count_for_idempotent_producers():
    raft, h, checker = make()
    send(h, b"a", 0)
    checker.check({TP: {0: b"a", 1: b"a"}})
    assert invariants(raft) == {"duplicate"}
    raft, h, checker = make()
    send(h, b"a", 0, process="plain")
    checker.check({TP: {0: b"a", 1: b"a"}})
    assert raft.violations == []


async def test_poll_skip_and_nonmonotonic_poll():
    raft, h, checker = make()
    send(h, b"a", 0)
    send(h, b"b", 1)
    send(h, b"c", 2)
    poll(h, (0, b"a"), (2, b"c"))
    checker.check({TP: {0: b"a", 1: b"b", 2: b"c"}})
    assert invariants(raft) == {"poll-skip"}
    raft, h, checker = make()
    send(h, b"a", 0)
    send(h, b"b", 1)
    poll(h, (0, b"a"), (1, b"b"))
    poll(h, (0, b"a"))
    checker.check({TP: {0: b"a", 1: b"b"}})
    assert invariants(raft) == {"nonmonotonic-poll"}


async def test_nonmonotonic_send():
    raft, h, checker = make()
    send(h, b"a", 1)
    send(h, b"b", 0)
    checker.check({TP: {0: b"b", 1: b"a"}})
    assert invariants(raft) == {"nonmonotonic-send"}


async def test_committed_offsets_never_go_back():
    raft, h, checker = make()
    commit = h.invoke("m", "commit", {TP: 5})
    h.ok(commit, {TP: 5})
    read = h.invoke("r", "read_committed")
    h.ok(read, {TP: 5})
    read = h.invoke("r", "read_committed")
    h.ok(read, {TP: 3})
    checker.check({})
    assert invariants(raft) == {"committed-offset-regressed"}


def batch(base: int, count: int, payload: bytes) -> bytes:
    body = bytes(4 + 1 + 4 + 2) + (count - 1).to_bytes(4, "big") + payload
    return base.to_bytes(8, "big") + len(body).to_bytes(4, "big") + body


async def test_replicas_must_match_below_the_common_high_watermark():
    raft, h, checker = make()
    leader = batch(0, 2, b"xx") + batch(2, 1, b"yy")
    assert [(s[0], s[1]) for s in batch_spans(leader)] == [(0, 1), (2, 2)]
    checker.check_replicas({TP: {1: (3, leader), 2: (2, batch(0, 2, b"xx") + batch(2, 1, b"zz"))}})
    assert raft.violations == []  # they differ only above the common HW (2)
    checker.check_replicas({TP: {1: (3, leader), 2: (3, batch(0, 2, b"xx") + batch(2, 1, b"zz"))}})
    assert invariants(raft) == {"replicas-diverge"}


async def test_metadata_checker_flags_uncommitted_and_different_images():
    trace = Trace()
    raft = RaftChecker(trace, [1])
    checker = MetadataChecker(raft)
    checker.observe(4, 1, "broker", dataclasses.replace(EMPTY_IMAGE, offset=3), [])
    assert {v.invariant for v in raft.violations} == {"UncommittedMetadataPublished"}
    raft.on_apply(1, 0, 1, b"leader-change-payload-is-not-decoded-here", True)
    # A control entry at 0: the reference image there is the empty image at offset 0.
    checker.observe(5, 1, "broker", dataclasses.replace(EMPTY_IMAGE, offset=0, epoch=1), [])
    assert len(raft.violations) == 1
    checker.observe(6, 1, "broker", dataclasses.replace(EMPTY_IMAGE, offset=0, epoch=1, next_producer_id=7), [])
    assert raft.violations[-1].invariant == "MetadataImageMatchesLog"
