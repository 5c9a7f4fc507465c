"""broker.request_timers: one task cancels a connection's scope when its armed request's
timeout passes; a disarmed request leaves nothing behind."""
import functools

import pytest
import trio
import trio.testing

from broker.request_timers import RequestTimers


async def test_an_armed_request_is_cancelled_at_its_deadline_and_a_disarmed_one_never(autojump_clock):
    timers = RequestTimers()
    ended = {}

    async def request(name, timeout, lasts, *, rearm_after=None):
        timer = timers.timer()
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
        await nursery.start(timers.run)
        nursery.start_soon(request, "slow", 10, 20)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(request, "quick", 10, 5)
        nursery.start_soon(request, "short timeout", 3, 20)  # earlier than the task's sleep
        nursery.start_soon(functools.partial(request, "second request", 10, 15, rearm_after=5))
        await trio.sleep(200)
        nursery.cancel_scope.cancel()
    assert ended == {"slow": (10, True), "short timeout": (3, True), "quick": (105, False),
                     "second request": (15, True)}


async def test_arming_before_the_task_ever_ran_is_an_error():
    timer = RequestTimers().timer()
    with pytest.raises(RuntimeError):
        timer.arm(1.0)
