"""RaftLog invariants that the transcripts and the random cluster exercise only indirectly."""
import pytest

from raft.entry import Entry
from raft.errors import LogInvariantError
from raft.log import RaftLog


def _entries(*epochs):
    return [Entry(i, epoch, b"x") for i, epoch in enumerate(epochs)]


def test_entries_behind_a_snapshot_may_have_older_epochs():
    # A leader change, then a snapshot whose cleaning has not removed the old entries yet:
    # a restart must load this log.
    log = RaftLog(_entries(1, 1, 2, 2), snapshot_id=(3, 2))
    assert (log.start_offset, log.end_offset, log.last_epoch) == (0, 4, 2)
    assert log.end_offset_for_epoch(1) == (1, 2)


def test_epochs_must_not_go_back_after_the_snapshot_end():
    log = RaftLog([], snapshot_id=(3, 2))
    with pytest.raises(LogInvariantError):
        log.append([Entry(3, 1, b"x")])
    log.append([Entry(3, 2, b"x"), Entry(4, 3, b"y")])
    assert log.end_offset == 5 and log.epoch_at(4) == 3


def test_inconsistent_tail_is_dropped_in_favour_of_the_snapshot():
    # The entry at snapshot end - 1 has another epoch than the snapshot: the snapshot wins.
    log = RaftLog(_entries(1, 1, 1), snapshot_id=(3, 2))
    assert log.entries == [] and log.start_offset == 3 and log.last_epoch == 2


def test_offsets_must_be_contiguous():
    log = RaftLog(_entries(1, 1))
    with pytest.raises(LogInvariantError):
        log.append([Entry(5, 1, b"x")])
