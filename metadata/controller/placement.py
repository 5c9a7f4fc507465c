"""Replica placement for new partitions: rack-aware round robin (Kafka's classic assigner).

Brokers are ordered so that racks alternate; partition p's first replica (its preferred
leader) is broker (p + start) mod n, so leaders spread evenly; later replicas follow at a
shift that grows every n partitions, skipping brokers whose rack already holds a replica
until every rack has one. Deterministic: the start comes from the caller (or an rng).
"""
from __future__ import annotations

import random
from typing import Mapping

from metadata.errors import ApiError
from wire.error_codes import ErrorCode

__all__ = ["place_replicas", "rack_alternated"]


def rack_alternated(racks: Mapping[int, str | None]) -> list[int]:
    """Broker ids interleaved across racks: r1b1, r2b1, r3b1, r1b2, ..."""
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(racks):
        by_rack.setdefault(racks[broker] or "", []).append(broker)
    columns = [by_rack[r] for r in sorted(by_rack)]
    out = []
    for i in range(max((len(c) for c in columns), default=0)):
        out += [c[i] for c in columns if i < len(c)]
    return out


def place_replicas(racks: Mapping[int, str | None], num_partitions: int,
                   replication_factor: int, *, start_partition: int = 0,
                   start_index: int | None = None,
                   rng: random.Random | None = None) -> list[tuple[int, ...]]:
    """Replica lists for partitions start_partition .. start_partition+num_partitions-1.

    `racks` maps each eligible (active) broker to its rack (None = no rack). The start
    offset is `start_index`, else drawn from `rng`, else 0.
    """
    n = len(racks)
    if replication_factor <= 0:
        raise ApiError(ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be > 0")
    if num_partitions <= 0:
        raise ApiError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be > 0")
    if replication_factor > n:
        raise ApiError(ErrorCode.INVALID_REPLICATION_FACTOR,
                       f"Unable to replicate the partition {replication_factor} time(s): "
                       f"The target replication factor of {replication_factor} cannot be "
                       f"reached because only {n} broker(s) are registered.")
    brokers = rack_alternated(racks)
    rack_of = {b: racks[b] or "" for b in brokers}
    num_racks = len(set(rack_of.values()))
    if start_index is None:
        start_index = rng.randrange(n) if rng is not None else 0
    shift = start_index
    out = []
    for p in range(start_partition, start_partition + num_partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start_index) % n
        replicas = [brokers[first]]
        used_racks, used = {rack_of[brokers[first]]}, {brokers[first]}
        k = 0
        while len(replicas) < replication_factor:
            broker = brokers[_replica_index(first, shift * num_racks, k, n)]
            k += 1
            # another rack first; once every rack holds a replica, any unused broker
            rack_ok = rack_of[broker] not in used_racks or len(used_racks) == num_racks
            if rack_ok and broker not in used:
                replicas.append(broker)
                used.add(broker)
                used_racks.add(rack_of[broker])
        out.append(tuple(replicas))
    return out


def _replica_index(first: int, shift: int, k: int, n: int) -> int:
    if n == 1:
        return first
    return (first + 1 + (shift + k) % (n - 1)) % n
