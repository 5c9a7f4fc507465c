"""Compression codecs: Kafka wire formats, interop with other encoders, bounds, bad input."""
from __future__ import annotations

import gzip
import os
import random
import struct

import cramjam
import kafka.codec
import lz4.frame
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wire.compression import XERIAL_MAGIC, Compression, compress, decompress
from wire.errors import CorruptRecordError

CODECS = [c for c in Compression if c is not Compression.NONE]


def realistic(size: int, seed: int = 1) -> bytes:
    """JSON-ish log lines: compressible like real topic data, not trivially so."""
    rng = random.Random(seed)
    words = [b"user", b"order", b"click", b"session", b"payment", b"region", b"eu-west", b"status", b"ok"]
    out = bytearray()
    while len(out) < size:
        out += b'{"id":%d,"%s":"%s","ts":%d}\n' % (
            rng.randrange(10**9), rng.choice(words), rng.choice(words), 1_700_000_000_000 + rng.randrange(10**6)
        )
    return bytes(out[:size])


@pytest.mark.parametrize("size", [0, 1, 1000, 40_000, 300_000])
@pytest.mark.parametrize("codec", list(Compression))
def test_round_trip(codec, size):
    data = realistic(size)
    packed = compress(codec, data)
    assert decompress(codec, packed) == data
    if size >= 40_000 and codec is not Compression.NONE:
        assert len(packed) < len(data) // 2


def test_accepts_any_bytes_like():
    data = realistic(5000)
    for codec in CODECS:
        assert decompress(codec, memoryview(compress(codec, bytearray(data)))) == data


# --------------------------------------------------------------------------- #
# Wire formats we write
# --------------------------------------------------------------------------- #


def test_gzip_is_a_plain_gzip_stream():
    data = realistic(10_000)
    packed = compress(Compression.GZIP, data)
    assert packed[:2] == b"\x1f\x8b"
    assert gzip.decompress(packed) == data


def test_snappy_writes_xerial_framing_in_32k_blocks():
    data = realistic(100_000)
    packed = compress(Compression.SNAPPY, data)
    assert packed[:16] == XERIAL_MAGIC + struct.pack(">ii", 1, 1)
    pos, pieces = 16, []
    while pos < len(packed):
        (length,) = struct.unpack_from(">i", packed, pos)
        pieces.append(cramjam.snappy.decompress_raw(packed[pos + 4 : pos + 4 + length]).read())
        pos += 4 + length
    assert [len(p) for p in pieces] == [32768, 32768, 32768, 1696]
    assert b"".join(pieces) == data


def test_snappy_raw_on_request():
    data = realistic(5000)
    packed = compress(Compression.SNAPPY, data, xerial=False)
    assert bytes(cramjam.snappy.decompress_raw(packed)) == data


def test_lz4_frame_has_independent_blocks_and_no_content_checksum():
    packed = compress(Compression.LZ4, realistic(200_000))
    assert packed[:4] == b"\x04\x22\x4d\x18"
    flg, bd = packed[4], packed[5]
    assert flg >> 6 == 1  # frame version 01
    assert flg & 0x20  # block independence: Java's reader rejects linked blocks
    assert not flg & 0x04  # no content checksum
    assert (bd >> 4) & 0x7 == 4  # 64 KiB max block size, as Kafka's Java producer


def test_zstd_is_a_zstd_frame():
    data = realistic(10_000)
    packed = compress(Compression.ZSTD, data)
    assert packed[:4] == b"\x28\xb5\x2f\xfd"
    assert zstandard.ZstdDecompressor().decompress(packed) == data


def test_client_decoders_read_what_we_write():
    data = realistic(150_000)
    assert kafka.codec.gzip_decode(compress(Compression.GZIP, data)) == data
    assert kafka.codec.snappy_decode(compress(Compression.SNAPPY, data)) == data
    assert kafka.codec.lz4_decode(compress(Compression.LZ4, data)) == data
    assert kafka.codec.zstd_decode(compress(Compression.ZSTD, data)) == data


# --------------------------------------------------------------------------- #
# Formats other producers write
# --------------------------------------------------------------------------- #

OTHER_ENCODINGS = {
    "gzip stdlib level 9": (Compression.GZIP, lambda d: gzip.compress(d, 9)),
    "gzip two members": (Compression.GZIP, lambda d: gzip.compress(d[:7000]) + gzip.compress(d[7000:])),
    "snappy raw block (librdkafka)": (Compression.SNAPPY, lambda d: bytes(cramjam.snappy.compress_raw(d))),
    "snappy xerial (kafka-python)": (Compression.SNAPPY, kafka.codec.snappy_encode),
    "lz4 frame, block checksums (aiokafka)": (
        Compression.LZ4, lambda d: lz4.frame.compress(d, block_linked=False, block_checksum=True)
    ),
    "lz4 frame, content checksum and size": (
        Compression.LZ4, lambda d: lz4.frame.compress(d, block_linked=False, content_checksum=True, store_size=True)
    ),
    "lz4 frame, no size (librdkafka)": (
        Compression.LZ4, lambda d: lz4.frame.compress(d, block_linked=False, store_size=False)
    ),
    "zstd without content size (librdkafka)": (
        Compression.ZSTD, lambda d: zstandard.ZstdCompressor(write_content_size=False).compress(d)
    ),
    "zstd with content size": (Compression.ZSTD, lambda d: zstandard.ZstdCompressor(level=9).compress(d)),
    "zstd two frames": (Compression.ZSTD, lambda d: zstandard.compress(d[:5000]) + zstandard.compress(d[5000:])),
}


@pytest.mark.parametrize("name", sorted(OTHER_ENCODINGS))
def test_decodes_other_producers_formats(name):
    codec, encode = OTHER_ENCODINGS[name]
    for size in (10_000, 500_000):
        data = realistic(size, seed=size)
        assert decompress(codec, encode(data)) == data


def test_google_framed_snappy_is_not_kafka_snappy():
    with pytest.raises(CorruptRecordError):
        decompress(Compression.SNAPPY, bytes(cramjam.snappy.compress(realistic(1000))))


# --------------------------------------------------------------------------- #
# Bounded output (decompression bombs)
# --------------------------------------------------------------------------- #

BOMB_ENCODINGS = {
    "gzip": (Compression.GZIP, lambda d: compress(Compression.GZIP, d)),
    "snappy xerial": (Compression.SNAPPY, lambda d: compress(Compression.SNAPPY, d)),
    "snappy raw": (Compression.SNAPPY, lambda d: compress(Compression.SNAPPY, d, xerial=False)),
    "lz4": (Compression.LZ4, lambda d: compress(Compression.LZ4, d)),
    "lz4 no size": (Compression.LZ4, lambda d: lz4.frame.compress(d, block_linked=False, store_size=False)),
    "zstd": (Compression.ZSTD, lambda d: compress(Compression.ZSTD, d)),
    "zstd no size": (Compression.ZSTD, lambda d: zstandard.ZstdCompressor(write_content_size=False).compress(d)),
}


@pytest.mark.parametrize("name", sorted(BOMB_ENCODINGS))
def test_output_limit_is_exact(name):
    codec, encode = BOMB_ENCODINGS[name]
    data = bytes(2_000_000)
    packed = encode(data)
    assert decompress(codec, packed, max_output=2_000_000) == data
    with pytest.raises(CorruptRecordError, match="beyond"):
        decompress(codec, packed, max_output=1_999_999)
    with pytest.raises(CorruptRecordError, match="beyond"):
        decompress(codec, packed, max_output=10_000)


def test_lying_size_hints_are_only_hints():
    data = realistic(300_000)
    packed = bytearray(zstandard.ZstdCompressor(write_content_size=False).compress(data))
    assert decompress(Compression.ZSTD, bytes(packed)) == data
    lz4_packed = bytearray(lz4.frame.compress(data, block_linked=False, store_size=True))
    struct.pack_into("<Q", lz4_packed, 6, 10)  # claims 10 bytes; the header checksum then fails
    with pytest.raises(CorruptRecordError):
        decompress(Compression.LZ4, bytes(lz4_packed))


# --------------------------------------------------------------------------- #
# Bad input
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("payload", [b"", b"\x00", b"garbage" * 10, random.Random(7).randbytes(64)])
def test_garbage_is_corrupt(codec, payload):
    if codec is Compression.SNAPPY and payload == b"\x00":
        assert decompress(codec, payload) == b""  # a valid raw snappy block of length 0
        return
    with pytest.raises(CorruptRecordError):
        decompress(codec, payload)


@pytest.mark.parametrize("codec", CODECS)
def test_truncated_is_corrupt(codec):
    packed = compress(codec, realistic(100_000))
    for cut in (1, 5, len(packed) // 2, len(packed) - 1):
        with pytest.raises(CorruptRecordError):
            decompress(codec, packed[:cut])


def test_xerial_with_bad_block_lengths():
    header = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
    for tail in (b"\x00\x00", struct.pack(">i", -1), struct.pack(">i", 100) + b"short"):
        with pytest.raises(CorruptRecordError):
            decompress(Compression.SNAPPY, header + tail)
    with pytest.raises(CorruptRecordError):
        decompress(Compression.SNAPPY, header[:12])


def test_unknown_codec():
    with pytest.raises(CorruptRecordError):
        decompress(5, b"x")
    with pytest.raises(ValueError):
        compress(7, b"x")


FUZZ = settings(
    max_examples=int(os.environ.get("RAFTKAFKA_FUZZ_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@FUZZ
@given(
    st.sampled_from(CODECS),
    st.binary(min_size=1, max_size=3000),
    st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(1, 255)), max_size=4),
    st.integers(0, 1 << 16),
)
def test_mutated_payloads_raise_only_corrupt_record_error(codec, data, flips, cut):
    packed = bytearray(compress(codec, data))
    for where, xor in flips:
        packed[where % len(packed)] ^= xor
    packed = bytes(packed[: max(1, cut % (len(packed) + 1))])
    try:
        out = decompress(codec, packed, max_output=100_000)
    except CorruptRecordError:
        return
    assert len(out) <= 100_000
