"""What a broker's start reports: a listener it cannot bind versus logs it cannot recover.

Simulation seed 269: a broker restarted while its disk refused writes; the recovery's ENOSPC
came out of the node as "listeners: cannot listen on n4:9092: No space left on device".
"""
from __future__ import annotations

import errno

import pytest
import trio

from broker import Broker, BrokerConfig
from broker.broker import ListenerError
from storage.env import RealEnv
from storage.memfs import MemFileSystem
from tests.broker.harness import InProcessController


class _Net:
    """A network whose listeners cannot bind (the port is taken)."""

    async def serve(self, host, port, handler, *, tls=None, task_status=trio.TASK_STATUS_IGNORED):
        raise OSError(errno.EADDRINUSE, "Address already in use")


def _broker(fs: MemFileSystem, net=None) -> Broker:
    env = RealEnv(seed=3)
    env.fs = fs
    if net is not None:
        env.net = net
    return Broker(env, BrokerConfig(node_id=1, data_dirs=("/data",), port=0), InProcessController())


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for e in exc.exceptions for leaf in _leaves(e)]
    return [exc]


async def _start_failure(broker: Broker) -> list[BaseException]:
    with pytest.raises(BaseException) as info:
        async with trio.open_nursery() as nursery:
            await nursery.start(broker.run)
    return _leaves(info.value)


async def test_a_listener_that_cannot_bind_is_a_listener_error():
    [error] = await _start_failure(_broker(MemFileSystem(), _Net()))
    assert isinstance(error, ListenerError) and error.errno == errno.EADDRINUSE


async def test_a_disk_that_refuses_writes_at_recovery_is_a_storage_error():
    fs = MemFileSystem()
    fs.fail_writes = True
    [error] = await _start_failure(_broker(fs))
    assert isinstance(error, OSError) and not isinstance(error, ListenerError)
    assert error.errno == errno.ENOSPC
