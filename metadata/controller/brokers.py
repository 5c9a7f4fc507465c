"""Broker lifecycle on the controller: registration, heartbeats, fencing, controlled shutdown.

Each operation reads the (speculative) image plus the heartbeat soft state and returns
``(batches, result)``: batches of records to append in order, each batch holding at most
MAX_PARTITION_CHANGES_PER_BATCH partition changes (a fence of a broker leading 10k
partitions is several Raft batches, as in Kafka). `next_offset` is the log offset the first
generated record will get; the broker epoch of a new registration is that offset.
"""
from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, replace
from typing import Mapping

from metadata.controller.connection_grace import ConnectionGrace
from metadata.controller.heartbeats import BrokerHeartbeatManager
from metadata.controller.replication import batches, elect_leaderless, remove_broker_from_isrs
from metadata.image import MetadataImage
from metadata.records import (
    BrokerRegistrationChange, Endpoint, Record, RegisterBroker, UnregisterBroker,
)
from wire.endpoints import host_ok
from wire.error_codes import ErrorCode

__all__ = [
    "BrokerRegistrationRequest", "RegistrationResult", "register_broker", "registration_error",
    "HeartbeatRequest", "HeartbeatResult", "broker_heartbeat", "fence_stale_broker",
    "fence_broker", "fence_closed_broker", "unregister_broker", "BrokerState",
]

Batches = list[list[Record]]
MAX_NAMED_PARTITIONS = 20  # an UnregisterBroker refusal names this many of the partitions held
# What a registration may name: node ids are int32 in every Kafka message, a rack and a
# listener name travel in int16-length strings, security protocols are Kafka's four; the
# counts bound the record every snapshot carries (real brokers have a few of each).
MAX_BROKER_ID = (1 << 31) - 1
MAX_ENDPOINTS = 100
MAX_LOG_DIRS = 1000
MAX_NAME_BYTES = 32767
SECURITY_PROTOCOL_IDS = range(4)  # PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL


@dataclass(frozen=True, slots=True)
class BrokerRegistrationRequest:
    broker_id: int
    incarnation_id: uuid.UUID
    endpoints: tuple[Endpoint, ...] = ()
    rack: str | None = None
    log_dirs: tuple[uuid.UUID, ...] = ()
    previous_broker_epoch: int = -1  # the epoch it shut down cleanly with (KIP-966), or -1
    # The incarnation it replaces, proven dead by its data dir locks (metadata.data_dir_lock).
    previous_incarnation_id: uuid.UUID | None = None


@dataclass(frozen=True, slots=True)
class RegistrationResult:
    error: ErrorCode
    broker_epoch: int = -1
    message: str | None = None


def registration_error(req: BrokerRegistrationRequest) -> str | None:
    """Why the metadata cannot hold this registration (every client's Metadata answer names its
    id and endpoints), or None."""
    if not 0 <= req.broker_id <= MAX_BROKER_ID:
        return f"broker id {req.broker_id} is not between 0 and {MAX_BROKER_ID}"
    if len(req.endpoints) > MAX_ENDPOINTS or len(req.log_dirs) > MAX_LOG_DIRS:
        return (f"{len(req.endpoints)} endpoints and {len(req.log_dirs)} log dirs: a broker registers "
                f"at most {MAX_ENDPOINTS} endpoints and {MAX_LOG_DIRS} log dirs")
    for e in req.endpoints:  # port 0: a listener not bound yet
        if not (0 < len(e.name.encode()) <= MAX_NAME_BYTES and host_ok(e.host) and 0 <= e.port < 65536
                and e.security_protocol in SECURITY_PROTOCOL_IDS):
            return f"endpoint {e.name[:100]!r} {e.host[:100]!r}:{e.port} ({e.security_protocol}) cannot be reached"
    if req.rack is not None and len(req.rack.encode()) > MAX_NAME_BYTES:
        return f"a rack of {len(req.rack.encode())} bytes is longer than {MAX_NAME_BYTES}"
    return None


def register_broker(image: MetadataImage, req: BrokerRegistrationRequest, *, next_offset: int,
                    heartbeats: BrokerHeartbeatManager, now: float,
                    static: Mapping[str, str] | None = None,
                    ) -> tuple[Batches, RegistrationResult]:
    refused = registration_error(req)
    if refused is not None:
        return [], RegistrationResult(ErrorCode.INVALID_REQUEST, -1, refused)
    existing = image.brokers.get(req.broker_id)
    if existing is not None and existing.incarnation_id == req.incarnation_id:
        # A retry of a registration we already accepted: same epoch, nothing to write.
        heartbeats.touch(req.broker_id, now)
        return [], RegistrationResult(ErrorCode.NONE, existing.epoch)
    if (existing is not None and heartbeats.has_live_session(req.broker_id, now)
            and req.previous_incarnation_id != existing.incarnation_id):
        # Another incarnation may still run. One that names the registered incarnation as
        # the one it replaces holds its data dir locks, so that one is dead: replace it now.
        return [], RegistrationResult(
            ErrorCode.DUPLICATE_BROKER_REGISTRATION, -1,
            f"Another broker is registered with that broker id {req.broker_id}.")
    changes: list = []
    if existing is not None:
        # The old incarnation is gone. Unless it shut down cleanly with the epoch it now
        # reports, its log may have lost unflushed data: drop it from ISRs and ELRs.
        unclean = req.previous_broker_epoch != existing.epoch
        if unclean or not existing.fenced:
            changes = remove_broker_from_isrs(image, req.broker_id, unclean_shutdown=unclean,
                                              static=static)
    epoch = next_offset + len(changes)
    register = RegisterBroker(
        broker_id=req.broker_id, incarnation_id=req.incarnation_id, broker_epoch=epoch,
        endpoints=req.endpoints, rack=req.rack, fenced=True, in_controlled_shutdown=False,
        log_dirs=req.log_dirs)
    heartbeats.register(req.broker_id, now)
    out = batches(changes)
    out.append([register])
    return out, RegistrationResult(ErrorCode.NONE, epoch)


def unregister_broker(image: MetadataImage, broker_id: int, heartbeats: BrokerHeartbeatManager,
                      ) -> tuple[Batches, ErrorCode, str | None]:
    """Kafka's UnregisterBroker: forget a broker's registration (a running broker registers
    again). Refused while the broker is still a replica of any partition: its data would be
    one replica short everywhere; reassign those partitions first."""
    reg = image.brokers.get(broker_id)
    if reg is None:
        return [], ErrorCode.BROKER_ID_NOT_REGISTERED, f"Broker {broker_id} is not registered."
    held = [f"{t.name}-{p}" for t, p, part in image.iter_partitions() if broker_id in part.replicas]
    if held:
        shown = ", ".join(held[:MAX_NAMED_PARTITIONS]) + (
            f" and {len(held) - MAX_NAMED_PARTITIONS} more" if len(held) > MAX_NAMED_PARTITIONS else "")
        return [], ErrorCode.INVALID_REQUEST, (
            f"Broker {broker_id} still holds replicas of {len(held)} partition(s): {shown}. "
            "Reassign them to other brokers before unregistering it.")
    heartbeats.remove(broker_id)
    return [[UnregisterBroker(broker_id, reg.epoch)]], ErrorCode.NONE, None


def fence_broker(image: MetadataImage, broker_id: int, heartbeats: BrokerHeartbeatManager,
                 static: Mapping[str, str] | None = None) -> Batches:
    """Move leadership and ISR membership off a broker, then mark it fenced."""
    reg = image.brokers[broker_id]
    changes = remove_broker_from_isrs(image, broker_id, static=static)
    heartbeats.set_fenced(broker_id, True)
    out = batches(changes)
    out.append([BrokerRegistrationChange(broker_id, reg.epoch, fenced=True,
                                         in_controlled_shutdown=False
                                         if reg.in_controlled_shutdown else None)])
    return out


def fence_stale_broker(image: MetadataImage, heartbeats: BrokerHeartbeatManager, now: float,
                       static: Mapping[str, str] | None = None) -> tuple[Batches, int | None]:
    """Fence at most ONE broker whose session lapsed; call again to fence the next."""
    while (broker_id := heartbeats.next_fence(now)) is not None:
        reg = image.brokers.get(broker_id)
        if reg is not None and not reg.fenced:
            return fence_broker(image, broker_id, heartbeats, static), broker_id
        heartbeats.set_fenced(broker_id, True)  # already fenced in the image: just sync
    return [], None


def fence_closed_broker(image: MetadataImage, grace: ConnectionGrace,
                        heartbeats: BrokerHeartbeatManager, now: float,
                        static: Mapping[str, str] | None = None) -> tuple[Batches, int | None]:
    """Fence at most ONE broker whose controller connection closed and whose grace ran out
    with no heartbeat (metadata.controller.connection_grace); only the very broker epoch
    that connection carried: a newer registration is another incarnation."""
    while (due := grace.next_due(now)) is not None:
        broker_id, epoch = due
        reg = image.brokers.get(broker_id)
        if reg is not None and reg.epoch == epoch and not reg.fenced:
            return fence_broker(image, broker_id, heartbeats, static), broker_id
    return [], None


class BrokerState(enum.Enum):
    FENCED = "fenced"
    UNFENCED = "unfenced"
    CONTROLLED_SHUTDOWN = "controlled_shutdown"
    SHUTDOWN_NOW = "shutdown_now"


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    broker_id: int
    broker_epoch: int
    current_metadata_offset: int
    want_fence: bool = False
    want_shutdown: bool = False


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: ErrorCode
    is_caught_up: bool = False
    is_fenced: bool = True
    should_shutdown: bool = False


def broker_heartbeat(image: MetadataImage, req: HeartbeatRequest, *,
                     heartbeats: BrokerHeartbeatManager, now: float, next_offset: int,
                     static: Mapping[str, str] | None = None,
                     ) -> tuple[Batches, HeartbeatResult]:
    """Kafka's heartbeat state machine (BrokerHeartbeatManager.calculateNextBrokerState)."""
    reg = image.brokers.get(req.broker_id)
    if reg is None:
        return [], HeartbeatResult(ErrorCode.BROKER_ID_NOT_REGISTERED)
    if reg.epoch != req.broker_epoch:
        return [], HeartbeatResult(ErrorCode.STALE_BROKER_EPOCH)
    heartbeats.touch(req.broker_id, now, req.current_metadata_offset)
    # Saw its own registration, and its last fencing (heartbeats.py says why).
    caught_up = req.current_metadata_offset >= max(reg.epoch, heartbeats.fenced_at(req.broker_id))
    current = (BrokerState.FENCED if reg.fenced else
               BrokerState.CONTROLLED_SHUTDOWN if reg.in_controlled_shutdown else
               BrokerState.UNFENCED)
    shutting = req.want_shutdown or current == BrokerState.CONTROLLED_SHUTDOWN
    leads = image.partitions_led_by(req.broker_id) if shutting else 0
    nxt = _next_state(current, req, caught_up, leads, heartbeats)
    out: Batches = []
    if current == BrokerState.FENCED and nxt == BrokerState.UNFENCED:
        heartbeats.set_fenced(req.broker_id, False)
        out.append([BrokerRegistrationChange(req.broker_id, reg.epoch, fenced=False)])
        out += batches(elect_leaderless(_unfenced(image, req.broker_id),
                                        also_acceptable=(req.broker_id,), static=static))
    elif current != BrokerState.FENCED and nxt in (BrokerState.FENCED,
                                                   BrokerState.SHUTDOWN_NOW):
        out = fence_broker(image, req.broker_id, heartbeats, static)
    elif current == BrokerState.UNFENCED and nxt == BrokerState.CONTROLLED_SHUTDOWN:
        first = [BrokerRegistrationChange(req.broker_id, reg.epoch, in_controlled_shutdown=True)]
        changes = remove_broker_from_isrs(image, req.broker_id, static=static)
        out = [first] + batches(changes)
        heartbeats.set_controlled_shutdown_offset(req.broker_id, next_offset + len(changes))
    return out, HeartbeatResult(
        ErrorCode.NONE, is_caught_up=caught_up,
        is_fenced=nxt in (BrokerState.FENCED, BrokerState.SHUTDOWN_NOW),
        should_shutdown=nxt == BrokerState.SHUTDOWN_NOW)


def _next_state(current: BrokerState, req: HeartbeatRequest, caught_up: bool, leads: int,
                heartbeats: BrokerHeartbeatManager) -> BrokerState:
    if current == BrokerState.FENCED:
        if req.want_shutdown:
            return BrokerState.SHUTDOWN_NOW
        if not req.want_fence and caught_up:
            return BrokerState.UNFENCED
        return BrokerState.FENCED
    if req.want_fence:
        return BrokerState.SHUTDOWN_NOW if req.want_shutdown else BrokerState.FENCED
    if current == BrokerState.UNFENCED:
        if not req.want_shutdown:
            return BrokerState.UNFENCED
        return BrokerState.CONTROLLED_SHUTDOWN if leads else BrokerState.SHUTDOWN_NOW
    # In controlled shutdown: done once it leads nothing and every active broker has seen
    # the leadership moves (their metadata offset passed the shutdown records).
    offset = heartbeats.controlled_shutdown_offset(req.broker_id)
    lowest = heartbeats.lowest_active_offset()
    if leads == 0 and (offset is None or (lowest is not None and lowest >= offset)):
        return BrokerState.SHUTDOWN_NOW
    return BrokerState.CONTROLLED_SHUTDOWN


def _unfenced(image: MetadataImage, broker_id: int) -> MetadataImage:
    """The image as elections should see it once `broker_id` is unfenced."""
    reg = image.brokers[broker_id]
    brokers = dict(image.brokers)
    brokers[broker_id] = replace(reg, fenced=False)
    return replace(image, brokers=brokers)
