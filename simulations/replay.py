"""The replay fault: an old connection's bytes sent again on a new connection.

A middlebox, a retransmitting proxy or an attacker on the path can deliver what a client once
sent a second time, long after, on a fresh connection from the same host. The nemesis picks a
connection, open or among the last that ended (`SimNetwork.recorded_connections`, each holding
the first bytes its client sent), and replays the requests it carried, whole frames only, to
the same listener; the answers are read and dropped.

Only requests whose duplication the design promises to survive are replayed (a fault outside
the promise would make every violation a non-bug), each for the reason named:
- on the controller listener, Raft's own requests: Raft assumes a network that duplicates,
  delays and reorders messages, and fences stale ones by epoch (and KIP-853 directory id);
  the broker's AlterPartition (fenced by broker epoch, leader epoch and partition epoch:
  KIP-497/903) and BrokerHeartbeat (fenced by broker epoch);
- on the Kafka listener, requests that change nothing: Fetch (a follower's carries its leader
  epoch and fetch offset, KIP-320; a stale one must move neither the ISR nor the high
  watermark the wrong way), ListOffsets, Metadata, OffsetForLeaderEpoch, ApiVersions.
Not replayed: Produce, OffsetCommit, group membership, admin and producer-id requests. Kafka
gives no guarantee against their replay (a replayed OffsetCommit moves a group's offset back,
a non-idempotent Produce appends twice): its clients retry those themselves, and the workload's
retries already exercise that.
"""
from __future__ import annotations

import struct

import msgpack
import trio

from simulations.sim_stream import Connection
from wire.protocol import ApiKey

__all__ = ["replayable_bytes", "replay", "RPC_TYPES", "KAFKA_APIS"]

RPC_TYPES = frozenset({"raft.Vote", "raft.BeginQuorumEpoch", "raft.EndQuorumEpoch", "raft.Fetch",
                       "raft.FetchSnapshot", "controller.AlterPartition", "controller.BrokerHeartbeat"})
KAFKA_APIS = frozenset({ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.METADATA, ApiKey.OFFSET_FOR_LEADER_EPOCH,
                        ApiKey.API_VERSIONS})
_LENGTH = struct.Struct(">I")
LINGER = 2.0  # seconds the replaying connection stays open for the answers


def _frames(data: bytes):
    pos = 0
    while pos + 4 <= len(data):
        (size,) = _LENGTH.unpack_from(data, pos)
        end = pos + 4 + size
        if end > len(data):
            return
        yield data[pos:end]
        pos = end


def _replayable(frame: bytes, kafka: bool) -> bool:
    if kafka:
        return len(frame) >= 6 and struct.unpack_from(">h", frame, 4)[0] in KAFKA_APIS
    try:
        body = msgpack.unpackb(frame[4:], raw=False)
    except Exception:  # noqa: BLE001 - not a frame we recognise: not replayed
        return False
    return isinstance(body, list) and bool(body) and body[0] in RPC_TYPES


def replayable_bytes(conn: Connection, kafka_port: int) -> bytes:
    """The whole frames of what `conn`'s client sent that may be replayed (see the docstring)."""
    kafka = conn.port == kafka_port
    return b"".join(f for f in _frames(bytes(conn.sent)) if _replayable(f, kafka))


async def replay(net, src: str, dst: str, port: int, data: bytes) -> None:
    """Connect from `src` to `dst:port`, send `data`, read and drop the answers for LINGER s."""
    try:
        stream = await net._connect(src, dst, port)
    except (OSError, trio.BrokenResourceError):
        return  # refused, unreachable, timed out: the replay did not get through
    try:
        with trio.move_on_after(LINGER):
            await stream.send_all(data)
            while await stream.receive_some(65536):
                pass
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        pass
    finally:
        await trio.aclose_forcefully(stream)
