"""Initial offsets of a streaming query, stored in the cluster so they survive restarts.

Spark asks a source for `initialOffset()` whenever the first micro-batch has
not committed yet, including after a crash that happened between writing
`offsets/0` and `commits/0`; the replayed batch 0 reads [initialOffset, end
of batch 0). Spark's Kafka source keeps its first answer in the checkpoint
(`sources/0/0`), but a Python source is given no checkpoint path. So for a
start that would resolve differently later (`latest`, timestamps) the first
answer is kept in the cluster instead:

- topic `_raftkafka-spark-initial-offsets`, one partition, compacted;
- key = the query's `sourceId` option, value = JSON {"source": what the
  offsets were resolved for (subscription and starting spec), "offsets": {...}}.

`initial_offsets()` returns the first record stored for the id, resolving and
storing only when there is none. The record is written once per id and read
back, so two processes starting the same id at once (a misuse) still agree
while compaction has not run. A stored record for a different subscription or
starting spec is an error naming `sourceId`: a new query needs a new id.
"""
from __future__ import annotations

import json
from typing import Callable

from spark_source.cluster_io import EARLIEST_TS, LATEST_TS, LogClient, scan
from spark_source.offsets import PartitionOffsets, from_json_dict, to_json_dict, to_json_text
from spark_source.options import (
    Earliest,
    GlobalTimestamp,
    InvalidOptionError,
    Latest,
    OffsetSpec,
    SpecificOffsets,
    SpecificTimestamps,
    Subscription,
)
from wire.records import SimpleRecord

__all__ = ["STORE_TOPIC", "initial_offsets", "lookup", "describe_source"]

STORE_TOPIC = "_raftkafka-spark-initial-offsets"
_TP = (STORE_TOPIC, 0)


def describe_source(subscription: Subscription, starting: OffsetSpec) -> str:
    """Canonical text of what initial offsets are resolved for (JSON option order does not matter)."""
    if isinstance(starting, Earliest):
        start = "earliest"
    elif isinstance(starting, Latest):
        start = "latest"
    elif isinstance(starting, SpecificOffsets):
        start = "offsets " + to_json_text(starting.offsets)
    elif isinstance(starting, GlobalTimestamp):
        start = f"timestamp {starting.timestamp_ms} ({starting.strategy})"
    elif isinstance(starting, SpecificTimestamps):
        start = f"timestamps {to_json_text(starting.timestamps)} ({starting.strategy})"
    else:
        raise TypeError(f"not an offset spec: {starting!r}")
    return f"{subscription.describe()} starting at {start}"


def lookup(client: LogClient, source_id: str) -> dict | None:
    """The first stored entry for `source_id`, or None."""
    start = client.list_offsets([_TP], EARLIEST_TS)[_TP]
    end = client.list_offsets([_TP], LATEST_TS)[_TP]
    key = source_id.encode()
    for record in scan(client, _TP, start, end):
        if record.key == key and record.value is not None:
            return json.loads(record.value)
    return None


def initial_offsets(client: LogClient, source_id: str, source: str,
                    resolve: Callable[[], PartitionOffsets], timestamp_ms: int) -> PartitionOffsets:
    """The offsets stored for `source_id`; the first call resolves and stores them.

    `source` describes what they were resolved for (e.g. "subscribe=a,b startingOffsets=latest").
    """
    client.ensure_topic(STORE_TOPIC, 1, {"cleanup.policy": "compact"})
    entry = lookup(client, source_id)
    if entry is None:
        value = json.dumps({"source": source, "offsets": to_json_dict(resolve())}, sort_keys=True,
                           separators=(",", ":")).encode()
        client.produce([(_TP, SimpleRecord(source_id.encode(), value, (), timestamp_ms))])
        entry = lookup(client, source_id)
        if entry is None:
            raise RuntimeError(f"the initial offsets stored for sourceId '{source_id}' cannot be read back")
    if entry["source"] != source:
        raise InvalidOptionError(f"option 'sourceId': '{source_id}' already names a query that started with "
                                 f"{entry['source']}, not {source}; use a new sourceId for a new query")
    return from_json_dict(entry["offsets"])
