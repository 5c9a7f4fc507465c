"""Byte-level mutations: what a broken client, a bad proxy or a bit rot sends.

Every function takes a `random.Random` and bytes and returns new bytes; none
knows the format, so they reach the paths structure-aware mutations cannot
(a length that disagrees with its content, a frame cut mid-field).
"""
from __future__ import annotations

import random
import struct

__all__ = ["mutate_bytes", "INT32_EDGES", "INT64_EDGES"]

INT8_EDGES = (-128, -1, 0, 1, 127)
INT16_EDGES = (-32768, -2, -1, 0, 1, 2, 32766, 32767)
INT32_EDGES = (-(1 << 31), -2, -1, 0, 1, 2, 0x7FFF, 0x10000, (1 << 31) - 2, (1 << 31) - 1)
INT64_EDGES = (-(1 << 63), -1, 0, 1, (1 << 31) - 1, 1 << 32, (1 << 63) - 1)


def _flip_bits(rng: random.Random, data: bytearray) -> None:
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(data))
        data[i] ^= 1 << rng.randrange(8)


def _set_byte(rng: random.Random, data: bytearray) -> None:
    data[rng.randrange(len(data))] = rng.choice((0x00, 0x01, 0x7F, 0x80, 0xFF))


def _overwrite_int(rng: random.Random, data: bytearray) -> None:
    width, fmt, edges = rng.choice(((2, ">h", INT16_EDGES), (4, ">i", INT32_EDGES), (8, ">q", INT64_EDGES)))
    if len(data) < width:
        return
    struct.pack_into(fmt, data, rng.randrange(len(data) - width + 1), rng.choice(edges))


def _truncate(rng: random.Random, data: bytearray) -> None:
    del data[rng.randrange(len(data)):]


def _append(rng: random.Random, data: bytearray) -> None:
    data += rng.randbytes(rng.choice((1, 2, 7, 64, 1000)))


def _insert(rng: random.Random, data: bytearray) -> None:
    i = rng.randrange(len(data) + 1)
    data[i:i] = rng.randbytes(rng.randint(1, 16))


def _delete(rng: random.Random, data: bytearray) -> None:
    i = rng.randrange(len(data))
    del data[i:i + rng.randint(1, 16)]


def _duplicate(rng: random.Random, data: bytearray) -> None:
    i = rng.randrange(len(data))
    j = min(len(data), i + rng.randint(1, 64))
    data[j:j] = data[i:j] * rng.randint(1, 8)


_MUTATIONS = (_flip_bits, _set_byte, _overwrite_int, _overwrite_int, _truncate, _append, _insert, _delete,
              _duplicate)


def mutate_bytes(rng: random.Random, data: bytes, *, keep: int = 0) -> bytes:
    """1-3 byte mutations of `data`; the first `keep` bytes are left alone."""
    head, body = bytes(data[:keep]), bytearray(data[keep:])
    for _ in range(rng.randint(1, 3)):
        if not body:
            body += rng.randbytes(rng.randint(1, 8))
        rng.choice(_MUTATIONS)(rng, body)
    return head + bytes(body)
