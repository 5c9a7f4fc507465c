"""Structure-aware mutations of Kafka requests: decode with our schemas, mutate, re-encode.

Seeds are the request frames real clients sent (tests/golden/<client>/requests.json,
recorded by tests/tools/recording_broker.py) plus one synthesized request per
(api, version) no client sent. A case decodes a seed with wire.protocol, mutates
1-3 fields of the header or body (integers at their edges, strings empty, huge,
null or hostile, arrays emptied, duplicated or multiplied, record batches
corrupted *under a recomputed valid CRC*, api versions we do not speak, wrong
correlation ids), encodes it again and, sometimes, mutates the bytes on top.
"""
from __future__ import annotations

import json
import pathlib
import random
import struct
import uuid

from crc32c import crc32c

from raftkafka.bench.fuzz.raw import INT32_EDGES, INT64_EDGES, INT8_EDGES, INT16_EDGES, mutate_bytes
from wire.batch_header import CRC_START, HEADER_SIZE, LOG_OVERHEAD
from wire.errors import DecodeError
from wire.protocol import REQUESTS, Struct, decode_request, encode_request
from wire.protocol.schema import (
    ArrayOf, BOOL, BYTES, FLOAT64, INT16, INT32, INT64, INT8, Primitive, RECORDS, STRING, StructOf, UINT16,
    UINT32, UUID,
)
from wire.records import SimpleRecord, build_batch

__all__ = ["GOLDEN_DIR", "load_seeds", "kafka_case", "INTERNAL_TOPICS"]

GOLDEN_DIR = pathlib.Path(__file__).resolve().parents[3] / "tests" / "golden"
INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state", "__cluster_metadata")
_SIZE = struct.Struct(">i")
_INT_EDGES = {INT8: INT8_EDGES, INT16: INT16_EDGES, INT32: INT32_EDGES, INT64: INT64_EDGES,
              UINT16: (0, 1, 0xFFFF), UINT32: (0, 1, 0xFFFFFFFF)}
_INT_RANGE = {INT8: (-128, 127), INT16: (-32768, 32767), INT32: (-(1 << 31), (1 << 31) - 1),
              INT64: (-(1 << 63), (1 << 63) - 1), UINT16: (0, 0xFFFF), UINT32: (0, 0xFFFFFFFF)}


# --------------------------------------------------------------------------- #
# seeds
# --------------------------------------------------------------------------- #


def load_seeds(golden_dir: pathlib.Path = GOLDEN_DIR) -> list[bytes]:
    """Request frames (without size prefix): every recorded one, then one per unrecorded version."""
    frames: list[bytes] = []
    for path in sorted(golden_dir.glob("*/requests.json")):
        frames += [bytes.fromhex(entry["frame"]) for entry in json.loads(path.read_text())]
    seen = {struct.unpack_from(">hh", f) for f in frames}
    for key, cls in REQUESTS.items():
        for version in range(cls.VERSIONS.lo, cls.VERSIONS.hi + 1):
            if (key, version) not in seen:
                frames.append(encode_request(_synthesize(cls, version), version, 1, "fuzz")[4:])
    return frames


def _synthesize(cls, version: int):
    """An instance with every array holding one element, strings and batches filled in."""
    obj = cls()
    for f in cls.SPEC.fields_in(version):
        value = _sample(f.type, version)
        if value is not None:
            setattr(obj, f.name, value)
    return obj


def _sample(ftype, version: int):
    if isinstance(ftype, ArrayOf):
        elem = ftype.element
        if isinstance(elem, Primitive):
            return [_sample(elem, version) if not elem.fixed else 0]
        return [_synthesize(elem.cls, version)]
    if isinstance(ftype, StructOf):
        return _synthesize(ftype.struct.cls, version)
    if ftype is STRING:
        return "fuzz-topic"
    if ftype is RECORDS:
        return build_batch([SimpleRecord(b"k", b"v")], base_timestamp=0)
    return None


# --------------------------------------------------------------------------- #
# the field tree
# --------------------------------------------------------------------------- #


class _Slot:
    """One mutable place: attribute `key` of a struct, or index `key` of a list."""

    __slots__ = ("holder", "key", "ftype", "path")

    def __init__(self, holder, key, ftype, path: str):
        self.holder, self.key, self.ftype, self.path = holder, key, ftype, path

    def get(self):
        return self.holder[self.key] if isinstance(self.holder, list) else getattr(self.holder, self.key)

    def set(self, value) -> None:
        if isinstance(self.holder, list):
            self.holder[self.key] = value
        else:
            setattr(self.holder, self.key, value)


def _slots(obj: Struct, version: int, path: str, out: list[_Slot]) -> list[_Slot]:
    for f in type(obj).SPEC.fields_in(version):
        slot = _Slot(obj, f.name, f.type, f"{path}.{f.name}" if path else f.name)
        out.append(slot)
        value = slot.get()
        if isinstance(f.type, StructOf) and isinstance(value, Struct):
            _slots(value, version, slot.path, out)
        elif isinstance(f.type, ArrayOf) and isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, Struct):
                    _slots(item, version, f"{slot.path}[{i}]", out)
                elif isinstance(f.type.element, Primitive):
                    out.append(_Slot(value, i, f.type.element, f"{slot.path}[{i}]"))
    return out


# --------------------------------------------------------------------------- #
# value mutations
# --------------------------------------------------------------------------- #


def _hostile_string(rng: random.Random) -> str | None:
    return rng.choice(["", None, "-", ".", "..", "../../../etc/passwd", "a" * 249, "a" * 250, "b" * 256, "t" * 200,
                       "é" * 200, "c" * 32767, "\x00", "topic\x00name", "name with spaces", "ü-" * 40,
                       "x" * rng.randint(1, 3000), rng.randbytes(8).hex(), *INTERNAL_TOPICS])


def _mutate_int(rng: random.Random, ftype: Primitive, value: int) -> int:
    lo, hi = _INT_RANGE[ftype]
    choice = rng.random()
    if choice < 0.6:
        return rng.choice(_INT_EDGES[ftype])
    if choice < 0.8 and isinstance(value, int):
        return max(lo, min(hi, value + rng.choice((-1, 1, -1000, 1000))))
    return rng.randint(lo, hi)


def _mutate_array(rng: random.Random, value: list | None):
    if not value:
        return rng.choice(([], None))
    op = rng.randrange(6)
    if op == 0:
        return []
    if op == 1:
        return None
    if op == 2:  # the same element twice (duplicate partitions, topics, groups)
        i = rng.randrange(len(value))
        return value[:i + 1] + [value[i]] + value[i + 1:]
    if op == 3:  # many copies: per-request caps and work per element
        return value * rng.choice((2, 10, 100, 1000))
    if op == 4:
        return value[1:]
    return list(reversed(value))


def _recrc(batch: bytearray, pos: int, size: int) -> None:
    struct.pack_into(">I", batch, pos + 17, crc32c(bytes(batch[pos + CRC_START:pos + size])))


_HEADER_FIELDS = {  # offset -> struct format of the record batch header fields under the CRC
    21: ">h", 23: ">i", 27: ">q", 35: ">q", 43: ">q", 51: ">h", 53: ">i", 57: ">i"}


def _mutate_batch(rng: random.Random, value) -> bytes | None:
    """Corrupt a record batch, then give it a valid CRC so the broker must look inside."""
    data = bytearray(value or b"")
    if len(data) < HEADER_SIZE or rng.random() < 0.1:
        return rng.choice((None, b"", rng.randbytes(rng.randint(1, 200)), bytes(data) * 2))
    (length,) = struct.unpack_from(">i", data, 8)
    size = min(len(data), max(HEADER_SIZE, length + LOG_OVERHEAD))
    op = rng.randrange(7)
    if op == 0 and size > HEADER_SIZE:  # garbage records
        for _ in range(rng.randint(1, 6)):
            data[rng.randrange(HEADER_SIZE, size)] ^= 1 << rng.randrange(8)
    elif op == 1:  # a header field at an edge: attributes, counts, deltas, timestamps, producer fields
        offset, fmt = rng.choice(list(_HEADER_FIELDS.items()))
        edges = {">h": INT16_EDGES, ">i": INT32_EDGES, ">q": INT64_EDGES}[fmt]
        struct.pack_into(fmt, data, offset, rng.choice(edges))
    elif op == 2:  # compression codec or transactional/control bits
        attributes = rng.choice((1, 2, 3, 4, 5, 6, 7, 0x10, 0x20, 0x30, 0x40, 0x08))
        struct.pack_into(">h", data, 21, attributes)
    elif op == 3 and size > HEADER_SIZE:  # records cut short under a consistent length
        size = rng.randrange(HEADER_SIZE, size)
        del data[size:]
        struct.pack_into(">i", data, 8, size - LOG_OVERHEAD)
    elif op == 4:  # more records than bytes
        data += rng.randbytes(rng.randint(1, 64))
        size = len(data)
        struct.pack_into(">i", data, 8, size - LOG_OVERHEAD)
    elif op == 5:  # magic we do not speak
        data[16] = rng.choice((0, 1, 3, 0xFF))
    else:  # a second batch after the first
        data += bytes(data[:size])
    _recrc(data, 0, min(size, len(data)))
    return bytes(data)


def _mutate_value(rng: random.Random, slot: _Slot) -> str:
    ftype, value = slot.ftype, slot.get()
    if isinstance(ftype, ArrayOf):
        slot.set(_mutate_array(rng, value))
        return "array"
    if isinstance(ftype, StructOf):
        return "skip"
    if ftype in _INT_RANGE:
        slot.set(_mutate_int(rng, ftype, value))
        return "int"
    if ftype is BOOL:
        slot.set(not value)
        return "bool"
    if ftype is FLOAT64:
        slot.set(rng.choice((float("nan"), float("inf"), -1.0, 1e308)))
        return "float"
    if ftype is STRING:
        slot.set(_hostile_string(rng))
        return "string"
    if ftype is BYTES:
        slot.set(rng.choice((None, b"", rng.randbytes(rng.randint(1, 100)), b"\xff" * 70000)))
        return "bytes"
    if ftype is RECORDS:
        slot.set(_mutate_batch(rng, value))
        return "records"
    if ftype is UUID:
        slot.set(rng.choice((uuid.UUID(int=0), uuid.UUID(int=(1 << 128) - 1), uuid.UUID(int=rng.getrandbits(128)))))
        return "uuid"
    return "skip"


# --------------------------------------------------------------------------- #
# cases
# --------------------------------------------------------------------------- #


def kafka_case(rng: random.Random, seeds: list[bytes]) -> tuple[bytes, str]:
    """One case: (bytes to send, size prefix included; a label saying what was mutated)."""
    seed = rng.choice(seeds)
    try:
        header, body = decode_request(seed)
    except DecodeError:  # a version no codec of ours speaks (ApiVersions v4): bytes only
        return _reframe(mutate_bytes(rng, seed, keep=4)), f"undecodable seed {seed[:4].hex()}: raw"
    version = header.api_version
    cls = type(body)
    labels = []
    for _ in range(10):  # a mutation the encoder refuses (e.g. a null where none fits) is redrawn
        header, body = decode_request(seed)
        labels = []
        for _ in range(rng.randint(1, 3)):
            slots = _slots(body, version, "", [])
            roll = rng.random()
            if roll < 0.08:
                version = rng.choice((-1, cls.VERSIONS.lo - 1, cls.VERSIONS.hi + 1, 0x7FFF, rng.randrange(0x7FFF)))
                labels.append(f"version={version}")
            elif roll < 0.12:
                header.correlation_id = rng.choice(INT32_EDGES)
                labels.append("correlation_id")
            elif roll < 0.16:
                header.client_id = _hostile_string(rng)
                labels.append("client_id")
            elif slots:
                slot = rng.choice(slots)
                labels.append(f"{slot.path}:{_mutate_value(rng, slot)}")
        try:
            frame = _encode(header, body, version, cls)
            break
        except (ValueError, TypeError, struct.error, OverflowError, AttributeError, DecodeError):
            continue
    else:
        frame = _SIZE.pack(len(seed)) + seed
        labels = ["seed"]
    name = f"{cls.API_NAME} v{header.api_version}"
    if rng.random() < 0.3:
        frame = _reframe(mutate_bytes(rng, frame[4:], keep=4))
        labels.append("raw")
    if rng.random() < 0.03:
        frame = _lying_size(rng, frame)
        labels.append("size")
    return frame, f"{name}: {', '.join(labels)}"


def _encode(header, body, version: int, cls) -> bytes:
    encode_version = version if cls.supports(version) else header.api_version
    frame = bytearray(encode_request(body, encode_version, header.correlation_id, header.client_id))
    struct.pack_into(">h", frame, 6, version)  # an unknown version goes out with the body of a known one
    return bytes(frame)


def _reframe(payload: bytes) -> bytes:
    return _SIZE.pack(len(payload)) + payload


def _lying_size(rng: random.Random, frame: bytes) -> bytes:
    size = rng.choice((-1, 0, 1, len(frame) - 5, len(frame), 1 << 30, (1 << 31) - 1))
    return _SIZE.pack(size) + frame[4:]
