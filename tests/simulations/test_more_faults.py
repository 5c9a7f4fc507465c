"""The torn_write, misdirected_write, wipe and replay fault kinds, and pause stalling every
timer: each is injected on a fixed seed, really happens, and the cluster passes every checker;
plus the pieces they are built from, and the node rule a wipe needs (KIP-853)."""
from __future__ import annotations

import random
import struct

import pytest
import trio

from raft.config import RaftConfig
from raft.leader import LeaderState
from raft.messages import FetchRequest
from raftkafka.node.assembly import replaced_voter
from simulations.cluster import PausableEnv
from simulations.env import SkewedClock
from simulations.nemesis import FAULT_GROUPS, LATE_KINDS, fault_kinds
from simulations.network import SimNetwork
from simulations.runner import SimOptions, run_simulation
from simulations.storage_faults import misdirect_region
from simulations.trace import Trace
from storage.memfs import SECTOR, MemFileSystem
from storage.meta_properties import MetaProperties, VoterSpec
from wire.batch_header import HEADER_SIZE, LOG_OVERHEAD


@pytest.mark.parametrize("kind,workload", [
    ("torn_write", "cluster"),
    ("misdirected_write", "cluster"),
    ("wipe", "cluster"),
    ("replay", "cluster"),
    ("wipe", "raft"),
])
def test_kind_is_injected_and_survived(kind, workload):
    # The first seed from 1 whose schedule injects the kind (seeds move with the workload).
    for seed in range(1, 20):
        result = run_simulation(SimOptions(seed=seed, duration=4.0, faults=kind, workload=workload, full_trace=True))
        if result["faults"].get(kind):
            break
    else:
        pytest.fail(f"no seed of 1..19 injected {kind}")
    assert result["violations"] == [], (seed, result["violations"])
    assert set(result["faults"]) == {kind}, result["faults"]
    lines = result["trace"].lines
    events = [line for line in lines if line.split()[2:4] == ["nemesis", kind]]
    if kind in ("torn_write", "wipe"):
        assert any(f"kill reason={kind}" in line and "power_loss=True" in line for line in lines)
    if kind == "wipe":
        wiped = {line.split()[2] for line in lines if line.split()[3] == "wiped"}
        assert wiped, seed
    if kind == "misdirected_write":
        assert any("kill reason=misdirected_write" in line for line in lines)
    if kind == "replay":
        assert all(int(line.rsplit("nbytes=", 1)[1]) > 0 for line in events)


def test_the_new_kinds_are_in_their_groups_and_on_the_late_schedule():
    assert {"torn_write", "wipe"} <= set(FAULT_GROUPS["crash"])
    assert "misdirected_write" in FAULT_GROUPS["disk"] and "replay" in FAULT_GROUPS["network"]
    assert {"torn_write", "wipe", "misdirected_write", "replay"} <= set(LATE_KINDS) & set(fault_kinds("all"))


# -- pause stalls every timer ------------------------------------------------------------------

async def test_a_deadline_that_passes_while_paused_expires_at_the_resume(autojump_clock):
    net = SimNetwork(random.Random(0), Trace())
    net.add_host("n1")
    env = PausableEnv("n1", seed=1, incarnation=1, net=net, disk=MemFileSystem(), clock=SkewedClock())
    ended = []

    async def waiter():
        with env.move_on_after(1.0):
            await trio.sleep_forever()
        ended.append(trio.current_time())

    async def too_slow():
        with pytest.raises(trio.TooSlowError):
            with env.fail_after(2.0):
                await trio.sleep_forever()
        ended.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        nursery.start_soon(too_slow)
        await trio.sleep(0.5)
        env.pause()
        await trio.sleep(4.5)
        assert ended == []  # both deadlines passed while the process was frozen
        env.resume()
    assert ended == [5.0, 5.0]
    with env.move_on_after(1.0):  # not paused: an ordinary deadline
        await trio.sleep_forever()
    assert trio.current_time() == 6.0


# -- storage faults ----------------------------------------------------------------------------

async def test_a_sector_torn_crash_keeps_fsynced_bytes_and_a_mix_of_unsynced_sectors():
    seen = set()
    for seed in range(20):
        fs = MemFileSystem()
        fs.makedirs("/d")
        f = fs.open("/d/f", create=True)
        f.append(b"s" * 700)
        await f.sync()
        await fs.sync_dir("/d")
        f.append(b"u" * (6 * SECTOR))
        fs.crash(random.Random(seed), sectors=True)
        data = fs.open("/d/f").read(0, 1 << 20)
        assert data[:700] == b"s" * 700
        sectors = [data[i:i + SECTOR] for i in range(SECTOR * 2, len(data) - SECTOR, SECTOR)]
        seen.update(bytes(set(s)) for s in sectors)
    assert {b"u", b"\0"} <= seen  # some unsynced sectors reached the disk, some did not, out of order


def _batch(body: int, fill: int) -> bytes:
    batch_length = HEADER_SIZE - LOG_OVERHEAD + body
    return struct.pack(">qi", 0, batch_length) + bytes(HEADER_SIZE - LOG_OVERHEAD) + bytes([fill]) * body


def test_a_misdirected_write_lands_off_every_batch_start_and_leaves_a_hole():
    disk = MemFileSystem()
    disk.makedirs("/data/t-0")
    segment = b"".join(_batch(400, i) for i in range(1, 6))
    disk.open("/data/t-0/00000000000000000000.log", create=True).append(segment)
    starts = {i * (HEADER_SIZE + 400) for i in range(5)}
    rng = random.Random(3)
    for _ in range(30):
        path, offset, length, wrong = misdirect_region(disk, rng)
        assert offset in starts and length == HEADER_SIZE + 400
        assert wrong % SECTOR == 0 and wrong not in starts
    assert disk.misdirect(path, offset, length, wrong)
    after = disk.open(path).read(0, 1 << 20)
    assert after[wrong:wrong + length] == segment[offset:offset + length]
    hole = set(range(offset, offset + length)) - set(range(wrong, wrong + length))
    assert hole and all(after[i] == 0 for i in hole)


# -- a wiped voter is an observer (KIP-853) ----------------------------------------------------

def test_a_data_dir_with_another_directory_id_than_the_voter_set_names_is_not_that_voter():
    voters = [VoterSpec(1, "n1", 9093, "dirA"), VoterSpec(2, "n2", 9093, "dirB")]
    assert not replaced_voter(MetaProperties("c", 1, "dirA"), voters)
    assert replaced_voter(MetaProperties("c", 1, "dirWiped"), voters)
    assert not replaced_voter(MetaProperties("c", 3, "dirC"), voters)  # not a voter at all
    assert not replaced_voter(MetaProperties("c", 1, "x"), [VoterSpec(1, "n1", 9093)])  # ids alone


def test_the_leader_counts_a_fetch_from_a_wiped_voter_as_an_observers():
    leader = LeaderState(node_id=1, voters=[1, 2, 3], epoch_start_offset=0, granting_voters=[1, 2], now=0.0,
                         config=RaftConfig())
    leader.record_fetch(2, 10, 1.0, voter=False)  # voter 2's id, another directory
    assert leader.progress[2].end_offset == -1 and leader.observers[2].end_offset == 10
    leader.record_fetch(3, 7, 1.0)
    assert leader.progress[3].end_offset == 7


def test_followers_send_their_directory_id_with_every_fetch():
    assert FetchRequest("c", 2, 1, 0, 0, 0, 0).replica_directory_id == ""  # an older peer's frame
    assert "replica_directory_id" in FetchRequest.__dataclass_fields__
