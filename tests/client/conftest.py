import pytest
import trio
import trio.testing


@pytest.fixture
def autojump_clock():
    # Sleeps (linger, backoff, long-poll) cost no wall time; ordering stays causal.
    return trio.testing.MockClock(autojump_threshold=0)
