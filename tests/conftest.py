"""How the suite shares out over pytest-xdist workers (`-n 2`, the README's test command).

Tests that start node processes, listen on ports or run Spark stay together in one worker,
one at a time, as they were written to run: two clusters at once would compete for the same
two cores and ports. The rest is in-process (the simulation on its own simulated network, the
codecs), CPU-bound, and goes to whichever worker is free. Without xdist this changes nothing.
"""
from __future__ import annotations

IN_PROCESS = {"simulations", "wire"}  # tests/<these>/: no ports, no node processes, no Spark
TOGETHER = "real-processes"


def scheduling_unit(nodeid: str) -> str:
    """What xdist hands to one worker as a whole: a test of an in-process directory alone,
    every other test in the one unit TOGETHER (run in collection order)."""
    parts = nodeid.split("/", 2)  # tests/<directory or file>/...
    return nodeid if len(parts) == 3 and parts[1] in IN_PROCESS else TOGETHER


def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class InProcessSharedOut(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scheduling_unit(nodeid)

    return InProcessSharedOut(config, log)
