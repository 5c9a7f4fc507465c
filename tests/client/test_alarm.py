import math

import trio
import trio.testing

from raftkafka.client.alarm import Alarm
from tests.client.memnet import MemEnv


async def start_alarm(nursery):
    fired = []
    alarm = Alarm(MemEnv(), lambda: fired.append(trio.current_time()))
    nursery.start_soon(alarm.run)
    await trio.testing.wait_all_tasks_blocked()
    return alarm, fired


async def test_alarm_goes_off_once_at_its_latest_setting(nursery, autojump_clock):
    alarm, fired = await start_alarm(nursery)
    start = trio.current_time()
    alarm.at(start + 1.0)
    await trio.sleep(0.5)
    alarm.at(start + 2.0)  # moved later while it sleeps towards +1
    await trio.sleep(5.0)
    assert fired == [start + 2.0]
    alarm.at(trio.current_time() + 3.0)
    await trio.sleep(1.0)
    alarm.at(trio.current_time() + 0.25)  # and earlier than it sleeps
    await trio.sleep(5.0)
    assert fired == [start + 2.0, start + 6.5 + 0.25]


async def test_alarm_set_to_never_does_not_go_off(nursery, autojump_clock):
    alarm, fired = await start_alarm(nursery)
    alarm.at(trio.current_time() + 1.0)
    alarm.at(math.inf)
    await trio.sleep(100.0)
    assert fired == []


async def test_alarm_set_in_the_past_goes_off_at_once(nursery, autojump_clock):
    alarm, fired = await start_alarm(nursery)
    now = trio.current_time()
    alarm.at(now - 1.0)
    await trio.sleep(0.001)
    assert fired == [now]
