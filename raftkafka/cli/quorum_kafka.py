"""`quorum --bootstrap-server H:P describe --status|--replication`: kafka-metadata-quorum's output
from DescribeQuorum on the Kafka port (raftkafka.client.operations.describe_quorum).

Each replica shows its directory id (KIP-853) as Kafka's base64; an unknown one is the zero
UUID's ("AAAAAAAAAAAAAAAAAAAAAA"), as Kafka prints Uuid.ZERO_UUID.
"""
from __future__ import annotations

import base64
import json

from broker.handlers.describe_quorum import quorum_partition
from raftkafka.cli.common import open_admin, run_client
from raftkafka.client.operations import describe_quorum
from storage.env import RealEnv

__all__ = ["describe_over_kafka", "print_kafka_format", "status_lines", "replication_rows"]


def describe_over_kafka(args) -> int:
    args.bootstrap = args.bootstrap_server
    return run_client(_describe, args)


def print_kafka_format(args, reply) -> int:
    """The controllers' own answer (raft.messages.DescribeQuorumResponse) in the same shape."""
    partition = quorum_partition(reply, RealEnv().wall_ms())
    if args.status:
        print("\n".join(status_lines(reply.cluster_id, partition, [])))
    else:
        print(_table(replication_rows(partition)))
    return 0


async def _describe(args) -> int:
    async with open_admin(args) as admin:
        partition, nodes = await describe_quorum(admin.cluster)
        cluster_id = (await admin.describe_cluster()).cluster_id if args.status else None
    if args.status:
        print("\n".join(status_lines(cluster_id, partition, nodes)))
    else:
        print(_table(replication_rows(partition)))
    return 0


def _directory_id(replica) -> str:
    return base64.urlsafe_b64encode(replica.replica_directory_id.bytes).decode().rstrip("=")


def status_lines(cluster_id: str, partition, nodes) -> list[str]:
    leader = next((v for v in partition.current_voters if v.replica_id == partition.leader_id), None)
    followers = [v for v in partition.current_voters if v.replica_id != partition.leader_id]
    max_lag, lag_time = 0, 0
    if leader is not None and followers:
        laggard = min(followers, key=lambda v: v.log_end_offset)
        max_lag = max(0, leader.log_end_offset - laggard.log_end_offset)
        lag_time = (leader.last_caught_up_timestamp - laggard.last_caught_up_timestamp
                    if leader.last_caught_up_timestamp >= 0 and laggard.last_caught_up_timestamp >= 0 else -1)
    endpoints = {n.node_id: [f"{l.name}://{l.host}:{l.port}" for l in n.listeners] for n in nodes}

    def voter(v) -> str:
        return json.dumps({"id": v.replica_id, "directoryId": _directory_id(v),
                           "endpoints": endpoints.get(v.replica_id, [])})

    def observer(o) -> str:
        return json.dumps({"id": o.replica_id, "directoryId": _directory_id(o)})

    return [
        f"ClusterId:              {cluster_id}",
        f"LeaderId:               {partition.leader_id}",
        f"LeaderEpoch:            {partition.leader_epoch}",
        f"HighWatermark:          {partition.high_watermark}",
        f"MaxFollowerLag:         {max_lag}",
        f"MaxFollowerLagTimeMs:   {lag_time}",
        f"CurrentVoters:          [{', '.join(voter(v) for v in partition.current_voters)}]",
        f"CurrentObservers:       [{', '.join(observer(o) for o in partition.observers)}]",
    ]


def replication_rows(partition) -> list[list]:
    leader_end = next((v.log_end_offset for v in partition.current_voters
                       if v.replica_id == partition.leader_id), -1)
    rows = [["NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp",
             "Status"]]
    # (rank, replica, Status column): the leader first, then followers, then observers
    members = ([(0, v, "Leader") if v.replica_id == partition.leader_id else (1, v, "Follower")
                for v in partition.current_voters] + [(2, o, "Observer") for o in partition.observers])
    for _, r, status in sorted(members, key=lambda m: (m[0], m[1].replica_id)):
        lag = max(0, leader_end - r.log_end_offset) if r.log_end_offset >= 0 and leader_end >= 0 else -1
        rows.append([r.replica_id, _directory_id(r), r.log_end_offset, lag, r.last_fetch_timestamp,
                     r.last_caught_up_timestamp, status])
    return rows


def _table(rows: list[list]) -> str:
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows)
