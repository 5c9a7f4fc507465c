"""Record batch compression codecs (attributes bits 0-2), all through cramjam.

Wire formats, chosen so every Kafka client can read what we write:

- gzip: an RFC 1952 gzip stream (level 6, Java's GZIPOutputStream default).
- snappy: we *write* xerial framing, as the Java producer does (Kafka's
  SnappyOutputStream); librdkafka instead writes one raw snappy block. The
  decoder detects the xerial magic and otherwise reads a raw block, so both
  are accepted. Google's "framed" snappy format (`ff 06 00 00 sNaPpY`) is not
  Kafka's and is rejected.
- lz4: the standard LZ4 frame with *independent* blocks of 64 KiB (Java's
  reader rejects linked blocks) and no content checksum; level 9 as Kafka.
- zstd: a zstd frame, level 3 as Kafka.

Decompression is bounded (a decompression bomb must not exhaust memory): the
output is written into a buffer of at most `max_output + 1` bytes, sized from a
hint in the compressed header when there is one, grown otherwise. Every
malformed input raises `CorruptRecordError`.
"""
from __future__ import annotations

import struct
from enum import IntEnum

import cramjam

from wire.errors import CorruptRecordError

__all__ = [
    "Compression",
    "compress",
    "decompress",
    "DEFAULT_MAX_DECOMPRESSED",
    "XERIAL_MAGIC",
]


class Compression(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


# A compressed batch is bounded by the broker's max message size (1 MiB by default);
# 128 MiB of records from one batch is already far beyond anything legitimate.
DEFAULT_MAX_DECOMPRESSED = 128 * 1024 * 1024

DEFAULT_LEVELS = {Compression.GZIP: 6, Compression.LZ4: 9, Compression.ZSTD: 3}

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)  # version 1, min compatible 1
_XERIAL_BLOCK = 32 * 1024  # Java SnappyOutputStream's default block size
_INT32 = struct.Struct(">i")
_UINT32_LE = struct.Struct("<I")
_UINT64_LE = struct.Struct("<Q")
_OVERFLOW = "failed to write whole buffer"  # cramjam's message when the output buffer is full


def compress(codec: int, data, *, level: int | None = None, xerial: bool = True) -> bytes:
    """Compress `data` in the format Kafka clients expect for `codec`."""
    codec = Compression(codec)
    if codec is Compression.NONE:
        return bytes(data)
    if level is None:
        level = DEFAULT_LEVELS.get(codec)
    if codec is Compression.GZIP:
        return bytes(cramjam.gzip.compress(data, level=level))
    if codec is Compression.SNAPPY:
        return _xerial_compress(data) if xerial else bytes(cramjam.snappy.compress_raw(data))
    if codec is Compression.LZ4:
        compressor = cramjam.lz4.Compressor(level=level, content_checksum=False, block_linked=False)
        compressor.compress(bytes(data))
        return bytes(compressor.finish())
    return bytes(cramjam.zstd.compress(data, level=level))


def decompress(codec: int, data, *, max_output: int = DEFAULT_MAX_DECOMPRESSED) -> bytes:
    """Decompress `data`; raise CorruptRecordError if malformed or larger than `max_output`."""
    if codec == Compression.NONE:  # most batches: no enum made
        return bytes(data)
    try:
        codec = Compression(codec)
    except ValueError:
        raise CorruptRecordError(f"unknown compression codec {codec}") from None
    data = bytes(data)
    if codec is Compression.NONE:
        return data
    if codec is Compression.SNAPPY:
        if data[:8] == XERIAL_MAGIC:
            return _xerial_decompress(data, max_output)
        return _snappy_raw_decompress(data, max_output)
    if codec is Compression.GZIP:
        return _bounded(cramjam.gzip.decompress_into, data, _gzip_size_hint(data), max_output, "gzip")
    if codec is Compression.LZ4:
        return _bounded(cramjam.lz4.decompress_into, data, _lz4_size_hint(data), max_output, "lz4")
    return _bounded(cramjam.zstd.decompress_into, data, _zstd_size_hint(data), max_output, "zstd")


def _bounded(decompress_into, data: bytes, hint: int | None, max_output: int, name: str) -> bytes:
    """Decompress into a buffer one byte larger than we expect, growing up to the limit.

    A result that fills the buffer exactly might be cut short, so the buffer is
    always one byte larger than the largest size we accept.
    """
    if not data:
        raise CorruptRecordError(f"empty {name} payload")
    if hint is None or hint > max_output:
        hint = min(max(len(data) * 4, 64 * 1024), max_output)
    capacity = hint + 1
    while True:
        out = bytearray(capacity)
        try:
            n = decompress_into(data, out)
        except Exception as exc:  # cramjam.DecompressionError and friends
            if _OVERFLOW in str(exc) and capacity <= max_output:
                capacity = min(capacity * 4, max_output + 1)
                continue
            if _OVERFLOW in str(exc):
                raise CorruptRecordError(f"{name} payload decompresses beyond {max_output} bytes") from None
            raise CorruptRecordError(f"corrupt {name} payload: {exc}") from None
        if n < capacity:
            del out[n:]
            return bytes(out)
        if capacity > max_output:
            raise CorruptRecordError(f"{name} payload decompresses beyond {max_output} bytes")
        capacity = min(capacity * 4, max_output + 1)


def _gzip_size_hint(data: bytes) -> int | None:
    # ISIZE trailer: uncompressed size mod 2**32 of the last member. Only a hint.
    return _UINT32_LE.unpack_from(data, len(data) - 4)[0] if len(data) >= 18 else None


def _lz4_size_hint(data: bytes) -> int | None:
    # Frame descriptor: magic(4) FLG(1) BD(1) [content size u64 LE if FLG bit 3].
    if len(data) >= 14 and data[4] & 0x08:
        return _UINT64_LE.unpack_from(data, 6)[0]
    return None


def _zstd_size_hint(data: bytes) -> int | None:
    # Frame header: magic(4) FHD(1) [window(1) unless single segment] [dict id 0/1/2/4] [FCS].
    if len(data) < 6 or data[:4] != b"\x28\xb5\x2f\xfd":
        return None
    fhd = data[4]
    single_segment = bool(fhd & 0x20)
    fcs_size = (1 if single_segment else 0, 2, 4, 8)[fhd >> 6]
    pos = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[fhd & 0x03]
    if fcs_size == 0 or len(data) < pos + fcs_size:
        return None
    value = int.from_bytes(data[pos : pos + fcs_size], "little")
    return value + 256 if fcs_size == 2 else value


def _snappy_raw_len(block: bytes) -> int:
    try:
        return cramjam.snappy.decompress_raw_len(block)
    except Exception as exc:
        raise CorruptRecordError(f"corrupt snappy block: {exc}") from None


def _snappy_raw_decompress(data: bytes, max_output: int) -> bytes:
    size = _snappy_raw_len(data)
    if size > max_output:
        raise CorruptRecordError(f"snappy payload decompresses beyond {max_output} bytes")
    try:
        return bytes(cramjam.snappy.decompress_raw(data))
    except Exception as exc:
        raise CorruptRecordError(f"corrupt snappy block: {exc}") from None


def _xerial_compress(data) -> bytes:
    view = memoryview(data).cast("B")
    parts = [_XERIAL_HEADER]
    for start in range(0, len(view), _XERIAL_BLOCK):
        block = cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK])
        parts.append(_INT32.pack(len(block)))
        parts.append(bytes(block))
    return b"".join(parts)


def _xerial_decompress(data: bytes, max_output: int) -> bytes:
    """[16-byte header] then repeated [int32 BE length][raw snappy block]."""
    if len(data) < len(_XERIAL_HEADER):
        raise CorruptRecordError("truncated xerial snappy header")
    pos = len(_XERIAL_HEADER)
    blocks = []
    total = 0
    while pos < len(data):
        if len(data) - pos < 4:
            raise CorruptRecordError("truncated xerial snappy block length")
        (length,) = _INT32.unpack_from(data, pos)
        pos += 4
        if length < 0 or pos + length > len(data):
            raise CorruptRecordError(f"xerial snappy block length {length} exceeds payload")
        block = data[pos : pos + length]
        pos += length
        total += _snappy_raw_len(block)
        if total > max_output:
            raise CorruptRecordError(f"snappy payload decompresses beyond {max_output} bytes")
        blocks.append(block)
    try:
        return b"".join(bytes(cramjam.snappy.decompress_raw(block)) for block in blocks)
    except Exception as exc:
        raise CorruptRecordError(f"corrupt snappy block: {exc}") from None
