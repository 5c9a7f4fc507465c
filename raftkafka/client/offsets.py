"""ListOffsets against partition leaders: earliest (-2), latest (-1) or by timestamp."""
from __future__ import annotations

from raftkafka.client.cluster import Cluster
from raftkafka.client.errors import KafkaError, KafkaTimeoutError, error_for
from wire.protocol import ListOffsetsRequest

__all__ = ["list_offsets", "EARLIEST", "LATEST"]

EARLIEST = -2
LATEST = -1


async def list_offsets(cluster: Cluster, targets: dict[tuple[str, int], int], *,
                       isolation_level: int = 0) -> dict[tuple[str, int], tuple[int, int]]:
    """{tp: timestamp or EARLIEST/LATEST} → {tp: (offset, timestamp)}; offset -1 when no record
    is that recent. Retries leadership changes until the request timeout."""
    cluster.add_topics({t for t, _ in targets})
    results: dict[tuple[str, int], tuple[int, int]] = {}
    pending = dict(targets)
    deadline = cluster.env.now() + cluster.request_timeout
    while pending:
        if any(cluster.leader(*tp) < 0 for tp in pending) or cluster.stale():
            await cluster.refresh()
        by_node: dict[int, dict[str, list]] = {}
        for (topic, partition), ts in sorted(pending.items()):
            leader = cluster.leader(topic, partition)
            if leader < 0:
                continue
            by_node.setdefault(leader, {}).setdefault(topic, []).append(
                ListOffsetsRequest.ListOffsetsPartition(partition_index=partition, timestamp=ts))
        retry = False
        for node, topics in sorted(by_node.items()):
            request = ListOffsetsRequest(replica_id=-1, isolation_level=isolation_level, topics=[
                ListOffsetsRequest.ListOffsetsTopic(name=t, partitions=ps) for t, ps in sorted(topics.items())])
            try:
                response = await cluster.send(node, request)
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                retry = True
                continue
            for t in response.topics:
                for p in t.partitions:
                    tp = (t.name, p.partition_index)
                    if tp not in pending:
                        continue
                    if p.error_code == 0:
                        results[tp] = (p.offset, p.timestamp)
                        del pending[tp]
                    elif error_for(p.error_code).retriable:
                        retry = True
                    else:
                        raise error_for(p.error_code, context=f"ListOffsets {t.name}-{p.partition_index}")
        if pending:
            if cluster.env.now() >= deadline:
                raise KafkaTimeoutError(f"ListOffsets: no answer for {sorted(pending)}")
            if retry or not by_node:
                await cluster.env.sleep(cluster.retry_backoff)
                await cluster.refresh()
    return results
