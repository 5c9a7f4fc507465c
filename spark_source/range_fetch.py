"""Fetches for the range reader: record batches straight from a partition's leader, undecoded.

A `RangeFetcher` lives in a client's trio loop and sends one-partition Fetch requests
to the leader its `Cluster` knows, answering with the record batches as they came
(`spark_source.arrow_batches` decodes them column-wise, with no Python object per
record). When the caller says how far it reads (`until`), the Fetch of what follows an
answer is started before the answer is returned: it travels while the caller decodes; a
caller that reads several ranges starts the next range's first Fetch the same way
(`fetch_ahead`).

A moved leader, a lost connection or a retriable error answers "nothing yet" after a
back-off and a metadata refresh (the range reader bounds how long it waits); a position
the log does not hold answers `out_of_range`; other errors raise.
"""
from __future__ import annotations

from dataclasses import dataclass

import trio

from raftkafka.client.errors import BrokerResponseError, KafkaConnectionError, KafkaError, KafkaTimeoutError, \
    error_for
from raftkafka.client.fetcher import FETCH_BY_NAME_MAX_VERSION
from wire.batch_header import iter_batches
from wire.error_codes import ErrorCode
from wire.protocol import ApiKey, FetchRequest

__all__ = ["RangeFetcher", "RawFetched"]


@dataclass
class RawFetched:
    """One partition's Fetch answer, undecoded: `records` holds the record batches from the
    offset asked for (the last may be partial); `aborted` the answer's aborted transactions
    as (producer id, first offset) under read_committed, else None. `out_of_range` as in
    `Fetched`. Empty `records` and not out of range: nothing yet (or a leader moved)."""

    records: bytes
    aborted: list[tuple[int, int]] | None = None
    out_of_range: bool = False


class RangeFetcher:
    def __init__(self, *, max_bytes: int, partition_max_bytes: int, min_bytes: int = 1, read_committed: bool = False,
                 retry_backoff_s: float = 0.1):
        self.max_bytes, self.partition_max_bytes, self.min_bytes = max_bytes, partition_max_bytes, min_bytes
        self.read_committed, self.retry_backoff_s = read_committed, retry_backoff_s
        self._ahead: dict[tuple[str, int], _Ahead] = {}

    async def fetch(self, cluster, tp, offset: int, max_wait_s: float, until: int | None) -> RawFetched:
        """The answer for `offset` (the one fetched ahead, if it was that offset), and the Fetch of
        what follows it started before returning, so it travels while the caller decodes."""
        ahead = self._ahead.pop(tp, None)
        if ahead is not None and ahead.offset == offset:
            result = await ahead.result()
        else:
            result = await self._fetch_once(cluster, tp, offset, max_wait_s)
        if until is not None and result.records and not result.out_of_range:
            follows = max((h.next_offset for _, h in iter_batches(result.records, validate=False)), default=offset)
            if offset < follows < until:
                self.fetch_ahead(cluster, tp, follows, max_wait_s)
        return result

    def fetch_ahead(self, cluster, tp, offset: int, max_wait_s: float) -> None:
        """Start the Fetch of `offset` now, for a `fetch` of it later (what follows an answer, or
        a task's next range); nothing if one of `tp` is already under way."""
        if tp not in self._ahead:
            self._ahead[tp] = ahead = _Ahead(offset)
            trio.lowlevel.spawn_system_task(ahead.run, self._fetch_once, cluster, tp, offset, max_wait_s)

    async def _fetch_once(self, cluster, tp, offset: int, max_wait_s: float) -> RawFetched:
        try:
            await cluster.topic(tp[0])
            leader = cluster.leader(*tp)
            if leader < 0:
                raise KafkaConnectionError(f"{tp[0]}-{tp[1]} has no leader now")
            request = FetchRequest(
                replica_id=-1, max_wait_ms=int(max_wait_s * 1000), min_bytes=self.min_bytes, max_bytes=self.max_bytes,
                isolation_level=int(self.read_committed),
                topics=[FetchRequest.FetchTopic(topic=tp[0], partitions=[FetchRequest.FetchPartition(
                    partition=tp[1], current_leader_epoch=cluster.leader_epoch(*tp), fetch_offset=offset,
                    partition_max_bytes=self.partition_max_bytes)])])
            connection = await cluster.connection(leader)
            response = await connection.request(request, timeout=max_wait_s,
                                                version=connection.version_for(ApiKey.FETCH, FETCH_BY_NAME_MAX_VERSION))
            code = ErrorCode.of(response.error_code)
            part = next((p for t in response.responses for p in t.partitions
                         if t.topic == tp[0] and p.partition_index == tp[1]), None)
            if code == ErrorCode.NONE and part is not None:
                code = ErrorCode.of(part.error_code)
            if code == ErrorCode.NONE and part is not None:
                aborted = None if not self.read_committed else \
                    [(a.producer_id, a.first_offset) for a in part.aborted_transactions or ()]
                return RawFetched(bytes(part.records or b""), aborted)
            if code == ErrorCode.OFFSET_OUT_OF_RANGE:
                return RawFetched(b"", None, True)
            if not (code.invalid_metadata or code.retriable or part is None):
                raise error_for(code, context=f"Fetch {tp[0]}-{tp[1]}")
        except (KafkaConnectionError, KafkaTimeoutError):
            pass  # a leader moved or went away: look again below, the caller asks again
        except BrokerResponseError as exc:
            if not (ErrorCode.of(exc.code).retriable or exc.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                raise
        await trio.sleep(self.retry_backoff_s)
        try:
            await cluster.refresh()
        except KafkaError:
            pass  # the next attempt tries again; the caller bounds how long
        return RawFetched(b"")


class _Ahead:
    """A Fetch started before its caller asks for it (a task of the admin's loop)."""

    def __init__(self, offset: int):
        self.offset = offset
        self._done = trio.Event()
        self._outcome: RawFetched | Exception | None = None

    async def run(self, fetch, *args) -> None:
        try:
            self._outcome = await fetch(*args)
        except Exception as exc:  # handed to whoever takes the answer
            self._outcome = exc
        finally:
            self._done.set()

    async def result(self) -> RawFetched:
        await self._done.wait()
        if isinstance(self._outcome, Exception):
            raise self._outcome
        return self._outcome
