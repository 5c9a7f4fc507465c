"""Table tests for the pure HW math in raft/commit.py."""
import pytest

from raft.commit import majority_end_offset, next_high_watermark, quorum_size


@pytest.mark.parametrize(
    "offsets, expected",
    [
        ({1: 5}, 5),
        ({1: 5, 2: 3, 3: 0}, 3),
        ({1: 5, 2: -1, 3: -1}, 0),  # unknown followers count as nothing
        ({1: 9, 2: 7, 3: 7, 4: 1}, 7),  # 4 voters: 3 needed
        ({1: 9, 2: 8, 3: 2, 4: 1}, 2),
        ({1: 10, 2: 10, 3: 4, 4: 3, 5: 3}, 4),
    ],
)
def test_majority_end_offset(offsets, expected):
    assert majority_end_offset(offsets) == expected


@pytest.mark.parametrize(
    "offsets, epoch_start, current, expected",
    [
        ({1: 5, 2: 5, 3: 0}, 3, 0, 5),
        ({1: 5, 2: 3, 3: 0}, 3, 0, 0),  # majority not past the epoch start: no commit yet
        ({1: 5, 2: 4, 3: 0}, 3, 2, 4),
        ({1: 5, 2: 4, 3: 0}, 3, 6, 6),  # never goes back
    ],
)
def test_next_high_watermark(offsets, epoch_start, current, expected):
    assert next_high_watermark(offsets, epoch_start, current) == expected


def test_quorum_size_and_empty():
    assert [quorum_size(n) for n in (1, 2, 3, 4, 5)] == [1, 2, 2, 3, 3]
    with pytest.raises(ValueError):
        majority_end_offset({})
