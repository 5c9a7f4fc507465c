"""ProducerIdAllocator: ids from controller blocks, one fetch at a time, errors retriable."""
from __future__ import annotations

import trio

from broker.producer_state import ProducerIdAllocator, ProducerIdsUnavailable
from wire.error_codes import ErrorCode


class FakeController:
    def __init__(self, size: int = 3):
        self.next = 1000
        self.size = size
        self.calls = 0
        self.fail = False

    async def allocate(self) -> tuple[int, int]:
        self.calls += 1
        await trio.sleep(0.01)  # let concurrent callers pile up on the lock
        if self.fail:
            raise ProducerIdsUnavailable("no active controller")
        first = self.next
        self.next += self.size
        return first, self.size


async def test_ids_come_from_blocks_in_order():
    ctl = FakeController(size=3)
    alloc = ProducerIdAllocator(ctl.allocate)
    ids = [(await alloc.init_producer_id(None)).producer_id for _ in range(7)]
    assert ids == [1000, 1001, 1002, 1003, 1004, 1005, 1006]
    assert ctl.calls == 3
    result = await alloc.init_producer_id(None)
    assert (result.error, result.producer_epoch) == (ErrorCode.NONE, 0)


async def test_concurrent_callers_share_one_fetch():
    ctl = FakeController(size=10)
    alloc = ProducerIdAllocator(ctl.allocate)
    got: list[int] = []

    async def one():
        got.append(await alloc.next_producer_id())

    async with trio.open_nursery() as nursery:
        for _ in range(5):
            nursery.start_soon(one)
    assert sorted(got) == [1000, 1001, 1002, 1003, 1004]
    assert ctl.calls == 1


async def test_unavailable_controller_is_a_retriable_error_then_recovers():
    ctl = FakeController()
    ctl.fail = True
    alloc = ProducerIdAllocator(ctl.allocate)
    result = await alloc.init_producer_id(None)
    assert result.error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS and result.error.retriable
    ctl.fail = False
    assert (await alloc.init_producer_id(None)).producer_id == 1000


async def test_empty_block_is_refused():
    async def empty():
        return 5, 0

    result = await ProducerIdAllocator(empty).init_producer_id(None)
    assert result.error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


async def test_transactional_ids_are_refused():
    ctl = FakeController()
    result = await ProducerIdAllocator(ctl.allocate).init_producer_id("txn-1")
    assert result.error == ErrorCode.INVALID_REQUEST and ctl.calls == 0
