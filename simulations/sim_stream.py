"""One simulated TCP connection: two one-way pipes and the two stream ends that use them.

A `Pipe` holds one direction's bytes with their delivery times (FIFO, at
`max(previous delivery, now + latency)`), the unread count the send window
checks, and the parked reader it wakes. A `SimStream` is one end, a complete
`trio.abc.HalfCloseableStream`: it writes into its out pipe and reads from its
in pipe, recording each send and receive in the run's trace. The network
(simulations.network) owns links, listeners and connection setup and teardown.
"""
from __future__ import annotations

import functools
import math
import operator
from collections import deque
from typing import TYPE_CHECKING, Callable

import trio

from simulations.determinism import SimClock

if TYPE_CHECKING:
    from simulations.network import Link, SimNetwork

__all__ = ["Pipe", "Connection", "SimStream"]


class Pipe:
    """One direction of a connection: (deliver_at, bytes) in FIFO; None marks EOF.

    The reader parks until its next delivery time; a push into an empty queue sets that
    time instead of waking it, so each delivery costs the reader one wake-up. On a
    `SimClock` the wake-up is a clock timer (no cancel scope, no Cancelled raised per
    delivery); on any other clock, a cancel scope's deadline.
    """

    __slots__ = ("key", "link", "queue", "last_delivery", "last_push", "unread", "broken", "reader_closed",
                 "_changed", "reader", "_reader_due", "_reader_scope", "_parks", "_call_at", "_clock")

    def __init__(self, key: int, link: "Link", clock: SimClock | None):
        self.key = key
        self.link = link
        self._clock = clock  # the run's SimClock (its timers wake the reader), or None
        self._call_at = clock.call_at if clock is not None else None
        link.pipes[key] = self
        self.queue: deque[tuple[float, bytes | None]] = deque()
        self.last_delivery = 0.0
        self.last_push = -1.0  # when the newest queued chunk was written
        self.unread = 0
        self.broken = False
        self.reader_closed = False
        self._changed: trio.Event | None = None  # senders waiting for window (made on demand)
        self.reader: trio.lowlevel.Task | None = None  # the parked reader, if any
        self._reader_due = math.inf  # when the parked reader is to look again
        self._reader_scope: trio.CancelScope | None = None  # its deadline, off a SimClock
        self._parks = 0  # counts parkings, so a timer armed for an earlier one is ignored

    @property
    def changed(self) -> trio.Event:
        if self._changed is None:
            self._changed = trio.Event()
        return self._changed

    def wake(self) -> None:
        """Something a sender or the reader waits on changed: let them look again."""
        if self._changed is not None:
            self._changed.set()
            self._changed = None
        reader = self.reader
        if reader is not None:
            self.reader = None
            trio.lowlevel.reschedule(reader)

    def push(self, data: bytes | None, latency: float | Callable[[], float], now: float) -> None:
        """Queue `data` (None = EOF) after `latency` (a float, or a callable drawing one).

        Data written at the same instant as the newest queued chunk joins that chunk:
        it is still in flight (every latency is > 0), and back-to-back writes of one
        flow cross the network together."""
        queue = self.queue
        if data and self.last_push == now and queue and queue[-1][1]:
            at, tail = queue[-1]
            queue[-1] = (at, tail + data)
            self.unread += len(data)
            return
        self.last_push = now
        if not isinstance(latency, float):
            latency = latency()
        at = max(self.last_delivery, now + latency)
        self.last_delivery = at
        was_empty = not self.queue
        self.queue.append((at, data))
        if data:
            self.unread += len(data)
        # Only the head of the FIFO decides when the reader can go on.
        if was_empty and self.reader is not None:
            self._arm(max(at, self.link.clear_at(now)))

    def _arm(self, due: float) -> None:
        """Make the parked reader look again at `due` (if that is sooner than planned)."""
        if due >= self._reader_due:
            return
        self._reader_due = due
        if self._reader_scope is not None:
            self._reader_scope.deadline = due
        else:
            self._call_at(due, functools.partial(self._wake_reader, self._parks))

    def _wake_reader(self, parks: int) -> None:
        if self._parks == parks:
            self.wake()

    async def park_reader(self, deadline: float) -> None:
        """Block the reader until `deadline` (which a push may bring forward) or a wake()."""
        task = trio.lowlevel.current_task()

        def abort(_raise_cancel) -> trio.lowlevel.Abort:
            self.reader = None
            return trio.lowlevel.Abort.SUCCEEDED

        self._parks += 1
        self.reader, self._reader_due = task, math.inf
        if self._clock is None:  # built outside a SimClock run: ask this run's clock
            self._call_at = getattr(trio.lowlevel.current_clock(), "call_at", None)
        try:
            if self._call_at is not None:
                self._arm(deadline)
                await trio.lowlevel.wait_task_rescheduled(abort)
            else:
                with trio.CancelScope() as self._reader_scope:
                    self._arm(deadline)
                    await trio.lowlevel.wait_task_rescheduled(abort)
        finally:
            self.reader, self._reader_scope = None, None

    def drop(self) -> None:
        self.queue.clear()
        self.unread = 0
        self.wake()


class Connection:
    __slots__ = ("id", "client", "server", "port", "to_server", "to_client", "open_ends", "sent")

    RECORD_BYTES = 16 * 1024  # of what the client sent, kept for the replay fault (simulations.replay)

    def __init__(self, cid: int, client: str, server: str, port: int, to_server: Pipe, to_client: Pipe):
        self.id, self.client, self.server, self.port = cid, client, server, port
        self.to_server, self.to_client = to_server, to_client
        self.open_ends = 2
        self.sent = bytearray()


class SimStream(trio.abc.HalfCloseableStream):
    """One end of a simulated connection; a complete `trio.abc.Stream`."""

    def __init__(self, net: "SimNetwork", conn: Connection, local: str, out: Pipe, inp: Pipe):
        self._net, self._conn, self.local, self._out, self._in = net, conn, local, out, inp
        self._closed = False
        self._eof_sent = False
        self._sending = False
        self._receiving = False
        self.peer_certificate: dict | None = None  # what a TLS client proved (simulations.tls_model)

    def getpeercert(self) -> dict | None:
        """As `ssl.SSLSocket.getpeercert()` on the server end of a modelled TLS connection."""
        return self.peer_certificate

    @property
    def connection_id(self) -> int:
        return self._conn.id

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        if self._sending:
            raise trio.BusyResourceError("another task is already sending on this stream")
        self._sending = True
        try:
            await trio.lowlevel.checkpoint_if_cancelled()
            out = self._out
            if self._closed or self._eof_sent or out.broken or out.reader_closed or out.unread >= self._net.window:
                await self._wait_window()  # raises, or waits for the reader to make room
            data = bytes(data)
            if data:
                conn = self._conn
                if out is conn.to_server and len(conn.sent) < Connection.RECORD_BYTES:
                    conn.sent += data
                out.push(data, self._draw_latency, self._net.now())
                self._net.trace.record_io(self.local, "send", self._conn.id, len(data))
            # A send that did not block is a schedule point, as on a real socket, unless
            # yielding could not let anything else happen first (see only_this_task_can_run).
            clock = self._net.clock
            if clock is None or not clock.only_this_task_can_run():
                await trio.lowlevel.cancel_shielded_checkpoint()
        finally:
            self._sending = False

    async def wait_send_all_might_not_block(self) -> None:
        if self._sending:
            raise trio.BusyResourceError("another task is already sending on this stream")
        await trio.lowlevel.checkpoint_if_cancelled()
        await self._wait_window()
        await trio.lowlevel.cancel_shielded_checkpoint()

    async def _wait_window(self) -> None:
        while True:
            self._check_can_send()
            if self._out.unread < self._net.window:
                return
            await self._out.changed.wait()

    def _check_can_send(self) -> None:
        if self._closed or self._eof_sent:
            raise trio.ClosedResourceError("stream was closed")
        if self._out.broken or self._out.reader_closed:
            raise trio.BrokenResourceError("connection reset by peer")

    async def send_eof(self) -> None:
        await trio.lowlevel.checkpoint()
        if self._closed:
            raise trio.ClosedResourceError("stream was closed")
        if not self._eof_sent:
            self._eof_sent = True
            self._push_fin()

    def _draw_latency(self) -> float:
        return self._out.link.profile.draw(self._net.rng)

    def _push_fin(self) -> None:
        if not self._out.broken and not self._out.reader_closed:
            self._out.push(None, self._out.link.profile.draw(self._net.rng), self._net.now())

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if max_bytes is not None:
            max_bytes = operator.index(max_bytes)
            if max_bytes < 1:
                raise ValueError("max_bytes must be >= 1")
        if self._receiving:
            raise trio.BusyResourceError("another task is already receiving on this stream")
        self._receiving = True
        try:
            await trio.lowlevel.checkpoint_if_cancelled()
            blocked = False
            while True:
                if self._closed:
                    raise trio.ClosedResourceError("stream was closed")
                pipe = self._in
                if pipe.broken:
                    raise trio.BrokenResourceError("connection reset by peer")
                now = self._net.now()
                ready_at = math.inf
                if pipe.queue:
                    ready_at = max(pipe.queue[0][0], pipe.link.clear_at(now))
                    if ready_at <= now:
                        data = self._take(pipe, now, max_bytes or 65536)
                        if not blocked:  # having blocked was this call's schedule point
                            clock = self._net.clock
                            if clock is None or not clock.only_this_task_can_run():
                                await trio.lowlevel.cancel_shielded_checkpoint()
                        return data
                blocked = True
                await pipe.park_reader(ready_at)
        finally:
            self._receiving = False

    def _take(self, pipe: Pipe, now: float, max_bytes: int) -> bytes:
        """Pop up to max_bytes of due data; b"" (leaving the marker) at EOF."""
        queue = pipe.queue
        chunk = queue[0][1]
        if chunk is not None and len(chunk) <= max_bytes and (len(queue) == 1 or queue[1][0] > now):
            # The common case: the one due chunk, whole (the loop below would do the same).
            queue.popleft()
            pipe.unread -= len(chunk)
            pipe.wake()  # a sender may be waiting for window
            self._net.trace.record_io(self.local, "recv", self._conn.id, len(chunk))
            return chunk
        parts: list[bytes] = []
        size = 0
        while pipe.queue and size < max_bytes and pipe.queue[0][0] <= now:
            at, chunk = pipe.queue[0]
            if chunk is None:
                break
            room = max_bytes - size
            if len(chunk) > room:
                pipe.queue[0] = (at, chunk[room:])
                chunk = chunk[:room]
            else:
                pipe.queue.popleft()
            parts.append(chunk)
            size += len(chunk)
        pipe.unread -= size
        if size:
            pipe.wake()  # a sender may be waiting for window
            self._net.trace.record_io(self.local, "recv", self._conn.id, size)
        return b"".join(parts)

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            if not self._eof_sent:
                self._push_fin()
            # Whatever the peer still sends is refused (TCP would answer RST).
            self._in.reader_closed = True
            self._in.drop()
            self._out.wake()
            self._net._end_closed(self._conn)
        await trio.lowlevel.checkpoint()
