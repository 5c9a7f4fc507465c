"""The broker's side of its lifecycle with the controller (KRaft's BrokerLifecycleManager).

1. Register with a fresh incarnation id (each process start is a new incarnation; the
   controller gives it a new broker epoch: the offset of its RegisterBroker record), and
   with the previous incarnation's epoch if that one lost no data (KIP-966; else -1: the
   controller takes the broker out of every ISR and ELR). `on_registered` may persist the
   new epoch for the next start (metadata.incarnation_record).
2. Heartbeat every `heartbeat_interval` (2 s by default) with the offset of the metadata
   the broker has applied. The controller unfences the broker once that offset reaches its
   registration, and fences it when heartbeats stop for a session (9 s).
3. Controlled shutdown (on SIGTERM): heartbeats say `want_shutdown`; the controller moves
   leadership away first and answers `should_shutdown` once done, which ends `run`.

The session lease (`holds_session_lease`): the controller fences a broker only once it has
heard nothing from it for a whole session, counted from when a heartbeat *arrived*; so a
broker whose heartbeat *sent* at t was answered unfenced is sure, until t + session, that
no other broker has taken its leaderships after a fencing. A broker cut off from the
controller (its metadata stale, its leaderships maybe moved) stops serving reads that must
not go back in time once the lease lapses — the group coordinator's OffsetFetch. (Kafka
has no such lease: its cut-off coordinator answers from memory until its metadata says
otherwise. A leadership moved away from a live, unfenced broker — a preferred-leader
election — is not covered: that broker learns it from the metadata only.)

A heartbeat answered STALE_BROKER_EPOCH or BROKER_ID_NOT_REGISTERED (the controller forgot
or replaced us) sends the broker back to step 1 with the same incarnation.

`AfterOwnRegistration` keeps the data plane (replica manager, ...) from acting on metadata
until it holds this incarnation's registration (Kafka's initial catch-up): the metadata a
restarted broker loads still describes its previous incarnation, whose leaderships the
controller may not have taken back yet. A broker that lost unflushed data must not lead,
shrink an ISR to itself or be followed from that stale picture; once the controller has
processed the new registration, it has moved those leaderships and ISR memberships.
"""
from __future__ import annotations

import logging
import math
import uuid
from typing import Awaitable, Callable, Sequence

import trio

from metadata.controller import rpc
from metadata.controller.client import ControllerConnection, ControllerUnavailableError
from metadata.image import MetadataImage
from metadata.loader import MetadataLoader, MetadataPublisher
from metadata.records import Endpoint
from storage.env import Env
from wire.error_codes import ErrorCode

__all__ = ["BrokerLifecycle", "AfterOwnRegistration", "DEFAULT_HEARTBEAT_INTERVAL", "LEASE_FRACTION"]

log = logging.getLogger("raftkafka.metadata.lifecycle")

DEFAULT_HEARTBEAT_INTERVAL = 2.0  # broker.heartbeat.interval.ms = 2000
DEFAULT_SESSION_TIMEOUT = 9.0  # broker.session.timeout.ms = 9000
# The lease is this share of a session: a margin for the two monotonic clocks' rates (and
# for a controller configured with a slightly shorter session), far above real drift.
LEASE_FRACTION = 0.8


class BrokerLifecycle:
    def __init__(self, env: Env, connection: ControllerConnection, *, broker_id: int,
                 metadata_offset: Callable[[], int], endpoints: Sequence[Endpoint] = (),
                 rack: str | None = None, log_dirs: Sequence[uuid.UUID] = (),
                 heartbeat_interval: float = DEFAULT_HEARTBEAT_INTERVAL,
                 session_timeout: float = DEFAULT_SESSION_TIMEOUT,
                 incarnation_id: uuid.UUID | None = None, previous_broker_epoch: int = -1,
                 on_registered: Callable[[int], Awaitable[None]] | None = None):
        self.env = env
        self.conn = connection
        self.broker_id = broker_id
        self.metadata_offset = metadata_offset
        self.endpoints = tuple(endpoints)
        self.rack = rack
        self.log_dirs = tuple(log_dirs)
        self.heartbeat_interval = heartbeat_interval
        self.session_timeout = session_timeout
        self.lease_until = -math.inf  # env.now() until which no fencing can have happened
        self.lease_connection = -1  # the controller connection the lease was earned on
        self.incarnation_id = incarnation_id or env.uuid()
        # The epoch of the previous incarnation if it ended without losing data (a clean
        # shutdown, say: metadata.incarnation_record), else -1: an unclean restart (KIP-966).
        self.previous_broker_epoch = previous_broker_epoch
        # The incarnation this one replaces, proven dead by the data dir locks, if any.
        self.previous_incarnation_id: uuid.UUID | None = None
        self.on_registered = on_registered  # e.g. persist the epoch for the next start
        self.broker_epoch = -1
        self.is_fenced = True
        self.is_caught_up = False
        self.want_fence = False
        self.registered = trio.Event()
        self.unfenced = trio.Event()  # set the first time the controller unfences us
        self.shutdown_complete = trio.Event()
        self._want_shutdown = False
        # Whether it held its session lease when it sent the first heartbeat asking to shut
        # down that the controller answered (None until then): if so, the controller had not
        # fenced it and runs the controlled shutdown (leaderships move first); if not, it may
        # have been fenced, and a fenced broker is let stop at once on stale metadata.
        self.asked_shutdown_with_lease: bool | None = None
        self._wake = trio.Event()
        # A broken controller connection ends the lease and starts the controller's close
        # grace (metadata.controller.connection_grace): heartbeat again now, not at the interval.
        connection.on_lost = lambda: self._wake.set()

    # ------------------------------------------------------------------ public
    def holds_session_lease(self) -> bool:
        """Whether the controller cannot have fenced this broker yet (see the module doc).
        The controller fences a broker soon after its connection closes
        (metadata.controller.connection_grace): the lease ends with that connection."""
        return self.env.now() < self.lease_until and self.conn.still_connected(self.lease_connection)

    @property
    def shutting_down(self) -> bool:
        """Whether it asked the controller to let it shut down (and so to fence it)."""
        return self._want_shutdown

    def begin_controlled_shutdown(self) -> None:
        """Ask the controller to move leadership away; `shutdown_complete` is set when done."""
        self._want_shutdown = True
        self._wake.set()

    async def controlled_shutdown(self, timeout: float) -> bool:
        """Begin a controlled shutdown and wait for it (False if it timed out)."""
        self.begin_controlled_shutdown()
        with self.env.move_on_after(timeout):
            await self.shutdown_complete.wait()
        return self.shutdown_complete.is_set()

    async def run(self) -> None:
        """Register, then heartbeat until the controller lets a controlled shutdown finish."""
        while not self.shutdown_complete.is_set():
            if self.broker_epoch < 0:
                await self._register()
                continue
            if not await self._heartbeat():
                continue
            if self.shutdown_complete.is_set():
                return
            with self.env.move_on_after(self._interval()):
                await self._wake.wait()
            self._wake = trio.Event()

    def _interval(self) -> float:
        # While shutting down, poll faster: the controller finishes in steps.
        return min(self.heartbeat_interval, 0.2) if self._want_shutdown else self.heartbeat_interval

    # ------------------------------------------------------------------- steps
    async def _register(self) -> None:
        request = rpc.BrokerRegistrationRequest(
            self.conn.cluster_id, self.broker_id, self.incarnation_id,
            [rpc.EndpointInfo(e.name, e.host, e.port, e.security_protocol) for e in self.endpoints],
            self.rack, list(self.log_dirs), self.previous_broker_epoch, self.previous_incarnation_id)
        try:
            reply = await self.conn.call(request, timeout=self.heartbeat_interval * 5)
        except ControllerUnavailableError as e:
            log.info("broker %d: registration failed (%s); retrying", self.broker_id, e)
            return
        if reply.error != ErrorCode.NONE:
            log.warning("broker %d: registration refused: %s %s", self.broker_id,
                        ErrorCode(reply.error).name, reply.message or "")
            await self.env.sleep(self.heartbeat_interval)
            return
        log.info("broker %d registered with epoch %d%s", self.broker_id, reply.broker_epoch,
                 "" if self.previous_broker_epoch < 0 else
                 f" (a clean restart of epoch {self.previous_broker_epoch})")
        if self.on_registered is not None:
            try:
                await self.on_registered(reply.broker_epoch)
            except OSError as e:  # the next start is then unclean, nothing worse
                log.warning("broker %d: cannot record epoch %d: %s", self.broker_id,
                            reply.broker_epoch, e)
        self.broker_epoch = reply.broker_epoch
        self.registered.set()

    async def _heartbeat(self) -> bool:
        request = rpc.BrokerHeartbeatRequest(
            self.conn.cluster_id, self.broker_id, self.broker_epoch, self.metadata_offset(),
            self.want_fence, self._want_shutdown)
        sent_at = self.env.now()
        leased_at_send = self.holds_session_lease()
        try:
            reply = await self.conn.call(request, timeout=self.heartbeat_interval * 2)
        except ControllerUnavailableError as e:
            log.info("broker %d: heartbeat failed (%s)", self.broker_id, e)
            return False
        if reply.error in (ErrorCode.STALE_BROKER_EPOCH, ErrorCode.BROKER_ID_NOT_REGISTERED):
            log.warning("broker %d: heartbeat answered %s; registering again", self.broker_id,
                        ErrorCode(reply.error).name)
            self.broker_epoch = -1
            self.lease_until = -math.inf
            return False
        if reply.error != ErrorCode.NONE:
            await self.env.sleep(self.heartbeat_interval)
            return False
        if request.want_shutdown and self.asked_shutdown_with_lease is None:
            self.asked_shutdown_with_lease = leased_at_send
        if self.is_fenced != reply.is_fenced:
            log.info("broker %d is now %s", self.broker_id,
                     "fenced" if reply.is_fenced else "unfenced")
        self.is_fenced = reply.is_fenced
        if reply.is_fenced:
            self.lease_until = -math.inf
        else:
            if self.lease_connection != self.conn.generation:
                self.lease_connection, self.lease_until = self.conn.generation, -math.inf
            self.lease_until = max(self.lease_until, sent_at + self.session_timeout * LEASE_FRACTION)
        self.is_caught_up = reply.is_caught_up
        if not reply.is_fenced:
            self.unfenced.set()
        if reply.should_shutdown and self._want_shutdown:
            self.shutdown_complete.set()
        return True


class AfterOwnRegistration:
    """A metadata publisher that installs `publisher` on `loader` once the published image
    holds the registration of incarnation `incarnation_id` of `broker_id`; from then on
    `publisher` gets the full state and every change (and this gate is gone)."""

    name = "after-own-registration"

    def __init__(self, loader: MetadataLoader, publisher: MetadataPublisher, *,
                 broker_id: int, incarnation_id: uuid.UUID):
        self.loader = loader
        self.publisher = publisher
        self.broker_id = broker_id
        self.incarnation_id = incarnation_id
        self.opened = False

    def publish(self, delta, image: MetadataImage) -> None:
        reg = image.brokers.get(self.broker_id)
        if self.opened or reg is None or reg.incarnation_id != self.incarnation_id:
            return
        self.opened = True
        self.loader.uninstall(self)
        self.loader.install(self.publisher)  # caught up: it gets this image's full state now
