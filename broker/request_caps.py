"""How many items one client request may name, and handler loops that let others run.

The frame size (socket.request.max.bytes, 100 MiB) alone lets one ListOffsets name eight
million partitions; decoding costs ~0.6 µs per item and handling ~10 µs (a lookup and a
response entry), all on the node's one event loop: minutes of work, every other connection
stalled. Kafka bounds such requests through per-API validation; here every array element
of a request (topics, partitions, groups, resources, configs...) counts, the same for every
API because an item costs about the same everywhere:

- MAX_REQUEST_ITEMS = 100,000 items, answered INVALID_REQUEST above it (the handler's
  error response: per partition where the API answers per partition, as Kafka answers a
  request it refuses before handling it). Far more than a real client names in one
  request (a consumer or a follower names the partitions one node leads; Kafka's guidance
  is a few thousand per broker); about a second of handling, spread over many scheduler
  turns (`Pacer`), so other connections are served meanwhile.
- MAX_DECODED_ITEMS = 400,000: decoding stops there and the connection is closed (as for
  any request that does not parse), so neither decoding nor the error answer of an
  over-cap request (both proportional to its items) holds the event loop for more than
  about half a second, whatever the frame size.

The count is taken while decoding (wire.protocol.decode_request, RequestHeader.item_count).

One kind of item costs far more: a group or transactional id is hashed a character at a
time (Java's String.hashCode, broker.groups.hashing) to find its coordinator, ~0.06 µs per
character, and a frame may hold a hundred million. MAX_COORDINATOR_KEY_CHARS bounds the
characters of the ids one request names, answered INVALID_REQUEST above it: 32 ids of the
longest a Kafka log can store (32,767 bytes), thousands of any real group's, ~70 ms of hashing.
"""
from __future__ import annotations

from typing import Callable, Iterable

import trio

from wire.protocol.registry import ApiKey

__all__ = ["MAX_REQUEST_ITEMS", "MAX_DECODED_ITEMS", "MAX_COORDINATOR_KEY_CHARS", "YIELD_EVERY", "over_cap",
           "Pacer"]

MAX_REQUEST_ITEMS = 100_000
MAX_DECODED_ITEMS = 4 * MAX_REQUEST_ITEMS
MAX_COORDINATOR_KEY_CHARS = 1 << 20
YIELD_EVERY = 256  # items a handler loop handles between two scheduler turns


def _group(request) -> tuple:
    return (request.group_id,)


def _transaction(request) -> tuple:
    return (request.transactional_id,)


def _transaction_and_group(request) -> tuple:
    return (request.transactional_id, request.group_id)


# The group and transactional ids each request names (None: a non-transactional producer's).
_COORDINATOR_KEYS: dict[int, Callable[[object], Iterable[str | None]]] = {
    ApiKey.OFFSET_COMMIT: _group, ApiKey.OFFSET_FETCH: _group, ApiKey.JOIN_GROUP: _group,
    ApiKey.HEARTBEAT: _group, ApiKey.LEAVE_GROUP: _group, ApiKey.SYNC_GROUP: _group,
    ApiKey.OFFSET_DELETE: _group,
    ApiKey.FIND_COORDINATOR: lambda r: (r.key,),
    ApiKey.DESCRIBE_GROUPS: lambda r: r.groups,
    ApiKey.DELETE_GROUPS: lambda r: r.group_names,
    ApiKey.INIT_PRODUCER_ID: _transaction, ApiKey.END_TXN: _transaction,
    ApiKey.ADD_OFFSETS_TO_TXN: _transaction_and_group, ApiKey.TXN_OFFSET_COMMIT: _transaction_and_group,
    ApiKey.ADD_PARTITIONS_TO_TXN: lambda r: (r.transactional_id, *(t.transactional_id for t in r.transactions or ())),
    ApiKey.DESCRIBE_TRANSACTIONS: lambda r: r.transactional_ids,
}


def over_cap(header, request) -> str | None:
    """Why the decoded request names too much to handle, or None when it is within the caps."""
    if header.item_count > MAX_REQUEST_ITEMS:
        return f"{header.item_count} items (topics, partitions, ...) in one request, more than {MAX_REQUEST_ITEMS}"
    keys = _COORDINATOR_KEYS.get(header.api_key)
    if keys is not None:
        chars = sum(len(key) for key in keys(request) or () if key)
        if chars > MAX_COORDINATOR_KEY_CHARS:
            return (f"group and transactional ids of {chars} characters in one request, "
                    f"more than {MAX_COORDINATOR_KEY_CHARS}")
    return None


class Pacer:
    """`await pacer.step()` once per item of a long handler loop: a scheduler turn every
    YIELD_EVERY items, so a large legal request does not hold the node's event loop."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0

    async def step(self) -> None:
        self.count += 1
        if self.count % YIELD_EVERY == 0:
            await trio.lowlevel.checkpoint()
