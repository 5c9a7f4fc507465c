"""broker.fetch_purgatory: waiters wake only for their own partitions, or at their deadline."""
import trio

from broker.fetch_purgatory import FetchPurgatory
from storage.env import RealEnv


async def test_notify_wakes_only_waiters_of_that_partition():
    purgatory = FetchPurgatory(RealEnv(seed=0))
    woken = {}

    async def waiter(name, keys):
        woken[name] = await purgatory.wait(keys, trio.current_time() + 60)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter, "a", [("t", 0)])
        nursery.start_soon(waiter, "b", [("t", 1), ("u", 0)])
        await trio.testing.wait_all_tasks_blocked()
        assert purgatory.waiting == 2
        purgatory.notify(("u", 0))
        await trio.testing.wait_all_tasks_blocked()
        assert woken == {"b": True}
        assert purgatory.waiting == 1
        purgatory.notify(("t", 1))  # nobody waits on it any more
        await trio.testing.wait_all_tasks_blocked()
        assert "a" not in woken
        purgatory.notify(("t", 0))
    assert woken == {"a": True, "b": True}
    assert purgatory.waiting == 0


async def test_deadline_returns_false_and_cleans_up(autojump_clock):
    purgatory = FetchPurgatory(RealEnv(seed=0))
    assert await purgatory.wait([("t", 0)], trio.current_time() + 5) is False
    assert purgatory.waiting == 0


async def test_a_watch_reports_what_fired_and_stays_registered(autojump_clock):
    purgatory = FetchPurgatory(RealEnv(seed=0))
    watch = purgatory.watch([("t", 1), ("t", 0), ("u", 0)])
    purgatory.notify(("u", 0))  # before anyone waits: not lost
    purgatory.notify(("t", 1))
    assert await watch.wait(trio.current_time() + 5) == [("u", 0), ("t", 1)]
    assert purgatory.waiting == 1
    purgatory.notify(("u", 0))  # re-armed for the keys that fired
    assert await watch.wait(trio.current_time() + 5) == [("u", 0)]
    assert await watch.wait(trio.current_time() + 5) == []  # the deadline
    watch.close()
    assert purgatory.waiting == 0
    purgatory.notify(("t", 0))
    assert await watch.wait(trio.current_time() + 1) == []
