"""The Raft driver: Actions carried out in order, proposals batched and resolved."""
from __future__ import annotations

import pytest
import trio

from raft.actions import Actions
from raft.driver import ProposalFailed, RaftDriver
from raft.entry import Entry
from raft.errors import NotLeaderError
from raft.log import RaftLog
from raft.node_storage import NodeStorage
from raft.quorum_state import Role
from raft.state import ElectionState
from raft.status import QuorumStatus
from storage.env import RealEnv
from storage.memfs import MemFileSystem
from storage.raft_log import MAX_ENTRY_BYTES


class Recorder:
    def __init__(self):
        self.events: list = []


class FakeCore:
    """Returns scripted Actions and records every call the driver makes."""

    def __init__(self, rec: Recorder, *, leader: bool = True):
        self.rec = rec
        self.leader = leader
        self.log = RaftLog()
        self.epoch = 3
        self.script: list[Actions] = []  # returned by handle()
        self.flushed_reply = Actions(deadline=float("inf"))

    def tick(self, now):
        self.rec.events.append("tick")
        return Actions(deadline=float("inf"))

    def handle(self, src, msg, now):
        self.rec.events.append(("handle", src, msg))
        return self.script.pop(0) if self.script else Actions(deadline=float("inf"))

    def append(self, payloads, now):
        if not self.leader:
            raise NotLeaderError(2, self.epoch)
        start = self.log.end_offset
        entries = [Entry(start + i, self.epoch, p) for i, p in enumerate(payloads)]
        self.log.append(entries)
        self.rec.events.append(("core.append", len(payloads)))
        return entries[-1].offset, Actions(append=entries, deadline=float("inf"))

    def snapshot_bytes(self, end_offset, data):
        return data

    def on_flushed(self, end, now):
        self.rec.events.append(("on_flushed", end))
        a, self.flushed_reply = self.flushed_reply, Actions(deadline=float("inf"))
        return a

    def snapshot_written(self, sid, data, now):
        self.rec.events.append(("snapshot_written", sid))
        return Actions(deadline=float("inf"))

    def resign(self, now):
        if not self.leader:
            raise NotLeaderError(2, self.epoch)
        self.rec.events.append("resign")
        return Actions(send=[(2, "end-quorum-epoch")], deadline=float("inf"))

    def status(self):
        return QuorumStatus(1, Role.LEADER if self.leader else Role.FOLLOWER, self.epoch, 1, None, 0, 0,
                            self.log.end_offset, self.epoch, (0, 0), False)


class RecordingStorage(NodeStorage):
    def __init__(self, rec, fs):
        super().__init__(fs, "/data")
        self.rec = rec

    async def persist_state(self, state):
        self.rec.events.append(("persist", state.epoch))
        await super().persist_state(state)

    async def truncate_to(self, end):
        self.rec.events.append(("truncate", end))
        await super().truncate_to(end)

    async def append(self, entries):
        self.rec.events.append(("append+fsync", len(entries)))
        return await super().append(entries)


class SM:
    def __init__(self, rec):
        self.rec = rec
        self.applied: list[Entry] = []

    def restore(self, sid, data):
        self.rec.events.append(("restore", tuple(sid)))

    def apply(self, entries, hw):
        self.rec.events.append(("apply", [e.offset for e in entries], hw))
        self.applied += entries

    def snapshot(self):
        return b"snap"


async def make_driver(*, leader=True, linger=0.0, snapshot_bytes=1 << 30):
    rec = Recorder()
    fs = MemFileSystem()
    storage = RecordingStorage(rec, fs)
    await storage.load()
    core = FakeCore(rec, leader=leader)
    sent = []

    def send(dst, msg):
        rec.events.append(("send", dst, msg))
        sent.append((dst, msg))

    driver = RaftDriver(RealEnv(seed=1), core, storage, SM(rec), send=send, append_linger=linger,
                        snapshot_interval_bytes=snapshot_bytes)
    return driver, core, rec, storage


async def test_actions_run_in_contract_order():
    driver, core, rec, storage = await make_driver()
    entries = [Entry(0, 3, b"a"), Entry(1, 3, b"b")]
    core.log.append(entries)
    core.script.append(Actions(
        persist_state=ElectionState(3, 1, None),
        truncate_to=0,
        append=entries,
        send=[(2, "m1"), (3, "m2")],
        committed=entries,
        high_watermark=2,
        deadline=float("inf"),
    ))
    core.flushed_reply = Actions(send=[(2, "after-flush")], deadline=float("inf"))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(driver.run)
        driver.inbox_send.send_nowait((2, "hello"))
        with trio.fail_after(5):
            while ("send", 2, "after-flush") not in rec.events:
                await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    i = rec.events.index(("handle", 2, "hello"))
    assert rec.events[i + 1 :] == [
        ("persist", 3),
        ("truncate", 0),
        ("append+fsync", 2),
        ("on_flushed", 2),
        ("send", 2, "m1"),
        ("send", 3, "m2"),
        ("apply", [0, 1], 2),
        ("send", 2, "after-flush"),  # the on_flushed Actions come after the current ones
    ]
    assert storage.quorum_state.read().epoch == 3
    assert [r.payload for r in storage.log.read(0)] == [b"a", b"b"]
    assert driver.high_watermark == 2


async def test_proposals_batch_and_resolve_on_commit():
    driver, core, rec, storage = await make_driver(linger=0.05)
    results = []

    async def propose(p):
        results.append(await driver.propose(p))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(driver.run)
        for i in range(3):
            nursery.start_soon(propose, [b"x%d" % i, b"y"])
        with trio.fail_after(5):
            while ("append+fsync", 6) not in rec.events:
                await trio.sleep(0.01)
        # Commit everything: the proposals resolve with their own offset ranges.
        entries = core.log.entries_between(0, 6)
        core.script.append(Actions(committed=entries, high_watermark=6, deadline=float("inf")))
        driver.inbox_send.send_nowait((2, "fetch"))
        with trio.fail_after(5):
            while len(results) < 3:
                await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    assert rec.events.count(("core.append", 6)) == 1  # one batch, one fsync
    assert sorted(results) == [(0, 1), (2, 3), (4, 5)]


async def test_proposal_fails_when_not_leader_or_truncated():
    driver, core, rec, storage = await make_driver(leader=False)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(driver.run)
        with trio.fail_after(5):
            try:
                await driver.propose([b"x"])
                raise AssertionError("should have failed")
            except ProposalFailed as e:
                assert e.leader_id == 2
        core.leader = True
        failed = []

        async def propose():
            try:
                await driver.propose([b"x", b"y"])
            except ProposalFailed as e:
                failed.append(str(e))

        nursery.start_soon(propose)
        with trio.fail_after(5):
            while not any(ev[0] == "append+fsync" for ev in rec.events if isinstance(ev, tuple)):
                await trio.sleep(0.01)
        core.log.truncate_to(0)
        core.script.append(Actions(truncate_to=0, deadline=float("inf")))
        driver.inbox_send.send_nowait((2, "diverged"))
        with trio.fail_after(5):
            while not failed:
                await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    assert failed == ["entries truncated"]


async def test_an_entry_too_large_for_the_log_is_refused_before_anything_is_appended():
    """The log store refuses an entry over MAX_ENTRY_BYTES mid-append, which halted the node:
    the driver refuses it to the proposer first and keeps running."""
    driver, core, rec, storage = await make_driver()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(driver.run)
        with pytest.raises(ValueError, match="exceeds"):
            await driver.propose([b"x", bytes(MAX_ENTRY_BYTES + 1)])
        assert not any(ev[0] == "core.append" for ev in rec.events if isinstance(ev, tuple))
        nursery.cancel_scope.cancel()


async def test_snapshot_taken_after_enough_committed_bytes():
    driver, core, rec, storage = await make_driver(snapshot_bytes=10)
    entries = [Entry(i, 3, b"0123456789") for i in range(3)]
    core.log.append(entries)
    core.script.append(Actions(append=entries, committed=entries, high_watermark=3, deadline=float("inf")))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(driver.run)
        driver.inbox_send.send_nowait((2, "m"))
        with trio.fail_after(5):
            while ("snapshot_written", (3, 3)) not in rec.events:
                await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    assert storage.snapshots.latest() == ((3, 3), b"snap")


async def test_resign_hands_over_only_when_leader():
    for leader in (True, False):
        driver, core, rec, storage = await make_driver(leader=leader)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(driver.run)
            with trio.fail_after(5):
                await driver.resign()
            nursery.cancel_scope.cancel()
        sent = [e for e in rec.events if isinstance(e, tuple) and e[0] == "send"]
        assert sent == ([("send", 2, "end-quorum-epoch")] if leader else [])


async def test_a_failed_metadata_log_fsync_halts_the_node():
    """Kafka halts a node whose metadata log dir fails: the driver ends with one line naming
    the dir, still an OSError carrying the cause's errno (nothing is acknowledged)."""
    import errno

    from raft.driver import MetadataLogHalt
    driver, core, rec, storage = await make_driver()
    storage.fs.fail_syncs = True
    results = []

    async def propose():
        results.append(await driver.propose([b"x"]))

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(driver.run)
            nursery.start_soon(propose)
            with trio.fail_after(5):
                await trio.sleep_forever()
        raise AssertionError("the driver should have halted")
    except* MetadataLogHalt as group:
        (halt,) = group.exceptions
    assert halt.errno == errno.EIO
    assert str(halt).startswith("metadata log dir /data/__cluster_metadata-0 failed: ")
    assert str(halt).endswith("; halting") and "\n" not in str(halt)
    assert results == []
