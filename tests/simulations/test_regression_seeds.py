"""Seeds on which the whole-cluster simulation once found a safety bug, kept as regressions.

- 40, 85, 100, 104: duplicates from the idempotent producer: a batch sent under a producer id
  the producer then abandoned was resent under the new one (raftkafka.client.producer).
- 19: a restarted broker that lost unflushed data acted on its stale metadata before its new
  registration: it shrank an ISR to itself under its previous incarnation's broker epoch and was
  followed (metadata.broker_lifecycle.AfterOwnRegistration).
- 18, 79: the last two ISR members die, one loses power; without eligible leader replicas and
  clean-restart claims the one that lost data was elected (metadata.incarnation_record, ELR on).
- 40 also: the final producer resent the same value after an unknown outcome (harness).
- 110: an ENOSPC from a disk_full fault surfaced after the fault ended (harness: NodeFailed).
- 269: a full disk during a restarting broker's log recovery was reported as a listener that
  cannot bind (a ConfigError, so NodeFailed) instead of the disk error it is.
- 308: a broker made leader stamped an epoch at its log end, appended nothing, then followed a
  leader that never had that epoch: reconciling to its own log end kept the stamp, so it asked
  about that epoch for ever and never caught up (storage.log truncate_to, replica fetcher).
- 79, 146 at 30 s: bit rot cut a broker's log; that restart (unclean) was killed before it
  could register, and the next one, on the same boot with the already-cut log, claimed the old
  clean epoch and was elected from the ELR (metadata.incarnation_record: the cut forgets the
  record on the spot, storage.log.recovery on_data_loss).
- 185 at 30 s: a broker paused while leadership moved on came back still leading at epoch 0 with
  a short log; a consumer that took its stale metadata fetched there, got OFFSET_OUT_OF_RANGE and
  reset to earliest (re-reading from 0). Metadata v7 leader epochs: the client keeps the newest
  and fences its Fetches with it (KIP-320, raftkafka.client.cluster).
- 2118: a follower elected leader of a __consumer_offsets partition (ISR itself alone, so its HW
  was stuck) replayed a timed-out commit past its HW and served it; the old leader, not yet
  told, then served the older offset (broker.group_driver loads only once the HW reaches the end).
"""
from __future__ import annotations

import pytest

from simulations.runner import SimOptions, run_simulation

SEEDS = [18, 19, 40, 79, 85, 100, 104, 110, 269, 308, 3317, 2118, 2882]


@pytest.mark.parametrize("seed", SEEDS)
def test_seed_that_once_failed_has_no_violations(seed):
    result = run_simulation(SimOptions(seed=seed, duration=10.0, faults="all"))
    assert result["violations"] == [], result["violations"]


# Seeds whose bug needs the default 30 s fault phase to show. 115: an isolated old leader, told
# FENCED_LEADER_EPOCH for an ISR expansion an earlier controller had committed, fell back to its
# stale ISR and acknowledged an acks=all write its successor never had (broker/partition.py).
LONG_SEEDS = [79, 115, 146, 185]


@pytest.mark.parametrize("seed", LONG_SEEDS)
def test_long_seed_that_once_failed_has_no_violations(seed):
    result = run_simulation(SimOptions(seed=seed, duration=30.0, faults="all"))
    assert result["violations"] == [], result["violations"]
