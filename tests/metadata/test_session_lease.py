"""The broker's session lease: how long after a heartbeat it is sure not to be fenced yet."""
from __future__ import annotations

import pytest
import trio
import trio.testing

from metadata.broker_lifecycle import LEASE_FRACTION, BrokerLifecycle
from metadata.controller import client as client_module
from metadata.controller import rpc
from metadata.controller.client import ControllerConnection, ControllerUnavailableError
from storage.env import RealEnv
from wire.error_codes import ErrorCode
from wire.rpc import FrameDecoder, encode_frame

SESSION = 3.0


class _Controller:
    """Answers heartbeats with `reply` after `delay` seconds (the network and the controller)."""

    cluster_id = "c"

    def __init__(self, reply, delay: float = 0.4):
        self.reply = reply
        self.delay = delay
        self.generation = 1  # the connection answers come on (ControllerConnection's count)
        self.open = True

    def still_connected(self, generation: int) -> bool:
        return self.open and generation == self.generation

    async def call(self, request, *, timeout):
        await trio.sleep(self.delay)
        return self.reply


def _lifecycle(reply, delay: float = 0.4) -> BrokerLifecycle:
    lifecycle = BrokerLifecycle(RealEnv(seed=1), _Controller(reply, delay), broker_id=4,
                                metadata_offset=lambda: 0, heartbeat_interval=0.5, session_timeout=SESSION)
    lifecycle.broker_epoch = 10  # registered
    return lifecycle


async def test_the_lease_runs_from_when_the_heartbeat_was_sent(autojump_clock):
    lifecycle = _lifecycle(rpc.BrokerHeartbeatResponse(ErrorCode.NONE, is_fenced=False), delay=0.4)
    assert not lifecycle.holds_session_lease()  # never heard from the controller
    sent = trio.current_time()
    assert await lifecycle._heartbeat()
    # The controller counts its session from the arrival (>= sent): ours ends earlier.
    assert lifecycle.lease_until == pytest.approx(sent + SESSION * LEASE_FRACTION)
    assert lifecycle.holds_session_lease()
    await trio.sleep_until(sent + SESSION * LEASE_FRACTION - 0.01)
    assert lifecycle.holds_session_lease()
    await trio.sleep_until(sent + SESSION * LEASE_FRACTION)
    assert not lifecycle.holds_session_lease()


async def test_the_lease_ends_with_the_connection_it_was_earned_on(autojump_clock):
    # The controller fences a broker soon after its connection closes (connection_grace).
    lifecycle = _lifecycle(rpc.BrokerHeartbeatResponse(ErrorCode.NONE, is_fenced=False), delay=0.1)
    await lifecycle._heartbeat()
    assert lifecycle.holds_session_lease()
    lifecycle.conn.open = False
    assert not lifecycle.holds_session_lease()
    lifecycle.conn.open, lifecycle.conn.generation = True, 2  # reconnected: a new connection
    assert not lifecycle.holds_session_lease()
    await lifecycle._heartbeat()  # answered on the new one
    assert lifecycle.holds_session_lease()


async def test_a_late_answer_to_an_older_heartbeat_never_shortens_the_lease(autojump_clock):
    lifecycle = _lifecycle(rpc.BrokerHeartbeatResponse(ErrorCode.NONE, is_fenced=False), delay=0.1)
    await lifecycle._heartbeat()
    longest = lifecycle.lease_until
    lifecycle.lease_until = longest + 1.0  # as if a newer heartbeat had been answered meanwhile
    await lifecycle._heartbeat()
    assert lifecycle.lease_until == longest + 1.0


@pytest.mark.parametrize("reply", [
    rpc.BrokerHeartbeatResponse(ErrorCode.NONE, is_fenced=True),  # fenced: leaderships gone
    rpc.BrokerHeartbeatResponse(ErrorCode.STALE_BROKER_EPOCH),  # replaced: registering again
])
async def test_a_fenced_or_forgotten_broker_loses_its_lease_at_once(autojump_clock, reply):
    lifecycle = _lifecycle(rpc.BrokerHeartbeatResponse(ErrorCode.NONE, is_fenced=False))
    await lifecycle._heartbeat()
    assert lifecycle.holds_session_lease()
    lifecycle.conn.reply = reply
    await lifecycle._heartbeat()
    assert not lifecycle.holds_session_lease()


async def test_an_unanswered_heartbeat_leaves_the_lease_to_lapse(autojump_clock):
    lifecycle = _lifecycle(rpc.BrokerHeartbeatResponse(ErrorCode.NONE, is_fenced=False), delay=0.1)
    await lifecycle._heartbeat()
    lease = lifecycle.lease_until

    class _Unreachable:
        cluster_id = "c"

        async def call(self, request, *, timeout):
            await trio.sleep(timeout)
            raise ControllerUnavailableError("no controller answered")

        def still_connected(self, generation: int) -> bool:
            return True  # open, but silent: only the lease's time runs out

    lifecycle.conn = _Unreachable()
    assert not await lifecycle._heartbeat()
    assert lifecycle.lease_until == lease and lifecycle.holds_session_lease()
    assert not await lifecycle._heartbeat()
    assert not await lifecycle._heartbeat()  # 3.1 s after the answered one was sent
    assert trio.current_time() >= lease and not lifecycle.holds_session_lease()


async def test_a_broken_controller_connection_makes_it_heartbeat_again_at_once(autojump_clock):
    # The controller fences a broker whose connection closed unless it heartbeats within the
    # close grace (0.5 s), far shorter than the heartbeat interval: an idle broker must not wait.
    lifecycle = _lifecycle(rpc.BrokerHeartbeatResponse(ErrorCode.NONE, is_fenced=False), delay=0.01)
    lifecycle.heartbeat_interval = 10.0
    sent = []
    answer = lifecycle.conn.call

    async def call(request, *, timeout):
        sent.append(trio.current_time())
        return await answer(request, timeout=timeout)

    lifecycle.conn.call = call
    async with trio.open_nursery() as nursery:
        nursery.start_soon(lifecycle.run)
        await trio.sleep(1.0)
        assert len(sent) == 1
        lost_at = trio.current_time()
        lifecycle.conn.on_lost()
        await trio.sleep(0.1)
        assert len(sent) == 2 and sent[1] == pytest.approx(lost_at)
        await trio.sleep(5.0)
        assert len(sent) == 2  # then the interval again
        nursery.cancel_scope.cancel()


async def test_a_shutdown_asked_under_the_lease_is_recorded_as_such(autojump_clock):
    # The controller cannot have fenced it: it runs the controlled shutdown (leaderships move first).
    lifecycle = _lifecycle(rpc.BrokerHeartbeatResponse(ErrorCode.NONE, is_fenced=False), delay=0.1)
    await lifecycle._heartbeat()
    lifecycle.begin_controlled_shutdown()
    assert lifecycle.asked_shutdown_with_lease is None  # not asked yet: no heartbeat went out
    await lifecycle._heartbeat()
    assert lifecycle.asked_shutdown_with_lease is True
    lifecycle.conn.reply = rpc.BrokerHeartbeatResponse(ErrorCode.NONE, is_fenced=True, should_shutdown=True)
    await lifecycle._heartbeat()
    assert lifecycle.shutdown_complete.is_set() and lifecycle.asked_shutdown_with_lease is True


async def test_a_stop_that_began_under_the_lease_but_asked_after_it_lapsed_is_not_leased(autojump_clock):
    # SIGTERM reached a paused process while it held its lease; it heartbeats only once it runs
    # again, after the lease lapsed (the controller may have fenced it meanwhile and then lets it
    # stop at once, on stale metadata). What counts is the lease when the controller was asked.
    lifecycle = _lifecycle(rpc.BrokerHeartbeatResponse(ErrorCode.NONE, is_fenced=False), delay=0.1)
    await lifecycle._heartbeat()
    lifecycle.begin_controlled_shutdown()
    assert lifecycle.holds_session_lease()
    await trio.sleep_until(lifecycle.lease_until)  # paused
    lifecycle.conn.reply = rpc.BrokerHeartbeatResponse(ErrorCode.NONE, is_fenced=True, should_shutdown=True)
    await lifecycle._heartbeat()
    assert lifecycle.shutdown_complete.is_set()
    assert lifecycle.asked_shutdown_with_lease is False


async def test_an_unanswered_shutdown_heartbeat_does_not_count_as_asking(autojump_clock):
    lifecycle = _lifecycle(rpc.BrokerHeartbeatResponse(ErrorCode.NONE, is_fenced=False), delay=0.1)
    await lifecycle._heartbeat()
    lifecycle.begin_controlled_shutdown()

    async def unreachable(request, *, timeout):
        raise ControllerUnavailableError("no controller answered")

    answer, lifecycle.conn.call = lifecycle.conn.call, unreachable
    assert not await lifecycle._heartbeat()
    assert lifecycle.asked_shutdown_with_lease is None
    await trio.sleep_until(lifecycle.lease_until)
    lifecycle.conn.call = answer
    await lifecycle._heartbeat()
    assert lifecycle.asked_shutdown_with_lease is False


async def test_the_lease_ends_when_its_own_node_stopping_closes_the_connection(autojump_clock, monkeypatch):
    # A node that halts (its metadata log dir failed) cancels all its tasks: the controller
    # connection's reader closes the socket on its way out and the controller, seeing the close,
    # fences the broker after the grace, while the rest of the node may take longer to wind down.
    ours, theirs = trio.testing.memory_stream_pair()

    async def connect(env, host, port, **kw):
        return ours

    async def controller():
        decoder = FrameDecoder()
        while data := await theirs.receive_some(1 << 16):
            decoder.feed(data)
            for frame in decoder:
                reply = rpc.BrokerHeartbeatResponse(ErrorCode.NONE, is_fenced=False)
                await theirs.send_all(encode_frame(reply, frame.correlation_id))
        closed.set()

    monkeypatch.setattr(client_module, "open_rpc_stream", connect)
    connection = ControllerConnection(RealEnv(seed=1), {1: ("n1", 9093)}, cluster_id="c")
    lifecycle = BrokerLifecycle(connection.env, connection, broker_id=4, metadata_offset=lambda: 0,
                                session_timeout=SESSION)
    lifecycle.broker_epoch = 10  # registered
    closed = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(controller)
        node = trio.CancelScope()

        async def node_tasks():
            with node:
                await connection.run()

        nursery.start_soon(node_tasks)
        await trio.sleep(0.1)
        assert await lifecycle._heartbeat() and lifecycle.holds_session_lease()
        node.cancel()
        await closed.wait()  # the controller sees the connection closed
        assert not lifecycle.holds_session_lease()
