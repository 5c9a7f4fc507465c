"""What a broker does when a log dir fails: halt, as Kafka does in KRaft mode without JBOD.

The storage layer reports every I/O error in a data dir to the log manager's
LogDirFailureChannel (storage.log.log_dir_failure) and raises KafkaStorageError,
which the request paths answer with KAFKA_STORAGE_ERROR. Kafka's
LogDirFailureHandler then halts the broker (`Exit.halt(1)`: no controlled
shutdown, no flush, no clean-shutdown marker); the controller fences it once its
session times out and moves leadership; at the next start the logs recover.

`halt_on_log_dir_failure` is that handler, run as a task of the broker. When a
dir fails it first takes the dir's partitions offline (Kafka's
handleLogDirFailure: requests for them get KAFKA_STORAGE_ERROR, their fetchers
stop), gives the answers already computed a moment to reach their clients (so
they refresh metadata now instead of after a disconnect), then raises
`LogDirHalt`. The exception ends the node's run; `python -m raftkafka` prints
its one line and exits with status 1. The broker's shutdown path sees the
failure in the channel and writes nothing to the logs.
"""
from __future__ import annotations

import logging

from process.halt import DirectoryHalt
from storage.log.log_dir_failure import LogDirFailureChannel

__all__ = ["LogDirHalt", "halt_on_log_dir_failure", "HALT_GRACE_S"]

log = logging.getLogger(__name__)

# Long enough for a response already built to leave its connection task, short enough
# that nothing more of consequence happens on a broker whose disk failed.
HALT_GRACE_S = 0.1


class LogDirHalt(DirectoryHalt):
    """The broker halts because a log dir failed."""

    def __init__(self, log_dir: str, cause: OSError):
        super().__init__("log dir", log_dir, cause)


async def halt_on_log_dir_failure(env, failures: LogDirFailureChannel, replicas, *,
                                  grace_s: float = HALT_GRACE_S) -> None:
    """Wait for the first log-dir failure, take its partitions offline, then raise LogDirHalt."""
    await failures.failed.wait()
    for log_dir, error in list(failures.offline.items()):
        log.error("%s: its partitions are offline", error)
        replicas.handle_log_dir_failure(log_dir, str(error))
    await env.sleep(grace_s)
    log_dir, error = failures.first()
    halt = LogDirHalt(log_dir, error)
    log.critical("%s", halt)
    raise halt from error
