"""storage.deadline_reaper: one task serves many deadlines on Env time. An Alarm goes off once at
its latest setting; a request Timer cancels its connection's scope when an armed request's
timeout passes, and a disarmed request leaves nothing behind."""
import functools
import math

import pytest
import trio
import trio.testing

from storage.deadline_reaper import Alarm, DeadlineReaper, Timer
from storage.env import RealEnv


async def start_reaper(nursery) -> DeadlineReaper:
    reaper = DeadlineReaper(RealEnv(seed=0))
    await nursery.start(reaper.run)
    return reaper


async def start_alarm(nursery):
    fired = []
    alarm = Alarm(await start_reaper(nursery), lambda: fired.append(trio.current_time()))
    await trio.testing.wait_all_tasks_blocked()
    return alarm, fired


async def test_alarm_goes_off_once_at_its_latest_setting(nursery, autojump_clock):
    alarm, fired = await start_alarm(nursery)
    start = trio.current_time()
    alarm.at(start + 1.0)
    await trio.sleep(0.5)
    alarm.at(start + 2.0)  # moved later while the task sleeps towards +1
    await trio.sleep(5.0)
    assert fired == [start + 2.0]
    alarm.at(trio.current_time() + 3.0)
    await trio.sleep(1.0)
    alarm.after(0.25)  # and earlier than the task sleeps
    await trio.sleep(5.0)
    assert fired == [start + 2.0, start + 6.5 + 0.25]


async def test_alarm_set_to_never_or_disarmed_does_not_go_off(nursery, autojump_clock):
    alarm, fired = await start_alarm(nursery)
    alarm.at(trio.current_time() + 1.0)
    alarm.at(math.inf)
    alarm.after(2.0)
    alarm.disarm()
    await trio.sleep(100.0)
    assert fired == []


async def test_alarm_set_in_the_past_goes_off_at_once(nursery, autojump_clock):
    alarm, fired = await start_alarm(nursery)
    now = trio.current_time()
    alarm.at(now - 1.0)
    await trio.sleep(0.001)
    assert fired == [now]


async def test_an_armed_request_is_cancelled_at_its_deadline_and_a_disarmed_one_never(autojump_clock):
    ended = {}

    async def request(reaper, name, timeout, lasts, *, rearm_after=None):
        timer = Timer(reaper)
        with timer.scope:
            timer.arm(timeout)
            if rearm_after is not None:
                await trio.sleep(rearm_after)
                timer.disarm()
                timer.arm(timeout)  # the connection's next request
            await trio.sleep(lasts)
            timer.disarm()
            await trio.sleep(100)  # after the request: not timed
        ended[name] = (trio.current_time(), timer.scope.cancelled_caught)

    async with trio.open_nursery() as nursery:
        reaper = await start_reaper(nursery)
        nursery.start_soon(request, reaper, "slow", 10, 20)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(request, reaper, "quick", 10, 5)
        nursery.start_soon(request, reaper, "short timeout", 3, 20)  # earlier than the task's sleep
        nursery.start_soon(functools.partial(request, reaper, "second request", 10, 15, rearm_after=5))
        await trio.sleep(200)
        nursery.cancel_scope.cancel()
    assert ended == {"slow": (10, True), "short timeout": (3, True), "quick": (105, False),
                     "second request": (15, True)}


async def test_arming_before_the_task_ever_ran_is_an_error():
    timer = Timer(DeadlineReaper(RealEnv(seed=0)))
    with pytest.raises(RuntimeError):
        timer.arm(1.0)
