"""ProducerStateManager: dedupe, sequence/epoch validation, rebuild, snapshots, truncation, expiry."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from broker.producer_state import ProducerStateManager
from broker.producer_state.entry import MAX_SEQUENCE
from broker.producer_state.snapshot_codec import decode_snapshot
from wire.batch_header import BatchHeader, iter_batches
from wire.error_codes import ErrorCode
from wire.errors import DecodeError
from wire.records import SimpleRecord, build_batch


def hdr(pid: int, epoch: int, seq: int, count: int = 1, base_offset: int = 0, ts: int = 1000,
        control: bool = False) -> BatchHeader:
    attributes = 0x20 if control else 0
    return BatchHeader(base_offset, 100, 0, 2, 0, attributes, count - 1, ts, ts, pid, epoch, seq, count)


class Log:
    """A toy leader: offsets handed out in order, the produce path as the broker runs it."""

    def __init__(self, state: ProducerStateManager):
        self.state = state
        self.next_offset = 0
        self.headers: list[BatchHeader] = []

    def produce(self, h: BatchHeader):
        verdict = self.state.check(h)
        if verdict.duplicate is not None:
            return "dup", verdict.duplicate.first_offset
        if verdict.error != ErrorCode.NONE:
            return verdict.error, None
        placed = h._replace(base_offset=self.next_offset)
        self.headers.append(placed)
        self.state.record(placed, self.next_offset)
        self.next_offset += h.records_count
        return "ok", placed.base_offset


def test_non_idempotent_batches_are_always_accepted():
    log = Log(ProducerStateManager())
    assert log.produce(hdr(-1, -1, -1)) == ("ok", 0)
    assert log.produce(hdr(-1, -1, -1)) == ("ok", 1)
    assert log.state.producers == {}


def test_in_order_batches_accepted_and_retry_returns_original_offsets():
    log = Log(ProducerStateManager())
    assert log.produce(hdr(7, 0, 0, count=3)) == ("ok", 0)
    assert log.produce(hdr(-1, -1, -1)) == ("ok", 3)
    assert log.produce(hdr(7, 0, 3, count=2)) == ("ok", 4)
    # Retrying either batch appends nothing and answers with where it was first written.
    assert log.produce(hdr(7, 0, 0, count=3)) == ("dup", 0)
    assert log.produce(hdr(7, 0, 3, count=2)) == ("dup", 4)
    assert log.next_offset == 6
    dup = log.state.check(hdr(7, 0, 3, count=2)).duplicate
    assert (dup.first_offset, dup.last_offset) == (4, 5)


def test_gap_is_out_of_order():
    log = Log(ProducerStateManager())
    log.produce(hdr(7, 0, 0, count=2))
    assert log.produce(hdr(7, 0, 3)) == (ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, None)
    # A batch overlapping the last one with different bounds is out of order too.
    assert log.produce(hdr(7, 0, 1, count=2)) == (ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, None)
    assert log.produce(hdr(7, 0, 2)) == ("ok", 2)


def test_only_the_last_five_batches_are_remembered():
    log = Log(ProducerStateManager())
    for seq in range(7):
        log.produce(hdr(7, 0, seq))
    assert [b.first_seq for b in log.state.producers[7].batches] == [2, 3, 4, 5, 6]
    assert log.produce(hdr(7, 0, 2)) == ("dup", 2)
    # Older than every retained batch: written long ago, answered as a duplicate sequence.
    assert log.produce(hdr(7, 0, 1)) == (ErrorCode.DUPLICATE_SEQUENCE_NUMBER, None)


def test_stale_epoch_is_fenced_and_new_epoch_restarts_at_zero():
    log = Log(ProducerStateManager())
    log.produce(hdr(7, 3, 0))
    log.produce(hdr(7, 3, 1))
    assert log.produce(hdr(7, 2, 2)) == (ErrorCode.INVALID_PRODUCER_EPOCH, None)
    assert log.produce(hdr(7, 4, 2)) == (ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, None)
    assert log.produce(hdr(7, 4, 0)) == ("ok", 2)
    assert log.state.producers[7].epoch == 4
    # The old epoch's batches are gone with it: its retry is fenced, not a duplicate.
    assert log.produce(hdr(7, 3, 1)) == (ErrorCode.INVALID_PRODUCER_EPOCH, None)


def test_unknown_producer_must_start_at_zero():
    log = Log(ProducerStateManager())
    assert log.produce(hdr(9, 0, 5)) == (ErrorCode.UNKNOWN_PRODUCER_ID, None)
    assert log.produce(hdr(9, 0, 0)) == ("ok", 0)


def test_sequence_wraps_around():
    log = Log(ProducerStateManager())
    # A batch ending exactly at MAX_SEQUENCE, recorded as a follower would.
    log.state.apply(hdr(7, 0, MAX_SEQUENCE - 1, count=2, base_offset=0))
    log.next_offset = 2
    assert log.produce(hdr(7, 0, 0, count=2)) == ("ok", 2)
    assert log.state.producers[7].last_seq == 1
    # A batch that itself wraps: its last sequence is computed modulo 2^31.
    h = hdr(7, 0, 2, count=1)
    assert log.produce(h) == ("ok", 4)
    wrapping = hdr(8, 0, MAX_SEQUENCE, count=3)
    assert wrapping.last_sequence == 1
    log.state.apply(wrapping._replace(base_offset=10))
    assert log.produce(hdr(8, 0, 2)) == ("ok", 5)
    assert log.produce(hdr(8, 0, MAX_SEQUENCE, count=3)) == ("dup", 10)


def test_invalid_sequence_with_producer_id_is_rejected():
    assert ProducerStateManager().check(hdr(7, 0, -1)).error == ErrorCode.INVALID_RECORD


def test_check_is_pure():
    state = ProducerStateManager()
    state.check(hdr(7, 0, 0))
    assert state.producers == {} and state.end_offset == 0


def test_check_and_record_records_only_accepted_batches():
    state = ProducerStateManager()
    assert state.check_and_record(hdr(7, 0, 0), 0).ok
    assert state.check_and_record(hdr(7, 0, 5), 1).error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert state.producers[7].last_seq == 0


def _real_log(n_batches: int) -> tuple[bytes, list[BatchHeader]]:
    out = bytearray()
    offset = 0
    for i in range(n_batches):
        pid = 100 + i % 3
        seq = (i // 3) * 2
        batch = build_batch([SimpleRecord(b"k", b"v%d" % i)] * 2, base_offset=offset, base_timestamp=5000 + i,
                            producer_id=pid, producer_epoch=0, base_sequence=seq)
        out += batch
        offset += 2
    out += build_batch([SimpleRecord(None, b"plain")], base_offset=offset)
    return bytes(out), [h for _, h in iter_batches(out)]


def test_rebuild_from_log_equals_leader_state():
    raw, headers = _real_log(12)
    leader = Log(ProducerStateManager())
    for h in headers:
        assert leader.produce(h._replace(base_offset=0))[0] == "ok"
    rebuilt = ProducerStateManager()
    rebuilt.rebuild(headers)
    assert rebuilt.to_bytes() == leader.state.to_bytes()
    assert rebuilt.end_offset == leader.next_offset == 25
    # Rebuilt state dedupes like the original.
    retry = headers[-2]
    assert rebuilt.check(retry._replace(base_offset=0)).duplicate.first_offset == retry.base_offset


def test_rebuild_skips_what_a_snapshot_already_covers():
    _, headers = _real_log(9)
    full = ProducerStateManager()
    full.rebuild(headers)
    half = ProducerStateManager()
    half.rebuild(headers[:4])
    restored = ProducerStateManager()
    restored.load_snapshot(half.end_offset, half.to_bytes())
    restored.rebuild(headers)  # the whole log again: only the tail is applied
    assert restored.to_bytes() == full.to_bytes()


def test_control_batches_are_not_tracked():
    state = ProducerStateManager()
    state.apply(hdr(7, 0, -1, control=True, base_offset=4))
    assert state.producers == {} and state.end_offset == 5


def test_snapshot_round_trip_and_bad_bytes():
    _, headers = _real_log(10)
    state = ProducerStateManager()
    state.rebuild(headers)
    blob = state.to_bytes()
    again = ProducerStateManager()
    again.load_snapshot(state.end_offset, blob)
    assert again.producers == state.producers
    for cut in range(len(blob)):
        with pytest.raises(DecodeError):
            decode_snapshot(blob[:cut])
    with pytest.raises(DecodeError):
        decode_snapshot(blob + b"\x00")
    with pytest.raises(DecodeError):
        decode_snapshot(b"\x00\x09" + blob[2:])


@given(st.binary(max_size=200))
@settings(max_examples=200, deadline=None)
def test_snapshot_decoder_raises_only_decode_error(blob):
    try:
        decode_snapshot(blob)
    except DecodeError:
        pass


def test_truncate_reloads_from_snapshot_and_surviving_log():
    _, headers = _real_log(12)
    state = ProducerStateManager()
    state.rebuild(headers[:5])
    snapshot = (state.end_offset, state.to_bytes())
    state.rebuild(headers)
    cut = headers[8].base_offset  # batches 8.. are gone
    state.truncate_to(cut, snapshot, headers[5:])
    expected = ProducerStateManager()
    expected.rebuild(headers[:8])
    assert state.to_bytes() == expected.to_bytes()
    assert state.end_offset == cut
    # The truncated batch is no longer a duplicate: its producer may write it again.
    lost = headers[8]
    assert state.check(lost._replace(base_offset=0)).ok


def test_truncate_ignores_a_snapshot_beyond_the_cut():
    _, headers = _real_log(6)
    state = ProducerStateManager()
    state.rebuild(headers)
    late = (state.end_offset, state.to_bytes())
    state.truncate_to(headers[2].base_offset, late, headers)
    expected = ProducerStateManager()
    expected.rebuild(headers[:2])
    assert state.to_bytes() == expected.to_bytes()


def test_idle_producers_expire():
    state = ProducerStateManager(producer_id_expiration_ms=1000)
    state.apply(hdr(1, 0, 0, ts=100))
    state.apply(hdr(2, 0, 0, ts=900, base_offset=1))
    assert state.remove_expired(1099) == []
    assert state.remove_expired(1100) == [1]
    assert sorted(state.producers) == [2]
    assert state.check(hdr(1, 0, 1)).error == ErrorCode.UNKNOWN_PRODUCER_ID


@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 1), st.integers(0, 6), st.integers(1, 3)),
                max_size=40))
@settings(max_examples=100, deadline=None)
def test_accepted_sequences_never_repeat_or_skip(ops):
    """Whatever a producer sends, each (pid, epoch) sees each sequence at most once, in order."""
    log = Log(ProducerStateManager())
    for pid, epoch, seq, count in ops:
        log.produce(hdr(pid, epoch, seq, count))
    per_producer: dict[tuple[int, int], list[int]] = {}
    for h in log.headers:
        per_producer.setdefault((h.producer_id, h.producer_epoch), []).extend(
            range(h.base_sequence, h.base_sequence + h.records_count))
    for (pid, epoch), seqs in per_producer.items():
        assert seqs == list(range(len(seqs))), (pid, epoch, seqs)
    rebuilt = ProducerStateManager()
    rebuilt.rebuild(log.headers)
    assert rebuilt.to_bytes() == log.state.to_bytes()
