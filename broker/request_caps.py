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
"""
from __future__ import annotations

import trio

__all__ = ["MAX_REQUEST_ITEMS", "MAX_DECODED_ITEMS", "YIELD_EVERY", "over_item_cap", "Pacer"]

MAX_REQUEST_ITEMS = 100_000
MAX_DECODED_ITEMS = 4 * MAX_REQUEST_ITEMS
YIELD_EVERY = 256  # items a handler loop handles between two scheduler turns


def over_item_cap(header) -> str | None:
    """Why the decoded request names too many items, or None when it is within the cap."""
    if header.item_count <= MAX_REQUEST_ITEMS:
        return None
    return f"{header.item_count} items (topics, partitions, ...) in one request, more than {MAX_REQUEST_ITEMS}"


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
