"""Deliberate transaction bugs patched into the real broker code (issue 22), for the
mutation catalogue: the transactional workload's checkers (simulations/checkers/
transactions.py) must catch each. Nothing here is a switch in node code."""
from __future__ import annotations

import broker.handlers.produce
import broker.txn_driver
from broker.coordinator_driver import CoordinatorDriver
from broker.groups.timers import Now
from broker.partition import Partition
from broker.producer_state.manager import ProducerStateManager
from broker.producer_state_hooks import ProducerStates
from storage.log.cleaner_txns import CleanedTransactions


def lso_not_held_by_open_transaction(monkeypatch) -> None:
    """The last stable offset is the high watermark: read_committed reads into open transactions."""
    monkeypatch.setattr(Partition, "last_stable_offset", property(lambda self: self.log.high_watermark))


def fetch_omits_aborted_transactions(monkeypatch) -> None:
    """A read_committed Fetch lists no aborted transactions, so consumers keep aborted records."""
    monkeypatch.setattr(ProducerStates, "aborted_transactions", lambda self, partition, start, end: [])


def abort_marker_written_as_commit(monkeypatch) -> None:
    """The coordinator writes a COMMIT marker for a transaction it aborts."""
    original = broker.txn_driver.write_markers

    async def write_markers(broker_, producer_id, producer_epoch, commit, *args, **kwargs):
        return await original(broker_, producer_id, producer_epoch, True, *args, **kwargs)

    monkeypatch.setattr(broker.txn_driver, "write_markers", write_markers)


def restored_producer_state_drops_open_transactions(monkeypatch) -> None:
    """Producer state rebuilt from the log (restart, new leader) forgets the transactions still open."""
    original = ProducerStateManager.rebuild

    def rebuild(self, entries):
        original(self, entries)
        for entry in self.producers.values():
            entry.current_txn_first_offset = -1
        self.ongoing.clear()

    monkeypatch.setattr(ProducerStateManager, "rebuild", rebuild)


def transaction_verification_skipped(monkeypatch) -> None:
    """KIP-890 part 1 is skipped: a transactional write is appended without asking the coordinator."""
    async def verify(broker_, partition, batch, transactional_id):
        return None

    monkeypatch.setattr(broker.handlers.produce, "_verify_in_transaction", verify)


def cleaner_ignores_aborted_transactions(monkeypatch) -> None:
    """The cleaner does not read the aborted transaction index: it keeps aborted records as
    committed ones, and drops each ABORT marker (and its index entry) as if its transaction
    had left nothing behind."""
    original = CleanedTransactions.__init__

    def init(self, aborted):
        original(self, [])

    monkeypatch.setattr(CleanedTransactions, "__init__", init)


def txn_index_rebuild_skipped(monkeypatch) -> None:
    """A lost or damaged aborted transaction index is not rebuilt: the producer state replays
    from its newest snapshot only, so aborts below it stay out of the index."""
    from storage.log.log import PartitionLog
    monkeypatch.setattr(PartitionLog, "txn_index_stale_from", property(lambda self: None))


def coordinator_timers_on_wall_clock(monkeypatch) -> None:
    """The coordinators keep their deadlines on the wall clock: a clock stepped forward and back
    holds a timer (the retry of a Complete* record, a timeout check) for as long as the step."""
    def now(self):
        wall_ms = self.env.wall_ms()
        return Now(monotonic_ms=wall_ms, wall_ms=wall_ms)

    def wake_time(self, deadline_ms):
        return self.env.now() + max(0, deadline_ms - self.env.wall_ms()) / 1000

    monkeypatch.setattr(CoordinatorDriver, "now", now)
    monkeypatch.setattr(CoordinatorDriver, "wake_time", wake_time)


TXN_MUTATIONS = {
    "lso_not_held_by_open_transaction": lso_not_held_by_open_transaction,
    "fetch_omits_aborted_transactions": fetch_omits_aborted_transactions,
    "abort_marker_written_as_commit": abort_marker_written_as_commit,
    "restored_producer_state_drops_open_transactions": restored_producer_state_drops_open_transactions,
    "transaction_verification_skipped": transaction_verification_skipped,
    "cleaner_ignores_aborted_transactions": cleaner_ignores_aborted_transactions,
    "txn_index_rebuild_skipped": txn_index_rebuild_skipped,
    "coordinator_timers_on_wall_clock": coordinator_timers_on_wall_clock,
}
