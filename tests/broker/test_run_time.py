"""broker.quotas.run_time: a handler is charged the time it runs, not the time it waits."""
from __future__ import annotations

import pytest
import trio

from broker.quotas.run_time import RunTime


async def test_only_the_time_a_handler_runs_counts_not_what_runs_while_it_waits():
    now = [0.0]

    async def handler():
        now[0] += 0.3  # runs 0.3 s
        await trio.sleep(0.01)  # waits: another task runs meanwhile
        now[0] += 0.2
        return "answer"

    async def other():
        now[0] += 5.0

    timer = RunTime(lambda: now[0])
    async with trio.open_nursery() as nursery:
        nursery.start_soon(other)
        assert await timer.run(handler()) == "answer"
    assert now[0] == pytest.approx(5.5) and timer.seconds == pytest.approx(0.5)


async def test_a_failing_or_cancelled_handler_is_charged_what_it_ran():
    now = [0.0]

    async def failing():
        now[0] += 0.1
        await trio.sleep(0)
        now[0] += 0.1
        raise ValueError("bad request")

    timer = RunTime(lambda: now[0])
    with pytest.raises(ValueError):
        await timer.run(failing())
    assert timer.seconds == pytest.approx(0.2)

    async def waiting():
        now[0] += 0.4
        await trio.sleep_forever()

    timer = RunTime(lambda: now[0])
    with trio.move_on_after(0.01) as scope:
        await timer.run(waiting())
    assert scope.cancelled_caught and timer.seconds == pytest.approx(0.4)
