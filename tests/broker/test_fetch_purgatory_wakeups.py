"""broker.fetch_purgatory.Watch under one caller-held deadline (how a parked fetch waits):
many wake-ups in one cancel scope, and no wake-up lost or doubled around the deadline."""
import trio
import trio.testing

from broker.fetch_purgatory import FetchPurgatory
from storage.env import RealEnv


async def test_one_deadline_scope_serves_many_wakeups(autojump_clock):
    purgatory = FetchPurgatory(RealEnv(seed=0))
    watch = purgatory.watch([("t", 0), ("t", 1)])
    rounds = []

    async def parked():
        with trio.CancelScope(deadline=trio.current_time() + 10) as timer:
            while True:
                await watch.wait_fired()
                rounds.append(watch.take_fired())
        assert timer.cancelled_caught

    async with trio.open_nursery() as nursery:
        nursery.start_soon(parked)
        await trio.testing.wait_all_tasks_blocked()
        purgatory.notify(("t", 1))
        purgatory.notify(("t", 0))
        await trio.testing.wait_all_tasks_blocked()
        purgatory.notify(("t", 1))  # re-armed after the first wake-up
        await trio.testing.wait_all_tasks_blocked()
        assert rounds == [[("t", 1), ("t", 0)], [("t", 1)]]
    assert trio.current_time() >= 10  # the loop ended at its deadline
    watch.close()
    assert purgatory.waiting == 0


async def test_a_change_after_the_deadline_struck_is_kept_not_rescheduled(autojump_clock):
    purgatory = FetchPurgatory(RealEnv(seed=0))
    watch = purgatory.watch([("t", 0)])
    with trio.move_on_at(trio.current_time() + 1):
        await watch.wait_fired()
    # The parked task left on its deadline: a change now must not reschedule it (trio would
    # raise), but the caller still finds it.
    purgatory.notify(("t", 0))
    assert watch.take_fired() == [("t", 0)]
    purgatory.notify(("t", 0))  # taking it re-armed the watch
    assert watch.take_fired() == [("t", 0)]
    watch.close()
    assert purgatory.waiting == 0


async def test_wait_fired_returns_at_once_when_something_already_fired(autojump_clock):
    purgatory = FetchPurgatory(RealEnv(seed=0))
    watch = purgatory.watch([("t", 0)])
    purgatory.notify(("t", 0))
    start = trio.current_time()
    await watch.wait_fired()
    assert trio.current_time() == start
    assert watch.take_fired() == [("t", 0)]
    assert watch.take_fired() == []
    watch.close()


async def test_wake_on_decides_in_the_notifier_and_unwanted_changes_are_still_reported(autojump_clock):
    purgatory = FetchPurgatory(RealEnv(seed=0))
    worth_it: set = set()
    asked = []

    def wake_on(key) -> bool:
        asked.append(key)
        return key in worth_it

    watch = purgatory.watch([("t", 0), ("t", 1)], wake_on=wake_on)
    woke = []

    async def parked():
        await watch.wait_fired()
        woke.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(parked)
        await trio.testing.wait_all_tasks_blocked()
        purgatory.notify(("t", 0))
        purgatory.notify(("t", 0))  # still watched after a change that did not wake
        await trio.testing.wait_all_tasks_blocked()
        assert woke == [] and asked == [("t", 0), ("t", 0)]
        await trio.sleep(1)
        worth_it.add(("t", 1))
        purgatory.notify(("t", 1))
        await trio.testing.wait_all_tasks_blocked()
        assert woke == [1]
    # Every change is reported once, waking or not (a parked fetch re-reads them at its deadline).
    assert watch.take_fired() == [("t", 0), ("t", 1)]
    purgatory.notify(("t", 0))
    await watch.wait(trio.current_time() + 5)  # nothing worth waking for: waits to the deadline
    assert trio.current_time() == 6
    watch.close()
    assert purgatory.waiting == 0


async def test_purgatory_wait_without_wake_on_wakes_on_every_change(autojump_clock):
    purgatory = FetchPurgatory(RealEnv(seed=0))

    async def notify_later():
        await trio.sleep(1)
        purgatory.notify(("t", 0))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(notify_later)
        assert await purgatory.wait([("t", 0)], trio.current_time() + 10)
    assert trio.current_time() == 1
    assert not await purgatory.wait([("t", 0)], trio.current_time() + 2)
    assert purgatory.waiting == 0


async def test_the_reaper_ends_each_wait_at_its_own_deadline(autojump_clock):
    purgatory = FetchPurgatory(RealEnv(seed=0))
    ended = {}

    async def waiter(name, deadline):
        changed = await purgatory.wait([("t", 0)], deadline)
        ended[name] = (trio.current_time(), changed)

    async with trio.open_nursery() as nursery:
        await nursery.start(purgatory.run)
        nursery.start_soon(waiter, "late", 5.0)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(waiter, "early", 2.0)  # earlier than the reaper's sleep: re-armed
        nursery.start_soon(waiter, "same", 2.0)
        await trio.sleep(10)
        nursery.cancel_scope.cancel()
    assert ended == {"early": (2.0, False), "same": (2.0, False), "late": (5.0, False)}


async def test_a_wait_answered_early_leaves_nothing_behind_for_its_next_wait(autojump_clock):
    purgatory = FetchPurgatory(RealEnv(seed=0))
    watch = purgatory.watch([("t", 0)])
    results = []

    async def parked():
        results.append((await watch.wait_fired(1.0), trio.current_time()))
        watch.take_fired()
        # The same task parks again on the same watch, with a later deadline: the first
        # wait's heap entry (deadline 1) must not end this one.
        results.append((await watch.wait_fired(3.0), trio.current_time()))

    async with trio.open_nursery() as nursery:
        await nursery.start(purgatory.run)
        nursery.start_soon(parked)
        await trio.sleep(0.5)
        purgatory.notify(("t", 0))
        await trio.sleep(5)
        nursery.cancel_scope.cancel()
    assert results == [(True, 0.5), (False, 3.0)]
    watch.close()


async def test_when_the_reaper_stops_no_one_is_left_waiting_for_it(autojump_clock):
    purgatory = FetchPurgatory(RealEnv(seed=0))
    ended = []

    async def waiter():
        ended.append((await purgatory.wait([("t", 0)], 100.0), trio.current_time()))

    async with trio.open_nursery() as nursery:
        async with trio.open_nursery() as reaper:
            await reaper.start(purgatory.run)
            nursery.start_soon(waiter)
            await trio.sleep(1)
            reaper.cancel_scope.cancel()
        await trio.testing.wait_all_tasks_blocked()
        assert ended == [(False, 1.0)]
        # Later waits fall back to a deadline scope of their own.
        assert not await purgatory.wait([("t", 0)], 3.0)
        assert trio.current_time() == 3.0
