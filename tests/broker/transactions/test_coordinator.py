"""The sans-IO transaction coordinator: Kafka's state machine, fencing, markers, timeouts,
loading and the __transaction_state records."""
from __future__ import annotations

from dataclasses import replace

import pytest

from broker.groups.timers import Now
from broker.transactions import TransactionCoordinator, TxnConfig, TxnOutput, TxnState
from broker.transactions.log_records import decode_key, decode_value, encode_key, encode_value
from wire.error_codes import ErrorCode as E
from wire.errors import DecodeError

TX = "tx"
STEP_MS = 105_000  # a wall clock step well past every timeout here


class Harness:
    """The coordinator with one loaded partition; appends commit (or fail) when told."""

    def __init__(self, **config):
        self.c = TransactionCoordinator(TxnConfig(num_partitions=1, abort_check_interval_ms=1000, **config))
        # Far apart, so a timestamp taken from the wrong clock shows.
        self.now = Now(monotonic_ms=1_000, wall_ms=1_767_225_600_000)
        self.c.load_partition(0, [], self.now)
        self.appended: list[tuple[bytes, bytes]] = []
        self.markers = []
        self.token = 0

    def run(self, out: TxnOutput, error: E = E.NONE) -> list:
        """Commit (or fail) every append the output asks for, transitively; the answers."""
        answers = [c.response for c in out.completions]
        self.markers += out.markers
        for append in out.appends:
            self.appended += append.records
            answers += self.run(self.c.append_done(append.append_id, error, self.now), error)
        return answers

    def call(self, method: str, *args, error: E = E.NONE):
        self.token += 1
        answers = self.run(getattr(self.c, method)(self.token, *args, now=self.now), error)
        assert len(answers) == 1, answers
        return answers[0]

    def init(self, new_id=1000, timeout=60_000, **kw):
        return self.call("init_producer_id", TX, timeout, new_id, **kw)

    def write_markers(self):
        markers, self.markers = self.markers, []
        for m in markers:
            self.run(self.c.markers_written(m.transactional_id, m.producer_id, m.producer_epoch, m.partitions,
                                            self.now))
        return markers

    def advance(self, ms: int) -> None:
        """Both clocks move on (a driver ticks only when asked here)."""
        self.now = Now(self.now.monotonic_ms + ms, self.now.wall_ms + ms)

    def step_wall(self, ms: int) -> None:
        """The wall clock alone jumps (NTP, an operator)."""
        self.now = replace(self.now, wall_ms=self.now.wall_ms + ms)

    @property
    def txn(self):
        return self.c.txns[TX]


def test_a_new_id_starts_at_epoch_0_and_each_init_bumps_the_epoch():
    h = Harness()
    assert h.c.needs_producer_id(TX)
    first = h.init()
    assert (first.error, first.producer_id, first.producer_epoch) == (E.NONE, 1000, 0)
    assert not h.c.needs_producer_id(TX)
    second = h.init(new_id=None)
    assert (second.error, second.producer_id, second.producer_epoch) == (E.NONE, 1000, 1)
    assert decode_value(TX, h.appended[-1][1]).producer_epoch == 1


def test_commit_goes_through_prepare_markers_and_complete():
    h = Harness()
    h.init()
    assert h.call("add_partitions", TX, 1000, 0, [("t", 0), ("t", 1)]).error == E.NONE
    assert h.txn.state is TxnState.ONGOING and h.txn.txn_start_ms == h.now.wall_ms
    written = len(h.appended)
    assert h.call("add_partitions", TX, 1000, 0, [("t", 1)]).error == E.NONE
    assert len(h.appended) == written  # already in the transaction: nothing to write
    assert h.call("end_txn", TX, 1000, 0, True).error == E.NONE
    assert h.txn.state is TxnState.PREPARE_COMMIT
    assert h.call("end_txn", TX, 1000, 0, True).error == E.CONCURRENT_TRANSACTIONS
    assert h.call("add_partitions", TX, 1000, 0, [("t", 2)]).error == E.CONCURRENT_TRANSACTIONS
    [marker] = h.write_markers()
    assert marker.commit and marker.partitions == {("t", 0), ("t", 1)} and marker.producer_epoch == 0
    assert h.txn.state is TxnState.COMPLETE_COMMIT and h.txn.partitions == frozenset()
    assert h.call("end_txn", TX, 1000, 0, True).error == E.NONE  # a retried commit
    assert h.call("end_txn", TX, 1000, 0, False).error == E.INVALID_TXN_STATE
    assert h.call("add_partitions", TX, 1000, 0, [("t", 2)]).error == E.NONE  # the next transaction
    assert h.txn.state is TxnState.ONGOING


def test_wrong_producer_id_or_epoch_is_refused():
    h = Harness()
    h.init()
    h.init(new_id=None)  # epoch 1
    assert h.call("add_partitions", TX, 999, 1, [("t", 0)]).error == E.INVALID_PRODUCER_ID_MAPPING
    assert h.call("add_partitions", TX, 1000, 0, [("t", 0)]).error == E.PRODUCER_FENCED
    assert h.call("end_txn", TX, 1000, 0, True).error == E.PRODUCER_FENCED
    assert h.call("end_txn", "unknown", 1000, 1, True).error == E.INVALID_PRODUCER_ID_MAPPING
    assert h.call("end_txn", TX, 1000, 1, True).error == E.INVALID_TXN_STATE  # Empty: nothing to end


def test_init_during_an_open_transaction_fences_and_aborts_it():
    h = Harness()
    h.init()
    h.call("add_partitions", TX, 1000, 0, [("t", 0)])
    assert h.init(new_id=None).error == E.CONCURRENT_TRANSACTIONS
    assert h.txn.producer_epoch == 1 and h.txn.state is TxnState.PREPARE_ABORT
    assert h.call("end_txn", TX, 1000, 0, True).error == E.PRODUCER_FENCED  # the zombie
    [marker] = h.write_markers()
    assert not marker.commit and marker.producer_epoch == 1 and marker.partitions == {("t", 0)}
    assert h.txn.state is TxnState.COMPLETE_ABORT
    again = h.init(new_id=None)
    assert (again.error, again.producer_epoch) == (E.NONE, 2)


def test_a_transaction_open_past_its_timeout_is_aborted_and_its_producer_fenced():
    h = Harness()
    h.init(timeout=5_000)
    h.call("add_partitions", TX, 1000, 0, [("t", 0)])
    h.advance(3_000)
    h.run(h.c.tick(h.now))
    assert h.txn.state is TxnState.ONGOING  # not yet: 3 s of 5
    h.advance(3_000)
    assert h.c.next_deadline() <= h.now.monotonic_ms
    h.run(h.c.tick(h.now))
    assert h.txn.state is TxnState.PREPARE_ABORT and h.txn.producer_epoch == 1
    h.write_markers()
    assert h.txn.state is TxnState.COMPLETE_ABORT
    assert h.call("add_partitions", TX, 1000, 0, [("t", 0)]).error == E.PRODUCER_FENCED


def test_a_wall_clock_step_neither_fires_nor_delays_the_transaction_timeout():
    h = Harness()
    h.init(timeout=5_000)
    h.call("add_partitions", TX, 1000, 0, [("t", 0)])
    h.step_wall(STEP_MS)  # past the timeout by the wall clock only
    h.advance(1_000)
    h.run(h.c.tick(h.now))
    assert h.txn.state is TxnState.ONGOING and h.txn.txn_start_ms == h.now.wall_ms - STEP_MS - 1_000
    h.step_wall(-2 * STEP_MS)
    h.advance(4_001)
    h.run(h.c.tick(h.now))
    assert h.txn.state is TxnState.PREPARE_ABORT and h.txn.producer_epoch == 1


def test_a_wall_clock_step_neither_fires_nor_delays_the_retry_of_a_complete_record():
    h = Harness()
    h.init()
    h.call("add_partitions", TX, 1000, 0, [("t", 0)])
    h.call("end_txn", TX, 1000, 0, False)
    [marker] = h.markers
    h.run(h.c.markers_written(TX, 1000, 0, marker.partitions, h.now), E.REQUEST_TIMED_OUT)
    assert h.txn.state is TxnState.PREPARE_ABORT  # the CompleteAbort record is retried in 1 s
    h.step_wall(STEP_MS)
    h.run(h.c.tick(h.now))
    assert h.txn.state is TxnState.PREPARE_ABORT
    h.step_wall(-2 * STEP_MS)
    h.advance(1_000)
    h.run(h.c.tick(h.now))
    assert h.txn.state is TxnState.COMPLETE_ABORT
    assert h.init(new_id=None).error == E.NONE


@pytest.mark.parametrize("started_ago_ms, times_out_after_ms", [
    (2_000, 3_000),        # what is left of its timeout
    (-STEP_MS, 5_000),     # the writer's wall clock ran ahead: at most the whole timeout
    (STEP_MS, 0),          # long gone: at the first check
])
def test_a_loaded_transaction_times_out_after_what_its_start_leaves_of_its_timeout(started_ago_ms,
                                                                                   times_out_after_ms):
    h = Harness()
    h.init(timeout=5_000)
    h.call("add_partitions", TX, 1000, 0, [("t", 0)])
    h.step_wall(started_ago_ms)
    other = TransactionCoordinator(TxnConfig(num_partitions=1, abort_check_interval_ms=100))
    other.begin_loading(0)
    other.load_partition(0, h.appended, h.now)
    assert other.txns[TX].timeout_deadline_ms == h.now.monotonic_ms + times_out_after_ms


def test_an_idle_id_expires_as_a_tombstone_and_starts_afresh():
    h = Harness(id_expiration_ms=60_000, expiry_check_interval_ms=10_000)
    h.init()
    h.call("add_partitions", TX, 1000, 0, [("t", 0)])
    h.advance(120_000)
    h.run(h.c.tick(h.now))
    assert TX in h.c.txns  # Ongoing: never expired (the timeout aborts it instead)
    h.write_markers()
    assert h.txn.state is TxnState.COMPLETE_ABORT
    h.advance(61_000)
    h.run(h.c.tick(h.now))
    assert TX not in h.c.txns and h.appended[-1] == (encode_key(TX), None)
    fresh = h.init(new_id=2000)
    assert (fresh.producer_id, fresh.producer_epoch) == (2000, 0)


def test_timeouts_and_ids_are_validated():
    h = Harness(max_timeout_ms=10_000)
    assert h.init(timeout=10_001).error == E.INVALID_TRANSACTION_TIMEOUT
    assert h.init(timeout=0).error == E.INVALID_TRANSACTION_TIMEOUT
    assert h.call("init_producer_id", "", 1000, 7).error == E.INVALID_REQUEST
    assert h.init(new_id=None, timeout=5_000).error == E.CONCURRENT_TRANSACTIONS  # a new id needs a producer id


def test_a_failed_write_is_answered_with_kafkas_mapping_and_changes_nothing():
    h = Harness()
    assert h.init(error=E.NOT_LEADER_OR_FOLLOWER).error == E.NOT_COORDINATOR
    assert TX not in h.c.txns  # a new id whose record never made it is forgotten
    h.init()
    assert h.call("add_partitions", TX, 1000, 0, [("t", 0)], error=E.REQUEST_TIMED_OUT).error == \
        E.COORDINATOR_NOT_AVAILABLE
    assert h.txn.state is TxnState.EMPTY and h.txn.pending_state is None


def test_loading_replays_records_and_resumes_markers_of_prepared_transactions():
    h = Harness()
    h.init()
    h.call("add_partitions", TX, 1000, 0, [("t", 0), ("u", 3)])
    h.call("end_txn", TX, 1000, 0, False)
    records = list(h.appended)  # the coordinator dies before the markers are written
    other = TransactionCoordinator(TxnConfig(num_partitions=1))
    assert other.route_error(TX) == E.NOT_COORDINATOR
    other.begin_loading(0)
    assert other.route_error(TX) == E.COORDINATOR_LOAD_IN_PROGRESS
    out = other.load_partition(0, records + [(b"garbage", b"x")], h.now, lambda pos, reason: None)
    assert other.txns[TX].state is TxnState.PREPARE_ABORT
    [marker] = out.markers
    assert not marker.commit and marker.partitions == {("t", 0), ("u", 3)}
    unloaded = other.unload_partition(0, h.now)
    assert TX not in other.txns and unloaded.completions == []


def test_transaction_log_records_round_trip_and_refuse_garbage():
    h = Harness()
    h.init()
    h.call("add_partitions", TX, 1000, 0, [("t", 0), ("t", 2), ("ü", 1)])
    key, value = h.appended[-1]
    assert decode_key(key) == TX and encode_key(TX) == key
    stored = decode_value(TX, value)
    assert stored.partitions == {("t", 0), ("t", 2), ("ü", 1)} and stored.state is TxnState.ONGOING
    assert encode_value(stored) == value
    for bad in (value[:-1], value + b"\x00", b"\x00\x07" + value[2:]):
        with pytest.raises(DecodeError):
            decode_value(TX, bad)
    with pytest.raises(DecodeError):
        decode_key(key + b"\x00")
