"""The sink's column-wise record encoder against the one-record-at-a-time encoder: the same
bytes for every mix of runs (strided layout) and short runs (take layout)."""
import random

import numpy as np
import pyarrow as pa
import pytest

from spark_source import arrow_encode
from spark_source.arrow_encode import encode_records
from spark_source.batch_appender import seal_batch
from wire.compression import Compression
from wire.records import decode_batch

_KEY_SIZES = (None, 0, 5, 16)
_VALUE_SIZES = (None, 0, 1, 100, 3000)


def _one_at_a_time(keys, values, tag_prefix, tag_numbers) -> bytes:
    if not len(keys):
        return b""
    keys, values = keys.cast(pa.binary()), values.cast(pa.binary())
    return arrow_encode._encode_each(keys, values, tag_prefix, tag_numbers, [None] * len(keys))


def _rows(rng: random.Random, runs: int, longest: int):
    keys, values = [], []
    for _ in range(runs):
        key_size, value_size = rng.choice(_KEY_SIZES), rng.choice(_VALUE_SIZES)
        for _ in range(rng.randrange(longest + 1)):
            keys.append(None if key_size is None else bytes(rng.randrange(256) for _ in range(key_size)))
            values.append(None if value_size is None else rng.randbytes(value_size))
    return pa.array(keys, pa.binary()), pa.array(values, pa.binary())


@pytest.mark.parametrize("seed", range(40))
def test_sections_match_the_record_at_a_time_encoder(seed):
    rng = random.Random(seed)
    keys, values = _rows(rng, rng.randrange(1, 6), rng.choice((3, 40, 400)))
    # Tags whose row numbers cross powers of ten, so their length changes inside the rows.
    tag_prefix = rng.choice((None, b"sink:3:1:"))
    tag_numbers = np.arange(len(keys)) * rng.choice((1, 7)) + rng.choice((0, 95, 9_990)) if tag_prefix else None
    assert encode_records(keys, values, tag_prefix=tag_prefix, tag_numbers=tag_numbers) == \
        _one_at_a_time(keys, values, tag_prefix, tag_numbers)


def test_both_layouts_are_used_and_agree(monkeypatch):
    rng = random.Random(1)
    long_runs = _rows(rng, 3, 2000)
    short_runs = pa.array([b"k" * (i % 3) for i in range(500)], pa.binary()), \
        pa.array([b"v" * (i % 5) for i in range(500)], pa.binary())
    calls = []
    real = arrow_encode._encode_strided
    monkeypatch.setattr(arrow_encode, "_encode_strided", lambda *a: calls.append(1) or real(*a))
    for (keys, values), expect_strided in ((long_runs, True), (short_runs, False)):
        calls.clear()
        section = encode_records(keys, values, tag_prefix=b"t:", tag_numbers=np.arange(len(keys)))
        assert bool(calls) == expect_strided
        assert section == _one_at_a_time(keys, values, b"t:", np.arange(len(keys)))
        for codec in Compression:  # the section is sealed (compressed, checksummed) as it is
            _, records = decode_batch(seal_batch(section, len(keys), timestamp_ms=7, compression=codec))
            assert [(r.key, r.value) for r in records] == list(zip(keys.to_pylist(), values.to_pylist()))


def test_sliced_and_string_columns_encode_like_their_bytes():
    keys = pa.array([f"key{i % 10}" for i in range(1000)], pa.string())
    values = pa.array([b"x" * 100] * 1000, pa.binary())
    section = encode_records(keys[300:900], values[100:700], tag_prefix=b"p:", tag_numbers=np.arange(600) + 5)
    assert section == _one_at_a_time(keys[300:900], values[100:700], b"p:", np.arange(600) + 5)
    assert encode_records(keys[:0], values[:0]) == b""


def test_one_run_crossing_the_sizes_of_offset_deltas():
    n = 8_200  # deltas of 1, 2 and 3 bytes (from 64 and from 8,192 on)
    keys, values = pa.nulls(n, pa.binary()), pa.array([b"abc"] * n, pa.binary())
    assert encode_records(keys, values) == _one_at_a_time(keys, values, None, None)
