"""An in-memory network of simulated hosts speaking reliable byte streams (TCP-like).

`SimNetwork` is the world; `SimNetwork.view(host)` is what one node sees, an
implementation of `storage.env.Network`. Hosts are plain names ("n1", "n2", ...):
no real address ever appears in a simulation.

Model:

- A connection is two one-way pipes. Bytes written to a pipe are delivered in
  FIFO order at `max(previous delivery, now + latency)`, latency drawn from the
  directed link's `LinkProfile` (min + exponential, a rare slow tail, and a
  "loss" probability that costs a retransmission timeout: TCP turns loss into
  delay). Different connections reorder freely. Writes made at one instant
  travel together, as back-to-back segments of one TCP flow do (a response
  written as header + file slices + trailer is one arrival, not one per write).
- A link can be blocked (partition, one-way or symmetric) or clogged until a
  time: bytes already sent and new ones are held, not lost, and flow once the
  link clears, as TCP retransmissions would. A connect() across a blocked link
  retries its SYN and times out; to a host without a listener it is refused.
- Resets (nemesis, or the death of an endpoint's process) drop in-flight bytes;
  both ends then get `trio.BrokenResourceError`.
- A small send window gives back-pressure: `send_all` waits while the peer
  has more than `window` unread bytes.

Receivers wait on their own pipe, so no pump task is needed: a pipe holds its
queue, and anything that changes what a receiver may see (new bytes, a reset,
a link clearing) wakes it. Pipes and stream ends are in simulations.sim_stream;
this module keeps links, listeners, connection setup and teardown.
"""
from __future__ import annotations

import errno
import math
import random
from collections import deque
from dataclasses import dataclass
from typing import Callable

import trio

from storage.env import StreamHandler
from simulations.sim_stream import Connection, Pipe, SimStream
from simulations.determinism import current_sim_clock
from simulations.tls_model import TlsRefused, model_handshake
from simulations.trace import Trace

__all__ = ["LinkProfile", "SimNetwork", "SimStream", "HostNetwork"]  # SimStream: simulations.sim_stream

LOCAL_ALIASES = ("", "0.0.0.0", "::", "localhost", "127.0.0.1", "::1")


@dataclass
class LinkProfile:
    """Latency model of one direction of one link, in seconds."""

    min_latency: float = 0.0005
    mean_extra: float = 0.001  # exponential on top of the minimum
    tail_probability: float = 0.001  # rare slow packets (FoundationDB's halfLatency tail)
    tail_max: float = 0.1
    loss: float = 0.0  # probability a segment is lost once and retransmitted
    retransmit_timeout: float = 0.2

    def draw(self, rng: random.Random) -> float:
        delay = self.min_latency + rng.expovariate(1.0 / self.mean_extra)
        if rng.random() < self.tail_probability:
            delay += rng.uniform(0.0, self.tail_max)
        if self.loss and rng.random() < self.loss:
            delay += self.retransmit_timeout
        return delay


class Link:
    __slots__ = ("src", "dst", "profile", "blocked", "clogged_until", "pipes")

    def __init__(self, src: str, dst: str, profile: LinkProfile):
        self.src, self.dst, self.profile = src, dst, profile
        self.blocked = False
        self.clogged_until = 0.0
        self.pipes: dict[int, Pipe] = {}

    def clear_at(self, now: float) -> float:
        """Earliest time bytes may cross (inf while blocked)."""
        return math.inf if self.blocked else max(now, self.clogged_until)

    def wake_all(self) -> None:
        for pipe in list(self.pipes.values()):
            pipe.wake()


@dataclass
class _Listener:
    host: str
    port: int
    handler: StreamHandler
    nursery: trio.Nursery
    tls: object = None  # storage.tls.TlsContext of a TLS listener


class SimNetwork:
    """All hosts, links, listeners and connections of one simulation."""

    def __init__(
        self,
        rng: random.Random,
        trace: Trace,
        *,
        default_profile: LinkProfile | None = None,
        connect_timeout: float = 10.0,
        window: int = 1 << 20,
    ):
        self.rng = rng
        self.trace = trace
        self.default_profile = default_profile or LinkProfile()
        self.connect_timeout = connect_timeout
        self.window = window
        self._hosts: dict[str, bool] = {}  # name -> up
        self._links: dict[tuple[str, str], Link] = {}
        self._listeners: dict[tuple[str, int], _Listener] = {}
        self._connections: dict[int, Connection] = {}
        self._next_conn = 0
        self._next_port: dict[str, int] = {}
        # The last connections that ended, for the replay fault (simulations.replay).
        self.ended: deque[Connection] = deque(maxlen=64)
        self._bind_clock()

    def _bind_clock(self) -> None:
        """Read the run's `SimClock` directly (trio.current_time() costs three calls through trio)."""
        self.clock = current_sim_clock()
        self.now: Callable[[], float] = self.clock.current_time if self.clock is not None else trio.current_time

    # -- topology -----------------------------------------------------------
    def add_host(self, name: str) -> None:
        if name in LOCAL_ALIASES:
            raise ValueError(f"reserved host name {name!r}")
        self._hosts[name] = True
        self._next_port.setdefault(name, 40000)

    @property
    def hosts(self) -> list[str]:
        return list(self._hosts)

    def view(self, host: str, alive: Callable[[], bool] = lambda: True) -> "HostNetwork":
        """The `Network` seen by code running on `host` (refuses all I/O once not `alive()`)."""
        if host not in self._hosts:
            raise KeyError(host)
        return HostNetwork(self, host, alive)

    def link(self, src: str, dst: str) -> Link:
        key = (src, dst)
        link = self._links.get(key)
        if link is None:
            profile = LinkProfile(min_latency=0.00005, mean_extra=0.00005, tail_probability=0.0) if src == dst else self.default_profile
            link = self._links[key] = Link(src, dst, profile)
        return link

    # -- faults -------------------------------------------------------------
    def set_blocked(self, src: str, dst: str, blocked: bool) -> None:
        """Block (partition) or unblock the one-way link src -> dst."""
        if src == dst:
            return
        link = self.link(src, dst)
        if link.blocked != blocked:
            link.blocked = blocked
            self.trace.record(src, "block" if blocked else "unblock", dst=dst)
            link.wake_all()

    def partition(self, groups: list[list[str]]) -> None:
        """Symmetric partition: hosts in different groups cannot talk (others untouched)."""
        side = {h: i for i, g in enumerate(groups) for h in g}
        for a in sorted(side):
            for b in sorted(side):
                if side[a] != side[b]:
                    self.set_blocked(a, b, True)

    def clog(self, src: str, dst: str, until: float) -> None:
        """Hold every byte on src -> dst until sim time `until`."""
        link = self.link(src, dst)
        if until > link.clogged_until:
            link.clogged_until = until
            self.trace.record(src, "clog", dst=dst, until=round(until, 6))
            link.wake_all()

    def heal(self) -> None:
        """Remove every partition and clog."""
        for key in sorted(self._links):
            link = self._links[key]
            if link.blocked or link.clogged_until > trio.current_time():
                link.blocked = False
                link.clogged_until = 0.0
                link.wake_all()
        self.trace.record("net", "heal")

    def reset_between(self, a: str, b: str) -> int:
        """Reset every connection between hosts a and b; returns how many."""
        victims = [c for c in self._connections.values() if {c.client, c.server} == {a, b}]
        for conn in victims:
            self._reset(conn)
        return len(victims)

    def recorded_connections(self) -> list[Connection]:
        """The open connections and the last ended ones, oldest first (for the replay fault)."""
        return sorted([*self.ended, *self._connections.values()], key=lambda c: c.id)

    def host_down(self, host: str) -> None:
        """The host's process died: listeners vanish, connections reset."""
        self._hosts[host] = False
        for key in [k for k in self._listeners if k[0] == host]:
            del self._listeners[key]
        for conn in [c for c in self._connections.values() if host in (c.client, c.server)]:
            self._reset(conn)
        self.trace.record(host, "net_down")

    def host_up(self, host: str) -> None:
        self._hosts[host] = True
        self.trace.record(host, "net_up")

    def _reset(self, conn: Connection) -> None:
        for pipe in (conn.to_server, conn.to_client):
            pipe.broken = True
            pipe.drop()
            pipe.link.pipes.pop(pipe.key, None)
        if self._connections.pop(conn.id, None) is not None:
            self.ended.append(conn)
        self.trace.record(conn.client, "reset", conn=conn.id, peer=conn.server)

    def _end_closed(self, conn: Connection) -> None:
        conn.open_ends -= 1
        if conn.open_ends <= 0 and self._connections.pop(conn.id, None) is not None:
            self.ended.append(conn)
            for pipe in (conn.to_server, conn.to_client):
                pipe.link.pipes.pop(pipe.key, None)

    # -- connection setup ---------------------------------------------------
    def _resolve(self, host: str, src: str) -> str:
        if host in LOCAL_ALIASES:
            return src
        if host not in self._hosts:
            raise OSError(errno.EHOSTUNREACH, f"no route to host {host!r}")
        return host

    async def _connect(self, src: str, host: str, port: int, tls=None) -> SimStream:
        dst = self._resolve(host, src)
        fwd, back = self.link(src, dst), self.link(dst, src)
        deadline = trio.current_time() + self.connect_timeout
        backoff = 1.0  # the kernel retries a lost SYN with exponential backoff
        while True:
            now = trio.current_time()
            if not fwd.blocked and not back.blocked:
                arrive = max(now, fwd.clogged_until) + fwd.profile.draw(self.rng)
                if arrive <= deadline:
                    await trio.sleep_until(arrive)
                    if not fwd.blocked:
                        break
            if now + backoff >= deadline:
                await trio.sleep_until(deadline)
                self.trace.record(src, "connect_timeout", dst=dst, port=port)
                raise TimeoutError(errno.ETIMEDOUT, f"connect to {dst}:{port} timed out")
            await trio.sleep_until(now + backoff)
            backoff *= 2
        listener = self._listeners.get((dst, port))
        if listener is None or not self._hosts.get(dst):
            await trio.sleep(back.profile.draw(self.rng))
            self.trace.record(src, "connect_refused", dst=dst, port=port)
            raise ConnectionRefusedError(errno.ECONNREFUSED, f"connection refused by {dst}:{port}")
        try:
            client_cert = model_handshake(tls and tls.context, listener.tls and listener.tls.context, host)
        except TlsRefused as e:
            await trio.sleep(back.profile.draw(self.rng))  # the refusal travels back
            self.trace.record(src, "tls_refused", dst=dst, port=port)
            raise TlsRefused(f"TLS handshake with {dst}:{port} failed: {e}") from None
        self._next_conn += 1
        cid = self._next_conn
        if self.clock is None:
            self._bind_clock()  # the network was built outside the run
        to_server, to_client = Pipe(2 * cid, fwd, self.clock), Pipe(2 * cid + 1, back, self.clock)
        conn = Connection(cid, src, dst, port, to_server, to_client)
        self._connections[conn.id] = conn
        self.trace.record(src, "connect", conn=conn.id, dst=dst, port=port)
        server_end = SimStream(self, conn, dst, to_client, to_server)
        server_end.peer_certificate = client_cert
        listener.nursery.start_soon(_run_handler, listener.handler, server_end)
        await trio.sleep(back.profile.draw(self.rng))  # the SYN-ACK travels back
        client_end = SimStream(self, conn, src, to_server, to_client)
        if conn.id not in self._connections:
            raise ConnectionResetError(errno.ECONNRESET, f"connection to {dst}:{port} reset")
        return client_end

    async def _serve(self, host: str, port: int, handler: StreamHandler, task_status, tls=None) -> None:
        if port == 0:
            port = self._next_port[host]
            while (host, port) in self._listeners:
                port += 1
            self._next_port[host] = port + 1
        key = (host, port)
        if key in self._listeners:
            raise OSError(errno.EADDRINUSE, f"address {host}:{port} already in use")
        async with trio.open_nursery() as nursery:
            listener = _Listener(host, port, handler, nursery, tls)
            self._listeners[key] = listener
            self.trace.record(host, "listen", port=port)
            try:
                task_status.started(port)
                await trio.sleep_forever()
            finally:
                if self._listeners.get(key) is listener:
                    del self._listeners[key]


async def _run_handler(handler: StreamHandler, stream: SimStream) -> None:
    try:
        await handler(stream)
    finally:
        await trio.aclose_forcefully(stream)


class HostNetwork:
    """`storage.env.Network` for code running on one host."""

    def __init__(self, net: SimNetwork, host: str, alive: Callable[[], bool]):
        self._net, self.host, self._alive = net, host, alive

    def _check_alive(self) -> None:
        if not self._alive():
            raise OSError(errno.ENETDOWN, f"host {self.host} is down")

    # TLS (`tls=`): the handshake's decision is modelled (simulations.tls_model), the
    # encryption is not.
    async def serve(self, host: str, port: int, handler: StreamHandler, *, tls=None,
                    task_status=trio.TASK_STATUS_IGNORED) -> None:
        self._check_alive()
        if host not in LOCAL_ALIASES and host != self.host:
            raise OSError(errno.EADDRNOTAVAIL, f"{host} is not an address of {self.host}")
        await self._net._serve(self.host, port, handler, task_status, tls)

    async def connect(self, host: str, port: int, *, tls=None) -> trio.abc.Stream:
        self._check_alive()
        return await self._net._connect(self.host, host, port, tls)
