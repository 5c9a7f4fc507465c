"""The producer: `send()` appends to the accumulator; a sender task ships batches.

    async with Producer(env, "host:9092", acks="all", linger_ms=5) as producer:
        future = await producer.send("topic", b"value", key=b"key")
        metadata = await future          # RecordMetadata(topic, partition, offset, timestamp)
        await producer.flush()

The sender groups ready batches by partition leader into one Produce request per
broker, and posts it to that broker's outbox: one task per broker sends its
requests in the order they were made (two in-flight batches of a partition cannot
overtake each other) without holding up the others; the connection's reader hands
each answer back. The producer retries retriable errors (NOT_LEADER_OR_FOLLOWER,
connection loss, ...) after `retry_backoff_ms`, refreshing metadata first when
the error says leadership moved, until `delivery_timeout_ms` has passed since
the record was appended. Idempotence (default with acks=all, as in Kafka 3+)
gets a producer id with InitProducerId and numbers each partition's batches;
a retried batch is resent byte for byte so the broker can drop duplicates. Up
to 5 batches of a partition are in flight, as the broker remembers the last 5
for deduplication; when one fails, those sent behind it come back
OUT_OF_ORDER_SEQUENCE_NUMBER and are resent after it, in sequence order.
With a `transactional_id` the producer's transactions are run by its
TransactionManager (transactional.py), which `send()` and every failed batch consult.
"""
from __future__ import annotations

import functools
from bisect import bisect_right
from collections import deque

import trio

from raftkafka.client.security import PLAINTEXT_CLIENT, ClientSecurity
from raftkafka.client.accumulator import (
    POSITION_BOUND,
    RECORD_OVERHEAD,
    ProducerBatch,
    RecordAccumulator,
    fixed_size,
    length_size,
    value_sizes,
    varint_size,
)
from raftkafka.client.cluster import Cluster
from raftkafka.client.errors import (
    ClientClosedError,
    KafkaError,
    KafkaTimeoutError,
    error_for,
)
from raftkafka.client.futures import BlockFuture, RecordFuture, RecordMetadata
from raftkafka.client.partitioner import Partitioner
from raftkafka.client.transactional import TransactionManager
from storage.env import Env
from wire.error_codes import ErrorCode
from wire.protocol import ApiKey, InitProducerIdRequest, ProduceRequest
from wire.records import Compression

__all__ = ["Producer", "RecordMetadata", "RecordFuture", "BlockFuture"]

_COMPRESSION = {"none": Compression.NONE, "gzip": Compression.GZIP, "snappy": Compression.SNAPPY,
                "lz4": Compression.LZ4, "zstd": Compression.ZSTD}
_ACKS = {"all": -1, "-1": -1, -1: -1, "1": 1, 1: 1, "0": 0, 0: 0}
# Batches of a partition the broker remembers for deduplication (Kafka's
# NUM_BATCHES_TO_RETAIN): an idempotent producer keeps at most this many in flight.
_MAX_IDEMPOTENT_IN_FLIGHT = 5


class Producer:
    def __init__(self, env: Env, bootstrap_servers, *, client_id: str = "raftkafka-producer",
                 acks="all", linger_ms: float = 5, batch_size: int = 16384, compression: str = "none",
                 compression_level: int | None = None, enable_idempotence: bool | None = None,
                 delivery_timeout_ms: float = 120_000, request_timeout_ms: float = 30_000,
                 retry_backoff_ms: float = 100, max_request_size: int = 1_048_576,
                 buffer_memory: int = 32 * 1024 * 1024, max_block_ms: float = 60_000,
                 partitioner: str = "murmur2_random", metadata_max_age_ms: float = 300_000,
                 allow_auto_topic_creation: bool = True, max_in_flight_requests_per_connection: int = 5,
                 security: ClientSecurity = PLAINTEXT_CLIENT, transactional_id: str | None = None,
                 transaction_timeout_ms: int = 60_000):
        if acks not in _ACKS:
            raise ValueError(f"acks must be all, -1, 0 or 1, not {acks!r}")
        if compression not in _COMPRESSION:
            raise ValueError(f"compression must be one of {sorted(_COMPRESSION)}, not {compression!r}")
        self.env = env
        self.acks = _ACKS[acks]
        if transactional_id is not None:  # transactions build on idempotence, as in Kafka
            if enable_idempotence is False:
                raise ValueError("transactional_id requires enable_idempotence")
            enable_idempotence = True
        explicit = enable_idempotence is not None
        if enable_idempotence is None:  # Kafka's default: on, unless the settings rule it out
            enable_idempotence = self.acks == -1 and max_in_flight_requests_per_connection <= _MAX_IDEMPOTENT_IN_FLIGHT
        if enable_idempotence and self.acks != -1:
            raise ValueError("enable_idempotence requires acks=all")
        if enable_idempotence and max_in_flight_requests_per_connection > _MAX_IDEMPOTENT_IN_FLIGHT:
            raise ValueError(f"enable_idempotence requires max_in_flight_requests_per_connection "
                             f"<= {_MAX_IDEMPOTENT_IN_FLIGHT}")
        self.idempotent = enable_idempotence
        # Idempotence by default quietly turns off against a broker without InitProducerId;
        # asked for explicitly, it is an error instead.
        self._idempotence_required = bool(enable_idempotence) and explicit
        self.compression = _COMPRESSION[compression]
        self.compression_level = compression_level
        self.delivery_timeout = delivery_timeout_ms / 1000
        self.request_timeout = request_timeout_ms / 1000
        self.retry_backoff = retry_backoff_ms / 1000
        self.max_request_size = max_request_size
        self._max_record_size = max_request_size - 61  # what fits beside a batch header
        self._max_fixed_size = self._max_record_size - POSITION_BOUND  # a record's `fixed_size` at most
        self.buffer_memory = buffer_memory
        self.max_block = max_block_ms / 1000
        self.partitioner = Partitioner(partitioner, env.rng)
        self._bootstrap = bootstrap_servers
        self._cluster_options = dict(client_id=client_id, request_timeout=self.request_timeout,
                                     retry_backoff=self.retry_backoff, metadata_max_age=metadata_max_age_ms / 1000,
                                     allow_auto_topic_creation=allow_auto_topic_creation, security=security)
        if max_in_flight_requests_per_connection < 1:
            raise ValueError("max_in_flight_requests_per_connection must be at least 1")
        self.accumulator = RecordAccumulator(batch_size, linger_ms / 1000, max_in_flight_requests_per_connection)
        self.cluster: Cluster | None = None
        self._routes: dict[str, _Route] = {}  # per topic: where its records go, while its metadata holds
        self._wall_ms = env.wall_ms
        self.producer_id = -1
        self.producer_epoch = -1
        self._sequences: dict[tuple[str, int], int] = {}  # the next batch's base sequence
        self._acknowledged: dict[tuple[str, int], int] = {}  # the sequence after the last one written
        self._in_flight = 0
        self._outboxes: dict[int, _Outbox] = {}  # per broker: Produce requests not yet sent
        self._flushing = 0
        self._wake = trio.Event()  # the idle sender waits on it
        self._sender_asleep_until: float | None = None  # inf: idle; a time: lingering; None: running
        self._sender_interrupt: trio.CancelScope | None = None
        self._progress = trio.Event()  # set whenever a batch finishes or buffer space frees up
        self._metadata_refresh_running = False
        self._nursery_manager = None
        self._nursery: trio.Nursery | None = None
        self._closed = False
        self.transactional_id = transactional_id
        self.transactions = (TransactionManager(self, transactional_id, transaction_timeout_ms)
                             if transactional_id is not None else None)

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> "Producer":
        self._nursery_manager = trio.open_nursery()
        self._nursery = await self._nursery_manager.__aenter__()
        self.cluster = Cluster(self.env, self._nursery, self._bootstrap, **self._cluster_options)
        self._nursery.start_soon(self._sender)
        return self

    async def __aexit__(self, exc_type, exc, tb) -> bool:
        try:
            if exc_type is None and not self._closed:
                await self.flush()
        finally:
            await self._shutdown()
            await self._nursery_manager.__aexit__(None, None, None)
        return False

    async def close(self, *, flush: bool = True) -> None:
        """Flush (unless told not to), then fail whatever is left and stop."""
        if flush and not self._closed:
            await self.flush()
        await self._shutdown()

    async def _shutdown(self) -> None:
        if self._closed:
            return
        self._closed = True
        unsent = self.accumulator.drop_all()
        for _, outbox in sorted(self._outboxes.items()):
            while outbox.requests:
                batches = outbox.requests.popleft()
                self._in_flight -= len(batches)
                unsent += batches
        for batch in unsent:
            self._fail(batch, ClientClosedError("producer closed before the record was sent"))
        self._nursery.cancel_scope.cancel()
        with trio.CancelScope(shield=True):
            await self.cluster.aclose()

    # ------------------------------------------------------------------ sending

    async def send(self, topic: str, value: bytes | None = None, key: bytes | None = None, *,
                   partition: int | None = None, headers=(), timestamp_ms: int | None = None) -> RecordFuture:
        """Queue one record; returns a future for its (partition, offset).

        Waits (up to max_block_ms) for topic metadata and for buffer space.
        """
        # The path of every record: no clock read unless it opens a batch, no call that can be saved.
        if self._closed:
            raise ClientClosedError("producer is closed")
        route = self._routes.get(topic)
        if route is None or route.topics is not self.cluster.topics:
            route = await self._route(topic)
        if headers:
            headers = _headers(headers)
            size = fixed_size(key, value, headers)
        elif key is None and value is not None:  # `fixed_size`, inline: a null key, a value
            n = len(value)
            size = 3 + n + (1 if n < 64 else 2 if n < 8192 else varint_size(n))
        else:
            size = 2 + length_size(key) + length_size(value)
        if size > self._max_fixed_size:
            raise _too_large(topic, size + POSITION_BOUND)
        tp = route.only if partition is None else None
        if tp is None:
            tp = route.partition(self, partition, key)
        if self.transactions is not None:
            await self.transactions.before_send(*tp)
        accumulator = self.accumulator
        if accumulator.buffered_bytes + size > self.buffer_memory and accumulator.buffered_bytes:
            await self._wait_for_buffer(size, self.env.now())
        record = (key, value, headers, self._wall_ms() if timestamp_ms is None else timestamp_ms)
        batch = accumulator.append(tp, record, size)
        if batch is None:
            if tp is route.sticky and key is None and partition is None:
                # Its sticky partition's batch is full or sent: null keys move on, this record first.
                tp = route.next_sticky(self)
                if self.transactions is not None:
                    await self.transactions.before_send(*tp)
            batch = self._open_batch(tp, record, size)
        elif batch.size >= accumulator.batch_size:
            self._send_ready(self.env.now())
        elif self._flushing and self._sender_asleep_until is not None:
            self._wake_sender(self.env.now())  # a flush waits: the open batch goes now
        return RecordFuture(batch.outcome, len(batch.records) - 1)

    async def send_many(self, topic: str, records, *, partition: int | None = None) -> list[RecordFuture]:
        """Queue many records, (key, value) or (key, value, headers) tuples, in order: what
        `send` of each does."""
        return [await self.send(topic, record[1], record[0], partition=partition,
                                headers=record[2] if len(record) > 2 else ()) for record in records]

    async def send_values(self, topic: str, values: list[bytes], *, partition: int | None = None) -> BlockFuture:
        """Queue records with these values (bytes; no key, no headers), in order, a batch at a
        time; returns one future for the block. They go to the topic's sticky partition, as
        `send` sends a null-key record, and move on when its batch is full."""
        block = BlockFuture(len(values))
        if not values:
            return block
        route = await self._route(topic)
        sizes = value_sizes(values)
        largest = max(map(len, values)) + RECORD_OVERHEAD
        if largest > self._max_record_size:
            raise _too_large(topic, largest)
        accumulator, start, wall_ms = self.accumulator, 0, self._wall_ms()
        while start < len(values):
            tp = route.partition(self, partition, None)
            if self.transactions is not None:
                await self.transactions.before_send(*tp)
            wanted = sizes[start] - (sizes[start - 1] if start else 0)
            if accumulator.buffered_bytes + wanted > self.buffer_memory and accumulator.buffered_bytes:
                await self._wait_for_buffer(wanted, self.env.now())
                wall_ms = self._wall_ms()
            room = self.buffer_memory - accumulator.buffered_bytes  # never more than buffer_memory queued
            limit = max(start + 1, bisect_right(sizes, room + (sizes[start - 1] if start else 0), start))
            now = self.env.now()
            batch, stop = accumulator.append_values(tp, values, start, limit, sizes, wall_ms, now)
            block._add_part(batch.outcome, stop - start)
            self._batch_grew(batch, now)
            if stop < limit and tp is route.sticky:  # the batch is full: the next one goes elsewhere
                route.next_sticky(self)
            start = stop
        return block

    async def _route(self, topic: str) -> "_Route":
        """Where records of `topic` go while the cluster's metadata is the one the route came
        from, else from fresh metadata (waiting up to max_block for it). `send` inlines the first
        half; raises once the producer is closed."""
        if self._closed:
            raise ClientClosedError("producer is closed")
        route = self._routes.get(topic)
        if route is not None and route.topics is self.cluster.topics:
            return route
        info = self.cluster.cached_topic(topic, self.env.now())
        if info is None:
            info = await self.cluster.topic(topic, wait=self.max_block)
        route = self._routes[topic] = _Route(self.cluster.topics, info)
        return route

    def _open_batch(self, tp, record: tuple, size: int):
        """Add a record that opens a new batch: the one place `send` reads the clock."""
        now = self.env.now()
        batch = self.accumulator.append(tp, record, size, now)
        self._batch_grew(batch, now)
        return batch

    def _batch_grew(self, batch: ProducerBatch, now: float) -> None:
        """Records went into `batch` (opened now, or filled a slice at a time): wake the sender by
        when it is due. Metadata older than metadata_max_age is looked up afresh by the next
        send (checked here, not per record: Kafka refreshes it in the background too)."""
        accumulator = self.accumulator
        if self._flushing or accumulator.send_now(batch):
            self._send_ready(now)
        else:
            self._wake_sender(now + accumulator.linger)
        if now - self.cluster.last_refresh >= self.cluster.metadata_max_age:
            self._routes.clear()

    def _send_ready(self, now: float) -> None:
        """Batches may be ready now (one filled up, an answer unmuted a partition, a flush
        waits): put them into their brokers' outboxes from the caller's task, not a sender's
        turn later (the sender does it while the idempotent producer has no id yet)."""
        if self._closed or (self.idempotent and self.producer_id < 0):
            self._wake_sender(now)
        else:
            self._wake_sender(self._drain_ready(now)[1])

    async def _wait_for_buffer(self, size: int, now: float) -> float:
        """Wait (up to max_block) until `size` more bytes fit in buffer_memory; the time then."""
        deadline = now + self.max_block
        while self.accumulator.buffered_bytes + size > self.buffer_memory and self.accumulator.buffered_bytes:
            with self.env.move_on_at(deadline):
                await self._progress.wait()
            if self.env.now() >= deadline:
                raise KafkaTimeoutError(f"no buffer space for {size} bytes in {self.max_block}s")
        return self.env.now()

    async def send_and_wait(self, topic: str, value: bytes | None = None, key: bytes | None = None,
                            **kwargs) -> RecordMetadata:
        return await (await self.send(topic, value, key, **kwargs))

    async def flush(self) -> None:
        """Send everything queued now and wait until each record has its answer."""
        self._flushing += 1
        try:
            while self.accumulator.queued_batches() or self._in_flight:
                self._wake_sender(self.env.now())
                progress = self._progress
                await progress.wait()
        finally:
            self._flushing -= 1

    # ------------------------------------------------------------------ transactions (transactional.py)

    async def init_transactions(self) -> None:
        await self._transactions().init_transactions()

    def begin_transaction(self) -> None:
        self._transactions().begin_transaction()

    async def send_offsets_to_transaction(self, offsets: dict, group_metadata) -> None:
        """{(topic, partition): next offset to read}; group_metadata: Consumer.group_metadata() or a group id."""
        await self._transactions().send_offsets({tuple(tp): o for tp, o in offsets.items()}, group_metadata)

    async def commit_transaction(self) -> None:
        await self._transactions().commit()

    async def abort_transaction(self) -> None:
        await self._transactions().abort()

    def _transactions(self) -> TransactionManager:
        if self.transactions is None:
            raise KafkaError("this producer has no transactional_id", ErrorCode.INVALID_TXN_STATE)
        return self.transactions

    async def partitions_for(self, topic: str) -> list[int]:
        return sorted((await self.cluster.topic(topic, wait=self.max_block)).partitions)

    # ------------------------------------------------------------------ the sender task

    async def _sender(self) -> None:
        while True:
            # Its sleeps towards a linger deadline are interrupted (cancelled) only when something
            # is due sooner: a cancel scope per interruption, not one per wait.
            with trio.CancelScope() as self._sender_interrupt:
                await self._send_until_interrupted()

    async def _send_until_interrupted(self) -> None:
        while True:
            self._sender_asleep_until = None
            now = self.env.now()
            for batch in self.accumulator.expire(now, self.delivery_timeout):
                self.accumulator.finished(batch)
                if batch.producer_id >= 0 and batch.producer_id == self.producer_id:
                    self._abandon_producer_id()  # its sequence may be missing: later batches would wait forever
                self._fail(batch, KafkaTimeoutError(
                    f"{batch.topic}-{batch.partition}: not delivered within delivery_timeout_ms"))
            if self.idempotent and self.producer_id < 0:
                if self.accumulator.ready(now, self._flushing > 0)[0]:
                    await self._init_producer_id()
                    continue
            drained, next_time = self._drain_ready(now)
            if drained:
                continue  # what it drained is muted now: look again for what else is ready
            if next_time == float("inf"):
                self._wake = trio.Event()
                self._sender_asleep_until = next_time
                await self._wake.wait()
            else:
                self._sender_asleep_until = next_time
                await self.env.sleep_until(next_time)  # in the simulation a clock timer: no cancel scope
                if self._sender_interrupt.cancel_called:
                    return  # interrupted as the sleep ended: renew the scope before any other await

    def _drain_ready(self, now: float) -> tuple[bool, float]:
        """Put every partition's ready batch into its leader's outbox, one Produce request per
        broker (no awaits: the connection's reader calls it too, as answers unmute partitions).
        (Whether it drained any, the earliest time another batch may become ready.)"""
        ready, next_time = self.accumulator.ready(now, self._flushing > 0)
        by_node: dict[int, list[ProducerBatch]] = {}
        for tp in ready:
            leader = self.cluster.leader(*tp)
            if leader < 0:
                self._request_metadata()
                next_time = min(next_time, now + self.retry_backoff)
                continue
            batch = self.accumulator.drain(tp)
            self._assign_sequence(batch)
            by_node.setdefault(leader, []).append(batch)
        for node, batches in sorted(by_node.items()):
            self._in_flight += len(batches)
            self._outbox(node).put(batches)
        return bool(by_node), next_time

    def _wake_sender(self, due: float) -> None:
        """Something may be ready to send at `due` (Env time): wake the sender if it would sleep past it."""
        asleep_until = self._sender_asleep_until
        if asleep_until is None or due >= asleep_until:
            return  # it is running (and looks again before it waits), or it wakes by then anyway
        self._sender_asleep_until = None
        if asleep_until == float("inf"):
            self._wake.set()
        else:
            self._sender_interrupt.cancel()

    def _outbox(self, node: int) -> "_Outbox":
        outbox = self._outboxes.get(node)
        if outbox is None:
            outbox = self._outboxes[node] = _Outbox()
            self._nursery.start_soon(self._node_sender, node, outbox)
        return outbox

    async def _node_sender(self, node: int, outbox: "_Outbox") -> None:
        """Send the Produce requests posted for `node`, one after another, for the producer's life."""
        while True:
            await self._send_produce(node, await outbox.get())

    def _assign_sequence(self, batch: ProducerBatch) -> None:
        batch.attempts += 1
        if not self.idempotent:
            return
        if batch.producer_id != self.producer_id:  # first send, or a new producer id since
            batch.reset_identity()
            tp = (batch.topic, batch.partition)
            batch.producer_id, batch.producer_epoch = self.producer_id, self.producer_epoch
            batch.base_sequence = self._sequences.get(tp, 0)
            batch.transactional = self.transactions is not None
            self._sequences[tp] = (batch.base_sequence + batch.count) & 0x7FFFFFFF

    async def _init_producer_id(self) -> None:
        request = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000)
        try:
            connection = await self.cluster.any_connection()
            if not connection.supports(ApiKey.INIT_PRODUCER_ID) and not self._idempotence_required:
                self.idempotent = False
                return
            response = await connection.request(request)
            if response.error_code:
                raise error_for(response.error_code, context="InitProducerId")
            self.producer_id, self.producer_epoch = response.producer_id, response.producer_epoch
            self._sequences.clear()
            self._acknowledged.clear()
        except KafkaError as exc:
            if not exc.retriable:
                for batch in self.accumulator.drop_all():
                    self._fail(batch, exc)
                return
            await self.env.sleep(self.retry_backoff)

    def _request_metadata(self) -> None:
        if self._metadata_refresh_running:
            return
        self._metadata_refresh_running = True

        async def refresh():
            try:
                await self.cluster.refresh()
            except KafkaError:
                await self.env.sleep(self.retry_backoff)
            finally:
                self._metadata_refresh_running = False
                self._wake_sender(self.env.now())

        self._nursery.start_soon(refresh)

    async def _send_produce(self, node: int, batches: list[ProducerBatch]) -> None:
        """Send one Produce request; its answer goes to `_produce_done` (acks=0: there is none)."""
        topics: dict[str, list] = {}
        for batch in batches:
            topics.setdefault(batch.topic, []).append(ProduceRequest.PartitionProduceData(
                index=batch.partition, records=batch.encode(self.compression, self.compression_level)))
        request = ProduceRequest(transactional_id=self.transactional_id, acks=self.acks,
                                 timeout_ms=int(self.request_timeout * 1000),
                                 topic_data=[ProduceRequest.TopicProduceData(name=t, partition_data=p)
                                             for t, p in sorted(topics.items())])
        try:
            connection = await self.cluster.connection(node)
            if self.acks == 0:
                await connection.request(request, expect_response=False)
                self._produce_done(batches, None, None)
            else:
                await connection.send(request, functools.partial(self._produce_done, batches))
        except KafkaError as exc:
            self._produce_done(batches, None, exc)
        except BaseException:  # cancelled (the producer is closing) before it was sent
            self._produce_done(batches, None, ClientClosedError("producer closed before the record was sent"))
            raise

    def _produce_done(self, batches: list[ProducerBatch], response, error: KafkaError | None) -> None:
        """A Produce request's outcome, in the task that learnt it (often the connection's
        reader): no awaits here."""
        self._in_flight -= len(batches)
        if error is not None:
            if self._closed and not isinstance(error, ClientClosedError):
                error = ClientClosedError(f"producer closed before the answer came ({error}); "
                                          f"the record may or may not have been written")
            for batch in batches:
                self._retry_or_fail(batch, error)
        elif response is None:  # acks=0: nothing to wait for
            for batch in batches:
                self._complete(batch, -1, -1)
        else:
            answers = {(t.name, p.index): p for t in response.responses for p in t.partition_responses}
            for batch in batches:
                answer = answers.get((batch.topic, batch.partition))
                if answer is None:
                    self._retry_or_fail(batch, error_for(ErrorCode.UNKNOWN_SERVER_ERROR, "no answer for partition"))
                elif answer.error_code in (ErrorCode.NONE, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
                    self._complete(batch, answer.base_offset, answer.log_append_time_ms)
                else:
                    error = error_for(answer.error_code, answer.error_message, f"{batch.topic}-{batch.partition}")
                    self._retry_or_fail(batch, error)
        if self.accumulator.has_queued():  # the answer unmuted its partitions
            self._send_ready(self.env.now())
        self._notify()

    def _retry_or_fail(self, batch: ProducerBatch, error: KafkaError) -> None:
        now = self.env.now()
        if batch.producer_id >= 0 and batch.producer_id != self.producer_id:
            # Sent under a producer id given up while it was in flight: not resent (see below).
            self.accumulator.finished(batch)
            self._fail(batch, _abandoned(batch, error))
        elif (error.retriable or self._behind_unacknowledged(batch, error)) \
                and now - batch.created < self.delivery_timeout and not self._closed:
            if error.invalid_metadata:
                self._request_metadata()
            self.accumulator.reenqueue(batch, now + self.retry_backoff)
        else:
            self.accumulator.finished(batch)
            if batch.producer_id >= 0 and batch.producer_id == self.producer_id:
                # This sequence may be missing from the log: later batches would be out of order.
                self._abandon_producer_id()
            self._fail(batch, error)

    def _behind_unacknowledged(self, batch: ProducerBatch, error: KafkaError) -> bool:
        """OUT_OF_ORDER_SEQUENCE_NUMBER for a batch sent behind an earlier one of its partition
        that has no answer yet or is waiting for a retry (several are in flight): the broker
        refused it only because that one is missing so far, so it is resent after it."""
        return (error.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and batch.producer_id == self.producer_id
                and batch.base_sequence != self._acknowledged.get((batch.topic, batch.partition), 0))

    def _abandon_producer_id(self) -> None:
        """Start over with a new producer id (Kafka bumps the epoch instead).

        A batch already sent under the old id may be in the log with its answer lost; under a
        new id the broker could not recognise a resend as a duplicate and would write it twice.
        So such batches fail with an unknown outcome (those waiting for a retry now, those in
        flight when their answer comes) rather than being resent; batches never sent get the
        new id and fresh sequences. A transactional producer keeps its id: the transaction
        becomes abortable, and its abort bumps the epoch."""
        if self.transactions is not None:
            return
        abandoned, self.producer_id = self.producer_id, -1
        for batch in self.accumulator.remove_sent(abandoned):
            self.accumulator.finished(batch)
            self._fail(batch, _abandoned(batch, None))

    def _complete(self, batch: ProducerBatch, base_offset: int, log_append_time: int) -> None:
        self.accumulator.finished(batch)
        if batch.producer_id >= 0 and batch.producer_id == self.producer_id:
            self._acknowledged[(batch.topic, batch.partition)] = (batch.base_sequence + batch.count) & 0x7FFFFFFF
        batch.outcome.complete(base_offset if base_offset >= 0 else -1, log_append_time,
                               batch.records if log_append_time < 0 else None)

    def _fail(self, batch: ProducerBatch, error: BaseException) -> None:
        if self.transactions is not None:
            self.transactions.batch_failed(batch, error)
        batch.outcome.fail(error)
        self._notify()

    def _notify(self) -> None:
        if self.accumulator.has_queued():  # an answer may unmute a partition with more to send
            self._wake_sender(self.env.now())
        self._progress.set()
        self._progress = trio.Event()


class _Route:
    """A topic's metadata as `send` uses it, good while the cluster's topics are the ones it came from."""

    __slots__ = ("topics", "name", "count", "available", "partitions", "only", "sticky")

    def __init__(self, topics: dict, info):
        self.topics = topics
        self.name = info.name
        self.count = len(info.partitions)
        self.available = info.available()
        self.partitions = {p: (info.name, p) for p in info.partitions}  # made once, not per record
        # A topic of one partition: every partitioner picks it (and draws no random number).
        self.only = next(iter(self.partitions.values())) if self.count == 1 else None
        self.sticky: tuple[str, int] | None = None  # where null-key records go now (drawn when first needed)

    def partition(self, producer: Producer, partition: int | None, key) -> tuple[str, int]:
        """(topic, partition) of a record: the partition asked for (if it exists) or the partitioner's."""
        if partition is None:
            if key is None and producer.partitioner.sticky_nulls:
                return self.sticky or self.next_sticky(producer)
            partition = producer.partitioner.partition(key, self.count, self.available)
        tp = self.partitions.get(partition)
        if tp is None:
            raise error_for(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, context=f"{self.name}-{partition}")
        return tp

    def next_sticky(self, producer: Producer) -> tuple[str, int]:
        """Move null-key records to another partition (the sticky one's batch is full or sent)."""
        previous = self.sticky[1] if self.sticky is not None else None
        self.sticky = self.partitions[producer.partitioner.next_sticky(self.count, self.available, previous)]
        return self.sticky


class _Outbox:
    """Produce requests waiting for their broker's sender task, oldest first."""

    __slots__ = ("requests", "_wake")

    def __init__(self):
        self.requests: deque[list[ProducerBatch]] = deque()
        self._wake: trio.Event | None = None

    def put(self, batches: list[ProducerBatch]) -> None:
        self.requests.append(batches)
        if self._wake is not None:
            self._wake.set()

    async def get(self) -> list[ProducerBatch]:
        while not self.requests:
            self._wake = trio.Event()
            await self._wake.wait()
        self._wake = None
        return self.requests.popleft()


def _too_large(topic: str, size: int) -> KafkaError:
    return error_for(ErrorCode.MESSAGE_TOO_LARGE, f"{size} bytes > max_request_size", topic)


def _abandoned(batch: ProducerBatch, error: KafkaError | None) -> KafkaError:
    why = f" (last attempt: {error})" if error is not None else ""
    return KafkaError(f"{batch.topic}-{batch.partition}: not resent: producer id {batch.producer_id} was "
                      f"abandoned after another batch failed; this batch may or may not have been "
                      f"written{why}", ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)


def _headers(headers) -> tuple[tuple[str, bytes | None], ...]:
    items = headers.items() if isinstance(headers, dict) else headers
    out = []
    for key, value in items:
        if isinstance(value, str):
            value = value.encode()
        out.append((key, value))
    return tuple(out)
