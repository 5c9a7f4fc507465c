"""Where the nemesis lets disk corruption land, and why there.

The rule (TigerBeetle's fault atlas, FoundationDB's `canKillProcesses`): inject only faults the
design promises to survive, so that every violation the checkers report is a bug. Each region
below is one a correct Kafka/KRaft system survives; the comments say what must catch it.

read_corruption (transient, data at rest intact)
    Lands on the bytes a broker *serves* from its partition segment files (`send_to`, i.e.
    sendfile: Fetch answers to followers and consumers), inside the part of a batch its CRC-32C
    covers (the CRC field itself and attributes..end). Every receiver checks that CRC before
    using a batch: a follower refuses to append it and fetches again, a consumer reports a
    corrupt fetch and fetches again. A flip there is always caught and costs a retry. The first
    17 bytes (baseOffset, batchLength, partitionLeaderEpoch, magic) are outside the CRC because
    the leader rewrites them; no Kafka reader can tell a flipped baseOffset from a real one
    (simulation seed 1 with `--faults read_corruption` showed a consumer jump to offset 32773),
    so Kafka trusts the device for them and so do we.
    Not on the reads a node makes of its own files: a flip while recovery scans a segment or the
    Raft log is indistinguishable from damage at rest, so recovery truncates there, and that is
    bit rot (below), with its budget. Not on quorum-state, meta.properties, checkpoints, index
    files: their formats (Kafka's too) carry no checksum, and Kafka relies on the device for them.

bitrot (at rest, then the node dies)
    Lands in the last segment of one partition log on one broker, inside the CRC-checked part of
    one batch (as for read_corruption: a rotten baseOffset or partitionLeaderEpoch passes every
    check Kafka's recovery makes, too), and the broker is killed at once. The
    last segment is always scanned by recovery after an unclean stop (storage.log.recovery), so
    recovery finds the first CRC-invalid batch and truncates there: the broker loses records it
    may have acknowledged, exactly like a broker that lost power. It shares the power-loss budget
    (acks=all survives min.insync.replicas - 1 such losses), and the restart must register as
    unclean (KIP-966: out of every ELR), although the machine did not reboot. Older segments are
    left alone: below the recovery point nothing scans them before they are served, and Kafka
    (like us) then fails closed, serving batches every reader rejects, rather than healing.
    Never on the Raft metadata log or its snapshots: a voter whose log silently loses entries it
    acknowledged can make a committed entry vanish from a majority (Raft assumes stable storage).
    KRaft has no protocol-aware recovery (TigerBeetle's, which keeps such a voter from voting
    until it has repaired its log from the others), so neither do we; the metadata log's own CRC
    frames still make recovery cut the log at the damage rather than replay garbage.

misdirected_write (at rest, then the node dies)
    The bytes of one batch of a broker's newest partition segment were written at another
    sector-aligned place of the same segment (over whatever was there) and never reached their
    own, which holds zeros (a firmware or driver bug; TigerBeetle's "misdirected write"). Same
    region, kill and budget as bitrot, for the same reasons: recovery scans the last segment and
    cuts it at the first batch whose CRC or framing fails, so both the hole and the overwritten
    batch are found; the broker restarts as one that lost records (KIP-966: unclean). Never at
    the start of another batch: a whole batch there is valid, CRC and all, and only its
    baseOffset (outside the CRC, as for bit rot) says it is out of place, which Kafka's
    recovery does not check (simulation seed 1 with `--faults misdirected_write` showed the
    log serving offsets 0..n from another batch's copy).

sector-torn writes (`torn_write`: a power loss)
    The writeback of the unsynced bytes was under way, in no order, when the power went: each
    512-byte sector of every file's unsynced bytes independently reached the disk or not
    (storage.memfs `crash(sectors=True)`). Fsynced bytes are never touched, so any file and any
    node may take it: what was acknowledged after an fsync survives; past it, the Raft log and
    the partition segments see holes and stale sectors that their recovery must cut away, and
    small files are replaced only by fsynced renames. A broker's unsynced segment bytes are
    acknowledged records, so on a broker it spends the power-loss budget.

fsync_error (EIO while armed, lost writeback: see storage.memfs) may hit any file of any node:
the node must not acknowledge what the failed fsync covered and must stop trusting the disk.
"""
from __future__ import annotations

import posixpath
import random
import struct

from raft.node_storage import METADATA_DIR
from simulations.cluster import DATA_DIR
from storage.memfs import SECTOR, MemFileSystem
from wire.batch_header import CRC_START, HEADER_SIZE, LOG_OVERHEAD

__all__ = ["READ_CORRUPTION_SCOPE", "crc_covered_bit", "rot_region", "misdirect_region"]

SEGMENT_SUFFIX = ".log"
_CRC_FIELD = CRC_START - 4  # the stored CRC-32C: a flip there fails the check too


def _is_partition_segment(path: str) -> bool:
    parent = posixpath.basename(posixpath.dirname(path))
    return path.endswith(SEGMENT_SUFFIX) and parent != METADATA_DIR


READ_CORRUPTION_SCOPE = _is_partition_segment


def _crc_covered_regions(data: bytes) -> list[tuple[int, int]]:
    """[start, end) of the CRC-checked part of each whole RecordBatch in `data`, which
    starts at a batch boundary (as a segment file and a Fetch answer's records do)."""
    regions = []
    pos = 0
    while pos + HEADER_SIZE <= len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        end = pos + LOG_OVERHEAD + length
        if length < HEADER_SIZE - LOG_OVERHEAD or end > len(data):
            break
        regions.append((pos + _CRC_FIELD, end))
        pos = end
    return regions


def crc_covered_bit(data: bytes, rng: random.Random) -> int | None:
    """A random bit inside the CRC-checked part of a random whole batch in `data`; None if none."""
    regions = _crc_covered_regions(data)
    if not regions:
        return None
    start, end = rng.choice(regions)
    return rng.randrange(start * 8, end * 8)


def _last_segments(disk: MemFileSystem, data_dir: str) -> list[str]:
    """The newest segment of every partition log that holds bytes."""
    candidates = []
    for name in disk.listdir(data_dir):
        directory = posixpath.join(data_dir, name)
        if name == METADATA_DIR or not disk.is_dir(directory):
            continue
        segments = sorted((f for f in disk.listdir(directory) if f.endswith(SEGMENT_SUFFIX)),
                          key=lambda f: int(f[: -len(SEGMENT_SUFFIX)]) if f[: -len(SEGMENT_SUFFIX)].isdigit() else -1)
        if segments and disk.file_size(posixpath.join(directory, segments[-1])) > 0:
            candidates.append(posixpath.join(directory, segments[-1]))
    return candidates


def _segment_batches(disk: MemFileSystem, rng: random.Random, data_dir: str) -> tuple[str, bytes] | None:
    """A random partition's newest segment: (path, bytes); None if there is none."""
    if not disk.is_dir(data_dir):
        return None
    candidates = _last_segments(disk, data_dir)
    if not candidates:
        return None
    path = rng.choice(candidates)
    f = disk.open(path)
    try:
        return path, f.read(0, f.size())
    finally:
        f.close()


def rot_region(disk: MemFileSystem, rng: random.Random, data_dir: str = DATA_DIR) -> tuple[str, int, int] | None:
    """(path, offset, length): the CRC-checked bytes of one batch in the last segment of a random
    partition log (whose last segment holds a batch); None if there is none."""
    found = _segment_batches(disk, rng, data_dir)
    regions = _crc_covered_regions(found[1]) if found else []
    if not regions:
        return None
    start, end = rng.choice(regions)
    return found[0], start, end - start


def misdirect_region(disk: MemFileSystem, rng: random.Random,
                     data_dir: str = DATA_DIR) -> tuple[str, int, int, int] | None:
    """(path, offset, length, wrong_offset): one whole batch of the last segment of a random
    partition log and another sector-aligned place in that segment it can be written to
    instead; None if there is none."""
    found = _segment_batches(disk, rng, data_dir)
    if not found:
        return None
    path, data = found
    batches = [(start - _CRC_FIELD, end) for start, end in _crc_covered_regions(data)]
    if not batches:
        return None
    start, end = rng.choice(batches)
    length = end - start
    starts = {b for b, _ in batches}
    places = [p for p in range(0, len(data) - length + 1, SECTOR) if p not in starts]
    if not places:
        return None
    return path, start, length, rng.choice(places)
