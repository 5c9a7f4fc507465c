"""A broker whose disk fills up: the produce that hits ENOSPC is answered KAFKA_STORAGE_ERROR,
the broker halts (LogDirHalt, no clean-shutdown marker), and the next incarnation on the same
disk recovers its logs and serves every acknowledged record.

In process: real clock and TCP, the broker's own MemFileSystem (its page cache survives the
halt, as a process exit leaves it), the in-process controller of tests/broker/harness.
"""
from __future__ import annotations

import errno
import posixpath

import trio

from broker import Broker, BrokerConfig
from broker.log_dir_failure_handler import LogDirHalt
from storage.log.log_manager import CLEAN_SHUTDOWN_FILE
from storage.memfs import MemFileSystem
from tests.broker import builders as B
from tests.broker.harness import InProcessController, RawClient, mem_env
from wire.batch_header import iter_batches
from wire.error_codes import ErrorCode as E
from wire.records import decode_batch

DATA_DIR = "/data/broker-1"


class Incarnation:
    """One run of a broker on `disk`, in its own task; `ended` is set when `run` returns or raises."""

    def __init__(self, env, disk: MemFileSystem, controller: InProcessController, node_id: int = 1):
        env.fs = disk
        self.node_id = node_id
        self.broker = Broker(env, BrokerConfig(node_id=node_id, data_dirs=(f"/data/broker-{node_id}",), port=0,
                                               cluster_id="test-cluster"), controller)
        self.controller = controller
        self.error: BaseException | None = None
        self.ended = trio.Event()

    async def start(self, nursery) -> None:
        async def run(task_status=trio.TASK_STATUS_IGNORED):
            try:
                await self.broker.run(task_status=task_status)
            except Exception as exc:  # the halt: kept for the test to look at
                self.error = exc
            finally:
                self.ended.set()
        await nursery.start(run)
        self.controller.attach(self.broker)
        self.controller.register(self.node_id, "127.0.0.1", self.broker.port)
        await self.broker.replicas.wait_applied(self.controller.image.offset, trio.current_time() + 10)

    def halt(self) -> LogDirHalt | None:
        leaves = [self.error]
        while leaves and isinstance(leaves[0], BaseExceptionGroup):
            leaves = list(leaves[0].exceptions) + leaves[1:]
        return leaves[0] if len(leaves) == 1 and isinstance(leaves[0], LogDirHalt) else None


def _used(disk: MemFileSystem) -> int:
    return sum(len(data) for data in disk.snapshot().values())


async def _fetch_all(client: RawClient) -> list[tuple[int, bytes]]:
    part = B.one_partition(await client.call(B.fetch([("t", 0, 0)], max_bytes=1 << 22,
                                                     partition_max_bytes=1 << 22), 11))
    assert part.error_code == E.NONE, part
    data = bytes(part.records)
    return [(r.offset, r.value) for pos, _ in iter_batches(data) for r in decode_batch(data, pos)[1]]


async def test_enospc_on_produce_answers_kafka_storage_error_halts_and_the_restart_recovers_every_ack():
    disk = MemFileSystem()
    controller = InProcessController()
    acked: dict[int, bytes] = {}
    async with trio.open_nursery() as nursery:
        first = Incarnation(mem_env(), disk, controller)
        await first.start(nursery)
        client = await RawClient.connect(first.broker.port)
        assert (await client.call(B.create_topic("t"), 4)).topics[0].error_code == E.NONE
        for i in range(5):
            batch = B.batch(4, value_size=50 + i)
            r = B.one_partition(await client.call(B.produce("t", 0, batch, acks=1), 8))
            assert r.error_code == E.NONE
            acked.update({r.base_offset + j: bytes([65 + j % 26]) * (50 + i) for j in range(4)})

        disk.capacity = _used(disk) + 100  # room for less than the next batch
        r = B.one_partition(await client.call(B.produce("t", 0, B.batch(4, value_size=200), acks=1), 8))
        assert (r.error_code, r.base_offset) == (E.KAFKA_STORAGE_ERROR, -1)
        assert "No space left on device" in r.error_message

        with trio.fail_after(10):
            await first.ended.wait()
        halt = first.halt()
        assert halt is not None, first.error
        assert halt.errno == errno.ENOSPC
        assert str(halt).startswith(f"log dir {DATA_DIR} failed: No space left on device") and str(halt).endswith(
            "; halting")
        assert not disk.exists(posixpath.join(DATA_DIR, CLEAN_SHUTDOWN_FILE))
        assert await client.is_closed(10)  # the listener went with the broker
        controller.brokers.remove(first.broker)

        disk.process_exit()  # the process is gone; what it wrote stays in the page cache
        disk.capacity = None  # room made, as an operator would
        second = Incarnation(mem_env(), disk, controller)
        await second.start(nursery)
        manager = second.broker.log_manager
        assert manager.had_clean_shutdown == {DATA_DIR: False}
        assert manager.get_log("t", 0).recovery_stats.segments_recovered >= 1
        client = await RawClient.connect(second.broker.port)
        assert await _fetch_all(client) == sorted(acked.items())
        # Writable again: the new incarnation serves produce as before.
        r = B.one_partition(await client.call(B.produce("t", 0, B.batch(1), acks=1), 8))
        assert (r.error_code, r.base_offset) == (E.NONE, len(acked))
        nursery.cancel_scope.cancel()
    assert second.error is None
    assert disk.exists(posixpath.join(DATA_DIR, CLEAN_SHUTDOWN_FILE))  # a clean stop writes it


async def test_a_follower_whose_disk_fills_halts_while_its_leader_goes_on():
    """The replica-fetch path: ENOSPC appending fetched records is a log-dir failure too."""
    disks = {1: MemFileSystem(), 2: MemFileSystem()}
    controller = InProcessController()
    async with trio.open_nursery() as nursery:
        brokers = {i: Incarnation(mem_env(), disks[i], controller, node_id=i) for i in (1, 2)}
        for inc in brokers.values():
            await inc.start(nursery)
        client = await RawClient.connect(brokers[1].broker.port)
        created = await client.call(B.create_topic("t", assignments=[(1, 2)]), 4)
        assert created.topics[0].error_code == E.NONE
        for inc in brokers.values():
            await inc.broker.replicas.wait_applied(controller.image.offset, trio.current_time() + 10)
        disks[2].fail_writes = True
        r = B.one_partition(await client.call(B.produce("t", 0, B.batch(3), acks=1), 8))
        assert r.error_code == E.NONE  # the leader's disk is fine
        with trio.fail_after(10):
            await brokers[2].ended.wait()
        halt = brokers[2].halt()
        assert halt is not None and halt.errno == errno.ENOSPC, brokers[2].error
        assert ("t", 0) in brokers[2].broker.replicas.offline  # offline before the halt
        assert not disks[2].exists(posixpath.join("/data/broker-2", CLEAN_SHUTDOWN_FILE))
        assert not brokers[1].ended.is_set()
        r = B.one_partition(await client.call(B.produce("t", 0, B.batch(2), acks=1), 8))
        assert (r.error_code, r.base_offset) == (E.NONE, 3)
        nursery.cancel_scope.cancel()
