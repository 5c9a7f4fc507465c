"""The storage and process fault kinds: read_corruption, bitrot, fsync_error, pause, stop.

Each is injected and counted on a fixed seed, and the cluster still passes every checker;
plus the pieces they are built from (where corruption lands, the paused Env, the profile
draw that leaves the other kinds' schedule unchanged)."""
from __future__ import annotations

import random
import struct
from types import SimpleNamespace

import pytest
import trio

from raftkafka.node.metadata_roles import BrokerRole
from simulations.cluster import PausableEnv
from simulations.env import SkewedClock
from simulations.nemesis import FAULT_GROUPS, LATE_KINDS, draw_profile, fault_kinds
from simulations.network import SimNetwork
from simulations.runner import SimOptions, run_simulation
from simulations.storage_faults import crc_covered_bit, rot_region
from simulations.trace import Trace
from storage.memfs import MemFileSystem
from wire.batch_header import CRC_START, HEADER_SIZE, LOG_OVERHEAD


# -- the fault kinds, end to end ---------------------------------------------------------------

@pytest.mark.parametrize("kind,seed,workload", [
    ("read_corruption", 1, "cluster"),
    ("bitrot", 2, "cluster"),
    ("fsync_error", 1, "cluster"),
    ("pause", 1, "cluster"),
    ("stop", 1, "cluster"),
    ("fsync_error", 3, "raft"),
    ("pause", 3, "raft"),
])
def test_kind_is_injected_counted_and_survived(kind, seed, workload):
    result = run_simulation(SimOptions(seed=seed, duration=8.0, faults=kind, workload=workload, full_trace=True))
    assert result["violations"] == [], result["violations"]
    assert set(result["faults"]) == {kind}, result["faults"]
    assert result["faults"][kind] >= 1
    lines = result["trace"].lines
    if kind == "read_corruption":
        # The flips really reached readers (which rejected those batches and fetched again).
        flips = [int(line.rsplit("flips=", 1)[1]) for line in lines if "read_corruption_end" in line]
        assert sum(flips) > 0, flips
    elif kind == "bitrot":
        assert any("kill reason=bitrot" in line for line in lines)
    elif kind == "pause":
        assert any(line.split()[3] == "resume" for line in lines)
    elif kind == "stop":  # a broker's controlled shutdown completed, and it came back
        stopped = [line.split()[2] for line in lines if "controlled_shutdown complete=True" in line]
        assert stopped and any(f"{stopped[0]} start incarnation=2" in line for line in lines)


def test_a_controlled_shutdown_that_stops_before_its_leaderships_moved_is_caught(monkeypatch):
    """Mutation: the controller lets a broker that asks to shut down stop at once (fencing it,
    which moves its leaderships in the same step): the broker stops while the image the
    controller decided that on shows it leading, which the stop's checker reports."""
    import metadata.controller.brokers as brokers

    original = brokers._next_state

    def at_once(current, req, caught_up, leads, heartbeats):
        if current == brokers.BrokerState.UNFENCED and req.want_shutdown and not req.want_fence:
            return brokers.BrokerState.SHUTDOWN_NOW
        return original(current, req, caught_up, leads, heartbeats)

    def run(seed):
        return run_simulation(SimOptions(seed=seed, duration=10.0, faults="stop", workload="cluster"))

    with monkeypatch.context() as patch:
        patch.setattr(brokers, "_next_state", at_once)
        for seed in range(40):  # the first catching seed moves with the fault mix (16 when written)
            found = run(seed)["violations"]
            if found:
                break
        else:
            pytest.fail("the mutation survived 40 seeds")
    assert {v["invariant"] for v in found} == {"ControlledShutdownLeftLeaders"}, found
    assert run(seed)["violations"] == []


def test_new_kinds_are_in_their_groups():
    assert {"read_corruption", "bitrot", "fsync_error"} <= set(FAULT_GROUPS["disk"])
    assert FAULT_GROUPS["process"] == ["pause", "stop", "duplicate"]
    assert set(LATE_KINDS) <= set(fault_kinds("all"))
    assert fault_kinds("process") == ["pause", "stop", "duplicate"]


def test_adding_the_new_kinds_left_the_older_kinds_schedule_as_it_was():
    older = "network,crash,slow_fsync,disk_full,clock"
    for seed in range(50):
        everything = draw_profile(random.Random(seed), "all")
        before = draw_profile(random.Random(seed), older)
        assert [k for k in everything.kinds if k not in LATE_KINDS] == [k for k in before.kinds if k not in LATE_KINDS]
        assert everything.mean_gap == before.mean_gap and everything.link == before.link


def test_a_selection_of_only_new_kinds_enables_one():
    for seed in range(20):
        kinds = draw_profile(random.Random(seed), "process").kinds
        assert kinds and set(kinds) <= {"pause", "stop", "duplicate"}


# -- where corruption lands --------------------------------------------------------------------

def _batch(length_after_header: int, fill: int) -> bytes:
    body = bytes([fill]) * length_after_header
    batch_length = HEADER_SIZE - LOG_OVERHEAD + len(body)
    header = struct.pack(">qi", 0, batch_length) + bytes(HEADER_SIZE - LOG_OVERHEAD)
    return header + body


def test_crc_covered_bit_avoids_the_unchecked_header_fields():
    data = _batch(10, 1) + _batch(30, 2) + b"\x00" * 20  # a torn tail is no batch
    first_end = HEADER_SIZE + 10
    rng = random.Random(5)
    for _ in range(500):
        bit = crc_covered_bit(data, rng)
        byte = bit // 8
        in_first = CRC_START - 4 <= byte < first_end
        in_second = first_end + CRC_START - 4 <= byte < len(data) - 20
        assert in_first or in_second, byte
    assert crc_covered_bit(b"\x00" * 30, rng) is None


async def test_rot_region_is_inside_a_batch_of_a_partition_segment_never_the_metadata_log():
    disk = MemFileSystem()
    for d in ("/data/__cluster_metadata-0", "/data/t-0"):
        disk.makedirs(d)
    meta = disk.open("/data/__cluster_metadata-0/00000000000000000000.log", create=True)
    meta.append(_batch(50, 7))
    old = disk.open("/data/t-0/00000000000000000000.log", create=True)
    old.append(_batch(50, 8))
    last = disk.open("/data/t-0/00000000000000000100.log", create=True)
    last.append(_batch(40, 9) + _batch(40, 9))
    rng = random.Random(1)
    for _ in range(50):
        path, offset, length = rot_region(disk, rng)
        assert path == "/data/t-0/00000000000000000100.log"
        assert offset in (CRC_START - 4, HEADER_SIZE + 40 + CRC_START - 4)
        assert offset + length <= last.size()
    assert rot_region(MemFileSystem(), rng) is None


# -- the paused process ------------------------------------------------------------------------

async def test_a_paused_env_sleeps_until_resumed(autojump_clock):
    net = SimNetwork(random.Random(0), Trace())
    net.add_host("n1")
    env = PausableEnv("n1", seed=1, incarnation=1, net=net, disk=MemFileSystem(), clock=SkewedClock())
    woke = []

    async def sleeper():
        await env.sleep(1.0)
        woke.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        env.pause()
        nursery.start_soon(sleeper)
        await trio.sleep(5.0)
        assert woke == [] and env.paused
        env.resume()
    assert woke == [5.0]
    await env.sleep(1.0)  # not paused: a plain sleep
    assert trio.current_time() == 6.0


# -- a broker whose recovery cut a log registers as unclean ------------------------------------

class _Lifecycle:
    previous_broker_epoch = None
    on_registered = None


class _BootFS(MemFileSystem):
    def boot_id(self):
        return "boot-1"


async def _claim(truncated: int, whole_batches_lost: bool) -> int:
    from metadata.incarnation_record import record_incarnation
    fs = _BootFS()
    fs.makedirs("/data")
    await record_incarnation(fs, ["/data"], 17)  # the previous incarnation, same boot
    stats = SimpleNamespace(bytes_truncated=truncated, segments_deleted=0, whole_batches_lost=whole_batches_lost)
    kafka = SimpleNamespace(log_manager=SimpleNamespace(
        data_dirs=["/data"], had_clean_shutdown={"/data": False},
        all_logs=lambda: [(("t", 0), SimpleNamespace(recovery_stats=stats))]))
    app = SimpleNamespace(env=SimpleNamespace(fs=fs), lifecycle=_Lifecycle())
    BrokerRole._remember_incarnations(app, kafka)
    return app.lifecycle.previous_broker_epoch


async def test_a_restart_on_the_same_boot_whose_recovery_cut_a_log_is_unclean():
    assert await _claim(truncated=0, whole_batches_lost=False) == 17  # a kill -9 that lost nothing: clean
    # A write cut short by the crash (a torn last batch) loses nothing acknowledged: still clean.
    assert await _claim(truncated=40, whole_batches_lost=False) == 17
    assert await _claim(truncated=120, whole_batches_lost=True) == -1  # bit rot cut the log: not an ELR candidate
