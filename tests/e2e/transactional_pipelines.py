"""One consume-transform-produce pipeline per real client (confluent-kafka, kafka-python,
aiokafka) behind the same small synchronous interface, so tests/e2e/test_transactions.py
drives the same kill scenario through each: a read_committed consumer with manual
assignment, and a transactional producer that commits the consumer's positions with
send_offsets_to_transaction. `new_producer` starts a new incarnation with the same
transactional id (which fences the previous one, kept open as a zombie until `close`),
`rewind` moves the consumer back to the group's committed offsets, and `recover` aborts
after an abortable error or re-initialises when the producer cannot abort (fatal)."""
from __future__ import annotations

import asyncio

PARTITIONS = 3
BATCH = 40  # records per transaction at most
TRANSACTION_TIMEOUT_MS = 20000


class ConfluentPipeline:
    reinit_after_coordinator_moved = False  # librdkafka looks the coordinator up until it answers

    def __init__(self, bootstrap: str, topic: str, txn_id: str, group: str):
        from confluent_kafka import Consumer, KafkaException, TopicPartition
        self.errors = (KafkaException,)
        self.bootstrap, self.txn_id = bootstrap, txn_id
        self.partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                                  "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
        self.producer, self.zombies = None, []

    def new_producer(self) -> None:
        from confluent_kafka import Producer
        if self.producer is not None:
            self.zombies.append(self.producer)
        self.producer = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": self.txn_id,
                                  "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS})
        self.producer.init_transactions(60)

    def rewind(self) -> None:
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition
        committed = self.consumer.committed(self.partitions, 30)
        self.consumer.assign([TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING)
                              for tp in committed])

    def poll(self) -> list[tuple[int, bytes]]:
        return [(m.partition(), m.value()) for m in self.consumer.consume(BATCH, 0.5) if m.error() is None]

    def begin(self) -> None:
        self.producer.begin_transaction()

    def produce(self, topic: str, records: list[tuple[int, bytes]]) -> None:
        for partition, value in records:
            self.producer.produce(topic, value=value, partition=partition)

    def flush(self, timeout: float) -> bool:
        return self.producer.flush(timeout) == 0

    def commit_with_offsets(self, timeout: float) -> None:
        self.producer.send_offsets_to_transaction(self.consumer.position(self.consumer.assignment()),
                                                  self.consumer.consumer_group_metadata(), 30)
        self.producer.commit_transaction(timeout)

    def recover(self, exc: BaseException) -> bool:
        """Abort if the error allows it, else a new incarnation; True when re-initialised."""
        from confluent_kafka import KafkaException
        if exc.args[0].txn_requires_abort():
            try:
                self.producer.abort_transaction(30)
                return False
            except KafkaException:
                pass
        self.new_producer()
        return True

    def committed_and_ends(self) -> tuple[list[int], list[int]]:
        committed = [tp.offset for tp in self.consumer.committed(self.partitions, 30)]
        return committed, [self.consumer.get_watermark_offsets(tp, 10)[1] for tp in self.partitions]

    def close(self) -> None:
        self.consumer.close()


class KafkaPythonPipeline:
    # Until the controller fences a killed node (broker.session.timeout.ms) FindCoordinator
    # names it, as Kafka's does. A new kafka-python producer told so twice stops sending
    # (its sender logs nothing more and init_transactions times out after max_block_ms),
    # so this pipeline re-inits once the coordinator has moved.
    reinit_after_coordinator_moved = True

    def __init__(self, bootstrap: str, topic: str, txn_id: str, group: str):
        from kafka import KafkaConsumer
        from kafka.errors import KafkaError
        from kafka.structs import TopicPartition
        self.errors = (KafkaError,)
        self.bootstrap, self.txn_id = bootstrap, txn_id
        self.partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                                      isolation_level="read_committed", auto_offset_reset="earliest")
        self.consumer.assign(self.partitions)
        self.producer, self.zombies = None, []

    def new_producer(self) -> None:
        from kafka import KafkaProducer
        if self.producer is not None:
            self.zombies.append(self.producer)
        self.producer = KafkaProducer(bootstrap_servers=self.bootstrap, transactional_id=self.txn_id,
                                      transaction_timeout_ms=TRANSACTION_TIMEOUT_MS)
        self.producer.init_transactions()

    def rewind(self) -> None:
        for tp in self.partitions:
            offset = self.consumer.committed(tp, timeout_ms=30000)
            if offset is None:
                self.consumer.seek_to_beginning(tp)
            else:
                self.consumer.seek(tp, offset)

    def poll(self) -> list[tuple[int, bytes]]:
        batches = self.consumer.poll(timeout_ms=500, max_records=BATCH)
        return [(tp.partition, r.value) for tp, records in batches.items() for r in records]

    def begin(self) -> None:
        self.producer.begin_transaction()

    def produce(self, topic: str, records: list[tuple[int, bytes]]) -> None:
        for partition, value in records:
            self.producer.send(topic, value, partition=partition)

    def flush(self, timeout: float) -> bool:
        from kafka.errors import KafkaTimeoutError
        try:
            self.producer.flush(timeout)
            return True
        except KafkaTimeoutError:
            return False

    def commit_with_offsets(self, timeout: float) -> None:
        from kafka.structs import OffsetAndMetadata
        positions = {tp: OffsetAndMetadata(self.consumer.position(tp), "", -1) for tp in self.partitions}
        self.producer.send_offsets_to_transaction(positions, self.consumer.group_metadata())
        self.producer.commit_transaction()  # kafka-python's waits without a timeout

    def recover(self, exc: BaseException) -> bool:
        """abort_transaction raises after a fatal error (fenced): then a new incarnation."""
        from kafka.errors import KafkaError
        try:
            self.producer.abort_transaction()
            return False
        except KafkaError:
            self.new_producer()
            return True

    def committed_and_ends(self) -> tuple[list[int], list[int]]:
        committed = [self.consumer.committed(tp, timeout_ms=30000) for tp in self.partitions]
        ends = self.consumer.end_offsets(self.partitions, timeout_ms=30000)
        return committed, [ends[tp] for tp in self.partitions]

    def close(self) -> None:
        for producer in [*self.zombies, self.producer]:
            producer.close(timeout=0)
        self.consumer.close()


class AiokafkaPipeline:
    """aiokafka on its own event loop, which runs only inside each call: the kills happen
    while the client's background tasks are paused, as a process stalled by GC would be."""
    reinit_after_coordinator_moved = False

    def __init__(self, bootstrap: str, topic: str, txn_id: str, group: str):
        from aiokafka import AIOKafkaConsumer
        from aiokafka.errors import IllegalOperation, KafkaError
        from aiokafka.structs import TopicPartition
        self.errors = (KafkaError, IllegalOperation, asyncio.TimeoutError)
        self.loop = asyncio.new_event_loop()
        self.bootstrap, self.txn_id = bootstrap, txn_id
        self.partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        self.group = group
        self.consumer = self.run(self._start_consumer(AIOKafkaConsumer))
        self.producer, self.zombies = None, []

    async def _start_consumer(self, consumer_class):
        consumer = consumer_class(bootstrap_servers=self.bootstrap, group_id=self.group, enable_auto_commit=False,
                                  isolation_level="read_committed", auto_offset_reset="earliest")
        await consumer.start()
        consumer.assign(self.partitions)
        return consumer

    def run(self, coroutine, timeout: float = 60):
        return self.loop.run_until_complete(asyncio.wait_for(coroutine, timeout))

    def new_producer(self) -> None:
        from aiokafka import AIOKafkaProducer
        if self.producer is not None:
            self.zombies.append(self.producer)

        async def start():
            producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, transactional_id=self.txn_id,
                                        transaction_timeout_ms=TRANSACTION_TIMEOUT_MS)
            await producer.start()  # init_transactions happens in start()
            return producer
        self.producer = self.run(start())

    def rewind(self) -> None:
        async def rewind():
            for tp in self.partitions:
                offset = await self.consumer.committed(tp)
                if offset is None:
                    await self.consumer.seek_to_beginning(tp)
                else:
                    self.consumer.seek(tp, offset)
        self.run(rewind())

    def poll(self) -> list[tuple[int, bytes]]:
        batches = self.run(self.consumer.getmany(timeout_ms=500, max_records=BATCH))
        return [(tp.partition, r.value) for tp, records in batches.items() for r in records]

    def begin(self) -> None:
        self.run(self.producer.begin_transaction())

    def produce(self, topic: str, records: list[tuple[int, bytes]]) -> None:
        async def send():
            for partition, value in records:
                await self.producer.send(topic, value, partition=partition)
        self.run(send())

    def flush(self, timeout: float) -> bool:
        try:
            self.run(self.producer.flush(), timeout)
            return True
        except asyncio.TimeoutError:
            return False

    def commit_with_offsets(self, timeout: float) -> None:
        async def commit():
            positions = {tp: await self.consumer.position(tp) for tp in self.partitions}
            await self.producer.send_offsets_to_transaction(positions, self.group)
            await self.producer.commit_transaction()
        self.run(commit(), timeout)

    def recover(self, exc: BaseException) -> bool:
        try:
            self.run(self.producer.abort_transaction(), 30)
            return False
        except self.errors:
            self.new_producer()
            return True

    def committed_and_ends(self) -> tuple[list[int], list[int]]:
        async def read():
            committed = [await self.consumer.committed(tp) for tp in self.partitions]
            ends = await self.consumer.end_offsets(self.partitions)
            return committed, [ends[tp] for tp in self.partitions]
        return self.run(read())

    def close(self) -> None:
        async def stop():
            for producer in [*self.zombies, self.producer]:
                try:
                    await asyncio.wait_for(producer.stop(), 5)
                except (Exception, asyncio.TimeoutError):
                    pass  # a fenced zombie may fail to flush; it is dropped either way
            await self.consumer.stop()
        self.loop.run_until_complete(stop())
        self.loop.close()
