"""The transactional part of the cluster workload, through raftkafka.client's transactional
producer and read_committed consumer (issue 22).

- TxnProducerProcess (one transactional id each): transactions of 1-4 records over the
  partitions of TXN_TOPIC (compacted, each record keyed by its own value: the cleaner keeps
  every committed record and removes aborted records under faults), each also committing the group TXN_GROUP's offset of the
  process's own partition of TXN_INPUT to the transaction's number (as consume-transform-
  produce commits the input it read); about a third are aborted. An op "txn" per
  transaction: value {"n", "values": [(partition, value)]}; ok = committed, fail = certainly
  not committed (aborted, or never asked to commit), info = the commit's outcome is unknown.
  A session error starts a new producer of the same id, whose init_transactions fences the
  old one and aborts what it left open.
  Now and then after an abort, a transactional batch of the producer is sent on its own (a
  late write: KIP-890's hanging transaction), which the partition leader must refuse.
- TxnReaderProcess: assign mode over TXN_TOPIC from offset 0 at read_committed or
  read_uncommitted; ops "txn_poll" with value = the isolation level.
- `initialise` (before any fault): each transactional id gets its producer id once.
- `converge`: each id is initialised again (closing what it left open) and commits one
  transaction writing every partition; then a read_committed and a read_uncommitted read of
  every partition to its end (ops "txn_final") and the group's committed offsets
  ("txn_offsets"). simulations.checkers.transactions judges the history.
"""
from __future__ import annotations

import trio

from raftkafka.client import Admin, Consumer, KafkaError, NewTopic, Producer
from raftkafka.client.errors import ClientClosedError
from raftkafka.client.transactions_admin import describe_transaction
from wire.error_codes import ErrorCode
from wire.protocol import ProduceRequest
from wire.records import SimpleRecord, build_batch
from simulations.workloads.clients import CLIENT, _Process, _admin_options, client_error

__all__ = ["TXN_TOPIC", "TXN_INPUT", "TXN_GROUP", "TxnProducerProcess", "TxnReaderProcess", "TransactionalWorkload"]

TXN_TOPIC, TXN_INPUT, TXN_GROUP = "txn-out", "txn-in", "txn-group"
TXN_PARTITIONS = 3
PRODUCERS = 2
TRANSACTION_TIMEOUT_MS = 6000
ISOLATIONS = ("read_committed", "read_uncommitted")
# Segments of a few transactions and a cleaner that takes each rolled one. Markers keep Kafka's
# default delete.retention.ms (a day): a replica away for longer than it (killed, paused, cut
# off) comes back still holding an aborted transaction's records, fetches on past the ABORT
# marker the leader has since removed, and the producer's next COMMIT marker closes them as
# committed. Kafka bounds that hazard by this setting only, and the nemesis keeps a replica
# away for seconds, so markers must outlive any run (tests/simulations/test_txn_topic_config.py).
TXN_TOPIC_COMPACTION = {"cleanup.policy": "compact", "segment.ms": "400", "min.cleanable.dirty.ratio": "0.01"}


def _producer(env, bootstrap, transactional_id: str) -> Producer:
    return Producer(env, bootstrap, transactional_id=transactional_id, linger_ms=2, delivery_timeout_ms=8000,
                    transaction_timeout_ms=TRANSACTION_TIMEOUT_MS, max_block_ms=8000, **CLIENT)


class TxnProducerProcess(_Process):
    def __init__(self, *args, index: int):
        super().__init__(*args)
        self.index = index
        self.count = 0

    async def session(self) -> None:
        env = self.new_env()
        async with _producer(env, self.settings.bootstrap, self.name) as producer:
            await producer.init_transactions()
            while True:
                await env.sleep(self.rng.uniform(0.05, 0.3))
                await self._transaction(producer)

    async def _transaction(self, producer: Producer) -> None:
        self.count += 1
        n = self.count
        values = [(self.rng.randrange(TXN_PARTITIONS), f"{self.name}.{self.sessions}.{n}.{j}".encode())
                  for j in range(self.rng.randint(1, 4))]
        commit = self.rng.random() < 0.67
        op = self.history.invoke(self.name, "txn", {"n": n, "values": values, "commit": commit}, topic=TXN_TOPIC)
        asked_to_commit = False
        try:
            producer.begin_transaction()
            futures = [await producer.send(TXN_TOPIC, v, v, partition=p) for p, v in values]
            await producer.send_offsets_to_transaction({(TXN_INPUT, self.index): n}, TXN_GROUP)
            if commit:
                asked_to_commit = True
                op.value["commit_at"] = trio.current_time()  # before EndTxn: nothing visible earlier
                await producer.commit_transaction()
                for future in futures:
                    await future
                self.history.ok(op)
                return
            if self.rng.random() < 0.5:
                await producer.flush()  # aborted records in the log, not only dropped from the buffer
            await producer.abort_transaction()
            self.history.fail(op, "aborted")
        except (KafkaError, ClientClosedError) as e:
            (self.history.info if asked_to_commit else self.history.fail)(op, e)
            if asked_to_commit or producer.transactions.state != "ABORTABLE_ERROR":
                raise  # a new session: its init_transactions settles the outcome
            await producer.abort_transaction()  # raises (ending the session) if that fails too
            return
        if self.rng.random() < 0.3:
            await self._late_write(producer, n)

    async def _late_write(self, producer: Producer, n: int) -> None:
        """A transactional batch of this producer arriving after its transaction ended, as a retry
        delayed in the network would (the hanging transaction of KIP-890): the leader must refuse
        it, since no marker would ever close the transaction it opens. Recorded as an aborted
        transaction of its own: a read_committed reader must never see it."""
        await producer.env.sleep(self.rng.uniform(0, 1))  # mostly after the abort's markers
        partition = self.rng.randrange(TXN_PARTITIONS)
        sequence = producer._sequences.get((TXN_TOPIC, partition), 0)
        value = f"{self.name}.{self.sessions}.{n}.late".encode()
        op = self.history.invoke(self.name, "txn", {"n": n, "values": [(partition, value)], "commit": False,
                                                    "late": True}, topic=TXN_TOPIC)
        batch = build_batch([SimpleRecord(value, value, (), producer.env.wall_ms())],
                            producer_id=producer.producer_id, producer_epoch=producer.producer_epoch,
                            base_sequence=sequence, transactional=True)
        request = ProduceRequest(transactional_id=self.name, acks=-1, timeout_ms=3000, topic_data=[
            ProduceRequest.TopicProduceData(name=TXN_TOPIC, partition_data=[
                ProduceRequest.PartitionProduceData(index=partition, records=batch)])])
        try:
            response = await producer.cluster.send(producer.cluster.leader(TXN_TOPIC, partition), request)
        except KafkaError as e:
            self.history.fail(op, e)
            raise  # it may sit in the log with our sequence: a new session starts a new epoch
        code = ErrorCode.of(response.responses[0].partition_responses[0].error_code)
        self.history.fail(op, f"late write answered {code.name}")
        if code == ErrorCode.NONE:  # it joined a transaction whose abort marker had yet to come
            producer._sequences[(TXN_TOPIC, partition)] = sequence + 1


class TxnReaderProcess(_Process):
    def __init__(self, *args, isolation: str):
        super().__init__(*args)
        self.isolation = isolation
        self.next_offset: dict[tuple[str, int], int] = {}

    async def session(self) -> None:
        env = self.new_env()
        async with Consumer(env, self.settings.bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=300,
                            isolation_level=self.isolation, **CLIENT) as consumer:
            partitions = [(TXN_TOPIC, p) for p in range(TXN_PARTITIONS)]
            consumer.assign(partitions)
            for tp in partitions:
                consumer.seek(tp, self.next_offset.get(tp, 0))
            while True:
                op = self.history.invoke(self.name, "txn_poll", self.isolation)
                try:
                    records = await consumer.poll(0.5)
                except KafkaError as e:
                    self.history.fail(op, e)
                    await trio.sleep(0.1)
                    continue
                seen = [(r.partition, r.offset, r.value) for r in records]
                self.history.ok(op, seen)
                for p, o, _ in seen:
                    self.next_offset[(TXN_TOPIC, p)] = o + 1


class TransactionalWorkload:
    def __init__(self, cluster_workload):
        self.cluster = cluster_workload
        self.history = cluster_workload.history
        self.bootstrap = cluster_workload.settings.bootstrap

    async def setup(self, admin: Admin) -> bool:
        topics = [NewTopic(TXN_TOPIC, TXN_PARTITIONS, self.cluster.replication_factor,
                           {"min.insync.replicas": str(self.cluster.min_isr), **TXN_TOPIC_COMPACTION}),
                  NewTopic(TXN_INPUT, PRODUCERS, self.cluster.replication_factor)]
        try:
            results = await admin.create_topics(topics, timeout_ms=5000)
        except KafkaError:
            return False
        return all(r is None or "TOPIC_ALREADY_EXISTS" in str(r) for r in results.values())

    async def initialise(self) -> None:
        """Before any fault: each transactional id gets its producer id (the first also creates
        __transaction_state), so the safety phase starts with transactions, not with that."""
        async def init(env, transactional_id: str) -> None:
            async with _producer(env, self.bootstrap, transactional_id) as producer:
                await producer.init_transactions()
        for i in range(PRODUCERS):
            await self._retry(f"txn-producer{i}-init", lambda env, i=i: init(env, f"txn-producer{i}"))

    def processes(self, settings) -> list[_Process]:
        h, rng = self.history, self.cluster._rng
        out: list[_Process] = [TxnProducerProcess(f"txn-producer{i}", self.cluster.env_for, h, settings,
                                                  rng(f"txn-producer{i}"), index=i) for i in range(PRODUCERS)]
        out += [TxnReaderProcess(f"txn-{iso}", self.cluster.env_for, h, settings, rng(f"txn-{iso}"),
                                 isolation=iso) for iso in ISOLATIONS]
        return out

    async def converge(self, deadline: float) -> list[str]:
        problems = []
        with trio.move_on_at(deadline):
            for i in range(PRODUCERS):
                await self._settle(f"txn-producer{i}")
            for isolation in ISOLATIONS:
                await self._retry(f"txn-final-{isolation}", lambda env, iso=isolation: self._read_all(env, iso))
            await self._retry("txn-offsets", self._read_offsets)
        done = {op.value for op in self.history.of("txn_final", "ok")}
        if done != set(ISOLATIONS):
            problems.append(f"the final transactional reads did not finish (done: {sorted(done)})")
        if not self.history.of("txn_offsets", "ok"):
            problems.append(f"the committed offsets of {TXN_GROUP} could not be read")
        return problems

    async def _retry(self, name: str, call) -> None:
        session = 0
        while True:
            session += 1
            try:
                return await call(self.cluster.env_for(name, session))
            except Exception as e:  # noqa: BLE001 - a failed client session: try a new one
                if not client_error(e):
                    raise
                await trio.sleep(0.2)

    async def _settle(self, transactional_id: str) -> None:
        """A new producer of the id aborts what its last session left open, then commits a
        transaction on every partition: the last stable offsets move to the log ends."""
        attempts = 0

        async def settle(env) -> None:
            nonlocal attempts
            attempts += 1  # a value per attempt: a failed one may still have committed
            async with _producer(env, self.bootstrap, transactional_id) as producer:
                await producer.init_transactions()
                producer.begin_transaction()
                values = [(p, f"{transactional_id}.settle{attempts}.{p}".encode()) for p in range(TXN_PARTITIONS)]
                op = self.history.invoke(transactional_id, "txn", {"n": 0, "values": values, "commit": True},
                                         topic=TXN_TOPIC)
                try:
                    for p, v in values:
                        await producer.send(TXN_TOPIC, v, v, partition=p)
                    op.value["commit_at"] = trio.current_time()
                    await producer.commit_transaction()
                except (KafkaError, ClientClosedError) as e:
                    self.history.info(op, e)
                    raise
                self.history.ok(op)
        await self._retry(f"{transactional_id}-settle", settle)

    async def _read_all(self, env, isolation: str) -> None:
        partitions = [(TXN_TOPIC, p) for p in range(TXN_PARTITIONS)]
        async with Consumer(env, self.bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=200,
                            isolation_level=isolation, **CLIENT) as consumer:
            ends = await consumer.end_offsets(partitions)
            # The last commit's markers are written after its EndTxn was answered: read once
            # the last stable offsets reached the log ends.
            while isolation == "read_committed" and ends != await _log_ends(env, self.bootstrap, partitions):
                await trio.sleep(0.1)
                ends = await consumer.end_offsets(partitions)
            consumer.assign(partitions)
            seen: dict[int, list[tuple[int, bytes]]] = {p: [] for _, p in partitions}
            for tp in partitions:
                consumer.seek(tp, 0)
            while any([await consumer.position(tp) < ends[tp] for tp in partitions]):
                for r in await consumer.poll(0.5):
                    seen[r.partition].append((r.offset, r.value))
        op = self.history.invoke("txn-final", "txn_final", isolation, topic=TXN_TOPIC)
        self.history.ok(op, {p: records for p, records in sorted(seen.items())})

    async def _read_offsets(self, env) -> None:
        async with Admin(env, self.bootstrap, **_admin_options()) as admin:
            # The offsets apply when the COMMIT marker reaches __consumer_offsets, after EndTxn
            # was answered: read them once every transaction is complete.
            while True:
                states = [(await describe_transaction(admin, f"txn-producer{i}")).state for i in range(PRODUCERS)]
                if all(state in ("CompleteCommit", "CompleteAbort", "Empty") for state in states):
                    break
                await trio.sleep(0.1)
            offsets = await admin.list_consumer_group_offsets(TXN_GROUP, [(TXN_INPUT, i) for i in range(PRODUCERS)])
        op = self.history.invoke("txn-final", "txn_offsets", TXN_GROUP)
        self.history.ok(op, {tp[1]: o for tp, o in sorted(offsets.items()) if o is not None})


async def _log_ends(env, bootstrap, partitions) -> dict:
    async with Consumer(env, bootstrap, **CLIENT) as consumer:
        return await consumer.end_offsets(partitions)
