"""A broker's record of its previous incarnation, so that a restart which lost nothing
registers as clean (KIP-966's previous_broker_epoch).

The controller takes a broker that re-registers without the epoch of its last registration
out of every ISR and ELR: its log may have lost unflushed records, and it must not be elected
over a replica that still holds them. Kafka writes the broker epoch into the clean-shutdown
file. We record it, with the boot id of the machine, in `.broker_incarnation` in every log
dir each time the controller registers us, and claim it at the next start when

- every log dir was shut down cleanly (the logs were flushed and closed), or
- the machine has not restarted since (same boot id): a process that dies (kill -9, a failed
  disk write) leaves what it wrote in the page cache, so its logs hold every byte it wrote.
  Only a power loss or an OS crash drops unflushed data, the case KIP-966 guards against.

Otherwise, or when the file system cannot tell its boot id, the restart is unclean (-1).

A clean start writes, before it registers, the epoch it claims together with its incarnation id
(`registering`). The controller may accept that registration (a new epoch) and the process die
before the answer arrives: the record still names the older epoch, which the controller would
now take for an unclean claim, though nothing was lost. The next clean start on the same boot
registers as that incarnation instead (`pending_incarnation`); the controller answers a known
incarnation with the epoch it gave it. Simulation seed 3317 (10 s): a broker that was the last
eligible leader replica of three partitions came back this way as unclean, and they stayed
leaderless.

Log recovery that cuts whole batches erases the record on the spot (`forget_incarnation`,
called from the log manager before recovery awaits anything). Checking the cut only after
recovery was too late: bit rot cut a log, that restart (rightly unclean) was killed before it
could register, and the next restart, on the same boot and finding the already-cut log intact,
claimed the old epoch and was elected from the ELR without the records it had lost
(simulation seed 79 with --faults all, 30 s).

For the same reason an unclean start erases the record before it registers
(`claim_previous_epoch`): a power loss, then a start that never reached a controller and was
stopped cleanly, left the record of the epoch before the power loss next to a clean-shutdown
marker; the next start claimed that epoch, stayed in the ISRs and ELRs with the log it had lost,
and was elected (simulation seed 517 with --faults all, 10 s).
"""
from __future__ import annotations

import json
import posixpath
import uuid
from typing import Sequence

from storage.env import FileSystem, write_file_atomic

__all__ = ["INCARNATION_FILE", "boot_id", "record_incarnation", "previous_broker_epoch", "claim_previous_epoch",
           "pending_incarnation", "forget_incarnation"]

INCARNATION_FILE = ".broker_incarnation"


def boot_id(fs: FileSystem) -> str | None:
    """The id of the boot the page cache under `fs` belongs to (None: cannot tell)."""
    get = getattr(fs, "boot_id", None)  # not every FileSystem knows (test doubles)
    return None if get is None else get()


async def record_incarnation(fs: FileSystem, data_dirs: Sequence[str], broker_epoch: int, *,
                             registering: uuid.UUID | None = None) -> None:
    """Remember the epoch the controller just gave this incarnation (fsynced); or, with
    `registering`, the epoch a clean start claims while that incarnation registers."""
    record = {"version": 0, "broker_epoch": broker_epoch, "boot_id": boot_id(fs)}
    if registering is not None:
        record["registering"] = str(registering)
    body = json.dumps(record, sort_keys=True).encode()
    for data_dir in sorted(data_dirs):
        await write_file_atomic(fs, posixpath.join(data_dir, INCARNATION_FILE), body)


def forget_incarnation(fs: FileSystem, data_dirs: Sequence[str]) -> None:
    """Erase the record (no await: a crash right after cannot leave it claimable). Not fsynced,
    and need not be: a start on another boot trusts the record only after a clean shutdown,
    whose fsync of each data dir (for its marker) makes the erasure durable too."""
    for data_dir in sorted(data_dirs):
        path = posixpath.join(data_dir, INCARNATION_FILE)
        if fs.exists(path):
            fs.remove(path)


def previous_broker_epoch(fs: FileSystem, data_dirs: Sequence[str], *, clean_shutdown: bool) -> int:
    """The epoch to register with as a clean restart, or -1 (unclean, or nothing recorded)."""
    records = [_read(fs, posixpath.join(d, INCARNATION_FILE)) for d in sorted(data_dirs)]
    if not records or any(r is None for r in records):
        return -1
    epochs = {r["broker_epoch"] for r in records}
    if len(epochs) != 1:
        return -1
    if clean_shutdown:
        return epochs.pop()
    current = boot_id(fs)
    if current is not None and all(r["boot_id"] == current for r in records):
        return epochs.pop()
    return -1


def claim_previous_epoch(fs: FileSystem, data_dirs: Sequence[str], *, clean_shutdown: bool,
                         lost_batches: bool = False) -> int:
    """The epoch a starting broker registers with: `previous_broker_epoch`, or -1 if recovery
    cut whole batches. An unclean start (-1) erases the record at once: the records it may have
    lost are known to the controller only once it registers as unclean, so no later start may
    claim the old epoch, not even after a clean shutdown of this incarnation before it
    registered (as Kafka's clean-shutdown file holds the epoch of the incarnation that wrote
    it, -1 if it never registered)."""
    claim = -1 if lost_batches else previous_broker_epoch(fs, data_dirs, clean_shutdown=clean_shutdown)
    if claim < 0:
        forget_incarnation(fs, data_dirs)
    return claim


def pending_incarnation(fs: FileSystem, data_dirs: Sequence[str]) -> uuid.UUID | None:
    """The incarnation whose registration may have been accepted unanswered, if every record
    names the same one. Only meaningful with a clean claim (previous_broker_epoch >= 0)."""
    records = [_read(fs, posixpath.join(d, INCARNATION_FILE)) for d in sorted(data_dirs)]
    if not records or any(r is None for r in records):
        return None
    pending = {r.get("registering") for r in records}
    if len(pending) != 1:
        return None
    text = pending.pop()
    return None if text is None else uuid.UUID(text)


def _read(fs: FileSystem, path: str) -> dict | None:
    """The record at `path`; None if missing or not one we wrote (then we claim nothing)."""
    if not fs.exists(path):
        return None
    f = fs.open(path)
    try:
        data = f.read(0, f.size())
    finally:
        f.close()
    try:
        record = json.loads(data)
    except (UnicodeDecodeError, ValueError):
        return None
    if (not isinstance(record, dict) or record.get("version") != 0
            or type(record.get("broker_epoch")) is not int or record["broker_epoch"] < 0
            or not isinstance(record.get("boot_id"), (str, type(None)))
            or not _is_uuid_or_absent(record.get("registering"))):
        return None
    return record


def _is_uuid_or_absent(value) -> bool:
    if value is None:
        return True
    if not isinstance(value, str):
        return False
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True
