"""Structure-aware mutations of internal RPC frames (the controller listener: Raft and controller RPCs).

Seeds are built from wire.rpc's registry: one instance of every registered
message (Raft messages of raft/codec.py, controller RPCs of
metadata/controller/rpc.py), its fields filled from their type hints. A case
takes the msgpack tree [type, version, correlation_id, body], mutates 1-3 nodes
(integers at int32/int64/uint64 edges, values of the wrong type, arrays emptied,
multiplied or nested deep, fields added or dropped, the message type swapped
for another's, versions we do not have), packs it again and sometimes mutates
the bytes or the length prefix on top.

Seeds carry `cluster_id` (a cluster other than the node's, unless told the
real one): a message naming another cluster is decoded in full and refused,
which exercises every decoder without letting an unauthenticated process steer
the quorum (issue 16 case 9 and the "Security I" issue own that boundary).
"""
from __future__ import annotations

import dataclasses
import enum
import random
import struct
import types
import typing
import uuid

import msgpack

import metadata.controller.rpc  # noqa: F401  (registers the controller RPCs)
import raft.codec  # noqa: F401  (registers the Raft messages)
from raftkafka.bench.fuzz.raw import INT32_EDGES, INT64_EDGES, mutate_bytes
from wire.rpc import DEFAULT_REGISTRY, encode_frame

__all__ = ["rpc_seeds", "rpc_case", "FOREIGN_CLUSTER_ID"]

FOREIGN_CLUSTER_ID = "fuzz-foreign-cluster"
_LENGTH = struct.Struct(">I")
_UINT64_EDGES = ((1 << 63), (1 << 64) - 1)


def rpc_seeds(cluster_id: str = FOREIGN_CLUSTER_ID) -> list[list]:
    """One decoded payload ([type, version, correlation id, body]) per registered message type."""
    seeds = []
    for name in DEFAULT_REGISTRY.names():
        message = _instance(DEFAULT_REGISTRY.message_class(name), cluster_id)
        frame = encode_frame(message, 7)
        seeds.append(msgpack.unpackb(frame[4:], raw=False, strict_map_key=False))
    return seeds


def _instance(cls, cluster_id: str):
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        kwargs[f.name] = cluster_id if f.name == "cluster_id" else _value(hints[f.name], cluster_id)
    return cls(**kwargs)


def _value(tp, cluster_id: str):
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is bool:
        return False
    if tp is int:
        return 1
    if tp is float:
        return 1.0
    if tp is str:
        return "fuzz"
    if tp is bytes:
        return b"fuzz"
    if tp is uuid.UUID:
        return uuid.UUID(int=1)
    if isinstance(tp, type) and issubclass(tp, enum.IntEnum):
        return next(iter(tp))
    if origin in (typing.Union, types.UnionType):
        return _value(next(a for a in args if a is not type(None)), cluster_id)
    if origin is list:
        return [_value(args[0], cluster_id)]
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return (_value(args[0], cluster_id),)
        return tuple(_value(a, cluster_id) for a in args)
    if origin is dict:
        return {_value(args[0], cluster_id): _value(args[1], cluster_id)}
    if dataclasses.is_dataclass(tp):
        return _instance(tp, cluster_id)
    raise TypeError(f"no sample value for {tp!r}")


# --------------------------------------------------------------------------- #
# tree mutations
# --------------------------------------------------------------------------- #


def _nodes(value, out: list, holder=None, key=None, depth: int = 0) -> list:
    """(holder, key) of the nodes below the root: lists and dicts walked 16 deep, 2000 nodes at most."""
    if holder is not None:
        out.append((holder, key))
    if depth >= 16 or len(out) >= 2000:
        return out
    if isinstance(value, list):
        for i, item in enumerate(value[:200]):
            _nodes(item, out, value, i, depth + 1)
    elif isinstance(value, dict):
        for k in list(value)[:200]:
            _nodes(value[k], out, value, k, depth + 1)
    return out


def _replacement(rng: random.Random, old):
    roll = rng.random()
    if roll < 0.35:
        return rng.choice(INT32_EDGES + INT64_EDGES + _UINT64_EDGES)
    if roll < 0.5:
        return rng.choice((None, True, False, 1.5, float("nan"), "", "x" * rng.choice((1, 300, 70000)),
                           b"", b"\x00" * 17, rng.randbytes(16), [], {}, {"k": 1}, [old] * 3))
    if roll < 0.6:  # deep nesting: msgpack's and our decoders' recursion
        nested = old
        for _ in range(rng.choice((10, 100, 600, 2000))):
            nested = [nested]
        return nested
    if isinstance(old, list):
        op = rng.randrange(4)
        if op == 0:
            return []
        if op == 1:
            return old + [old[-1] if old else None]
        if op == 2:
            return old[:-1]
        return old * rng.choice((2, 100, 5000))
    if isinstance(old, int) and not isinstance(old, bool):
        return old + rng.choice((-1, 1, -(1 << 31), 1 << 31))
    if isinstance(old, str):
        return rng.choice(("", old + "x", "é" * 100, "\x00", FOREIGN_CLUSTER_ID))
    return rng.choice((0, -1, "", None))


def _mutate_tree(rng: random.Random, payload: list, real_names: list[str]) -> list[str]:
    labels = []
    for _ in range(rng.randint(1, 3)):
        roll = rng.random()
        if roll < 0.08:
            payload[0] = rng.choice(real_names + ["", "raft.Nope", 5, None])  # body read as another type
            labels.append(f"type={payload[0]!r}")
        elif roll < 0.14:
            payload[1] = rng.choice((0, -1, 2, 1 << 31, (1 << 64) - 1, "1", None))
            labels.append("version")
        elif roll < 0.18:
            payload[2] = rng.choice(INT64_EDGES + (None, "7", 1.0))
            labels.append("correlation_id")
        elif roll < 0.24 and isinstance(payload[3], list):
            payload[3] = payload[3] + [rng.choice((0, None, "extra"))] if rng.random() < 0.5 else payload[3][:-1]
            labels.append("field count")
        else:
            nodes = _nodes(payload[3], [], payload, 3)
            holder, key = rng.choice(nodes)
            holder[key] = _replacement(rng, holder[key])
            labels.append(f"node {key!r}")
    return labels


def rpc_case(rng: random.Random, seeds: list[list]) -> tuple[bytes, str]:
    """One case: (bytes to send, length prefix included; a label saying what was mutated)."""
    payload = msgpack.unpackb(msgpack.packb(rng.choice(seeds), use_bin_type=True), raw=False, strict_map_key=False)
    name = payload[0]
    real_names = [s[0] for s in seeds]
    labels = _mutate_tree(rng, payload, real_names)
    try:
        data = msgpack.packb(payload, use_bin_type=True)
    except (ValueError, TypeError, OverflowError):  # e.g. nesting deeper than msgpack packs: raw bytes instead
        data = msgpack.packb(rng.choice(seeds), use_bin_type=True)
        labels = ["unpackable mutation"]
    if rng.random() < 0.3:
        data = mutate_bytes(rng, data)
        labels.append("raw")
    frame = _LENGTH.pack(len(data)) + data
    if rng.random() < 0.03:
        frame = _LENGTH.pack(rng.choice((0, 1, max(0, len(data) - 1), len(data) + 1, 64 << 20, (1 << 32) - 1))) + data
        labels.append("length")
    return frame, f"{name}: {', '.join(labels)}"
