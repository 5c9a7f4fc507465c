"""Our consumer's read_committed: batches of an aborted transaction are dropped from its first
offset to its ABORT marker (the broker lists the aborted transactions), committed and
non-transactional records are kept, control batches never handed out."""
from __future__ import annotations

from types import SimpleNamespace

from raftkafka.client.fetcher import FetchState
from wire.records import SimpleRecord, build_batch, build_end_txn_marker

TP = ("t", 0)


def _log() -> bytes:
    def data(offset, pid, value, transactional=True):
        return build_batch([SimpleRecord(None, value, (), 1)], base_offset=offset, producer_id=pid,
                           producer_epoch=0, base_sequence=offset, transactional=transactional)

    def marker(offset, pid, commit):
        return build_end_txn_marker(commit, producer_id=pid, producer_epoch=0, coordinator_epoch=0,
                                    timestamp=1, base_offset=offset)

    return b"".join([
        data(0, 7, b"aborted-0"), data(1, 8, b"committed-0"), data(2, 7, b"aborted-1"),
        data(3, 9, b"plain", transactional=False), marker(4, 7, False), marker(5, 8, True),
        data(6, 7, b"committed-1"), marker(7, 7, True),
    ])


def _read(isolation_level: int, aborted) -> list[bytes]:
    state = FetchState(isolation_level=isolation_level)
    state.assign([TP])
    state.seek(TP, 0)
    request = state.build_request([TP], max_wait_ms=0, min_bytes=1, max_bytes=1 << 20)
    partition = SimpleNamespace(partition_index=0, error_code=0, high_watermark=8, log_start_offset=0,
                                records=_log(), aborted_transactions=aborted)
    response = SimpleNamespace(error_code=0, responses=[SimpleNamespace(topic="t", partitions=[partition])])
    count, stale, errors = state.handle_response(request, response)
    assert not stale and not errors
    values = [r.value for r in state.take(100)]
    assert state.partitions[TP].position == 8  # past the last marker either way
    return values


def test_read_committed_drops_the_aborted_transaction_up_to_its_marker_only():
    aborted = [SimpleNamespace(producer_id=7, first_offset=0)]
    assert _read(1, aborted) == [b"committed-0", b"plain", b"committed-1"]


def test_read_uncommitted_keeps_everything_but_the_markers():
    assert _read(0, None) == [b"aborted-0", b"committed-0", b"aborted-1", b"plain", b"committed-1"]
