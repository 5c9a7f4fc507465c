"""The full-cluster workload: data topics written by acks=all producers (idempotent and
not), read by assign-mode consumers and a consumer group that commits, plus metadata
churn through Admin (topics, ACLs: simulations.workloads.acls, and client quotas:
simulations.workloads.quotas), transactions (simulations.workloads.transactions) and, with
the churn, retention, log cleaning and DeleteRecords on two topics of their own
(simulations.workloads.retention) — all through the real client library, recorded in a History.

Phases, driven by the runner:
- `setup(deadline)`: before any fault, create the data topics (min.insync.replicas=2)
  and get one acknowledged write into every partition;
- `run(until)`: every client process runs until the safety phase ends;
- `converge(deadline)` after the heal (liveness): a fresh producer gets an ack on every
  partition, then a fresh consumer reads every partition from 0 to its end (the final
  reads, ops "final_read"). Returns a list of what did not happen in time.
"""
from __future__ import annotations

import random

import trio

from raftkafka.client import Admin, Consumer, KafkaError, NewTopic, Producer
from simulations.env import SimEnv, SkewedClock, derive_seed
from simulations.history import History
from simulations.workloads import retention
from simulations.workloads.acls import AclChurnProcess
from simulations.workloads.quotas import QuotaChurnProcess
from simulations.workloads.clients import (
    CLIENT, AdminChurnProcess, AssignConsumerProcess, ClientSettings, CommittedReaderProcess,
    GroupConsumerProcess, ProducerProcess, ReassignProcess, client_error,
)
from simulations.workloads.transactions import TransactionalWorkload
from storage.memfs import MemFileSystem

__all__ = ["ClusterWorkload", "CLIENT_HOST"]

CLIENT_HOST = "client"
GROUP = "sim-group"


class ClusterWorkload:
    def __init__(self, seed: int, net, history: History, bootstrap: list[str], *, brokers: int,
                 topics: int = 1, partitions: int = 3, producers: int = 2, churn: bool = True,
                 broker_ids: list[int] | None = None):
        self.seed = seed
        self.net = net
        self.history = history
        self.replication_factor = min(3, brokers)
        self.min_isr = 2 if self.replication_factor >= 2 else 1
        data_topics = {f"data-{i}": partitions for i in range(topics)}
        self.settings = ClientSettings(bootstrap, data_topics, GROUP)
        self.producers = producers
        self.churn = churn
        self.broker_ids = list(broker_ids or ())  # with churn: data partitions are reassigned among them
        self.final: dict[tuple[str, int], dict[int, bytes]] = {}  # final reads, by partition
        self.final_end: dict[tuple[str, int], int] = {}
        self.transactions = TransactionalWorkload(self)
        self.log_final: dict[str, dict[int, bytes]] = {}  # the retention topics' final reads

    def env_for(self, process: str, session: int) -> SimEnv:
        return SimEnv(CLIENT_HOST, seed=derive_seed(self.seed, "client", process), incarnation=session,
                      net=self.net, disk=MemFileSystem(), clock=SkewedClock())

    def _rng(self, name: str) -> random.Random:
        return random.Random(derive_seed(self.seed, "workload", name))

    # ------------------------------------------------------------------ phases
    async def setup(self, deadline: float) -> str | None:
        """Create the data topics and get a first write acknowledged everywhere (no faults yet)."""
        env = self.env_for("setup", 1)
        with trio.move_on_at(deadline):
            wanted = {t: NewTopic(t, n, self.replication_factor, {"min.insync.replicas": str(self.min_isr)})
                      for t, n in self.settings.topics.items()}
            if self.churn:
                wanted.update({t.name: t for t in retention.new_topics(self.replication_factor, self.min_isr)})
            pending = sorted(wanted)
            async with Admin(env, self.settings.bootstrap, request_timeout_ms=3000) as admin:
                while pending:
                    topics = [wanted[t] for t in pending]
                    try:
                        results = await admin.create_topics(topics, timeout_ms=5000)
                    except KafkaError:
                        results = {}
                    pending = [t for t in pending if t not in results or
                               (results[t] is not None and "TOPIC_ALREADY_EXISTS" not in str(results[t]))]
                    if pending:
                        await trio.sleep(0.25)
                while not await self.transactions.setup(admin):
                    await trio.sleep(0.25)
            await self.transactions.initialise()
            if await self._ack_every_partition("setup", deadline):
                return None
        return "the data topics could not be created and written before any fault"

    async def run(self, until: float) -> None:
        s, h = self.settings, self.history
        processes = []
        for i in range(self.producers):
            name = f"producer{i}"
            processes.append(ProducerProcess(name, self.env_for, h, s, self._rng(name), idempotent=i % 2 == 0))
        processes.append(AssignConsumerProcess("reader0", self.env_for, h, s, self._rng("reader0")))
        for i in range(2):
            name = f"member{i}"
            processes.append(GroupConsumerProcess(name, self.env_for, h, s, self._rng(name)))
        processes.append(CommittedReaderProcess("offsets0", self.env_for, h, s, self._rng("offsets0")))
        if self.churn:
            processes.append(AdminChurnProcess("admin0", self.env_for, h, s, self._rng("admin0"),
                                               replication_factor=self.replication_factor))
            processes.append(AclChurnProcess("acls0", self.env_for, h, s, self._rng("acls0")))
            processes.append(QuotaChurnProcess("quotas0", self.env_for, h, s, self._rng("quotas0")))
            processes.append(retention.LogProducerProcess("keyed0", self.env_for, h, s, self._rng("keyed0")))
            processes.append(retention.FillerProcess("filler0", self.env_for, h, s, self._rng("filler0")))
            processes.append(retention.DeleteRecordsProcess("trim0", self.env_for, h, s, self._rng("trim0")))
        if self.churn and self.broker_ids:
            processes.append(ReassignProcess("reassign0", self.env_for, h, s, self._rng("reassign0"),
                                             brokers=self.broker_ids, min_replicas=self.min_isr))
        processes += self.transactions.processes(s)
        async with trio.open_nursery() as nursery:
            for p in processes:
                nursery.start_soon(p.run, until)

    async def converge(self, deadline: float) -> list[str]:
        """Liveness after the heal: writes succeed everywhere, then the final reads."""
        problems = []
        if not await self._ack_every_partition("final-producer", deadline):
            problems.append("no acknowledged write on every data partition after the heal")
        if not await self._final_reads(deadline):
            missing = [f"{t}-{p}" for t, p in self.settings.partitions() if (t, p) not in self.final]
            problems.append(f"final reads did not reach the end of {missing}")
        problems += await self.transactions.converge(deadline)
        if self.churn:
            self.log_final = await retention.final_read(self.env_for, self.history, self.settings.bootstrap, deadline)
            if not self.log_final:
                problems.append(f"final reads did not reach the end of {list(retention.LOG_TOPICS)}")
        return problems

    async def _ack_every_partition(self, name: str, deadline: float) -> bool:
        pending = self.settings.partitions()
        session = 0
        with trio.move_on_at(deadline):
            while pending:
                session += 1
                try:
                    async with Producer(self.env_for(name, session), self.settings.bootstrap, acks="all",
                                        linger_ms=0, delivery_timeout_ms=5000, **CLIENT) as producer:
                        attempt = 0
                        while pending:
                            topic, partition = pending[0]
                            attempt += 1
                            # A fresh value per send: one that failed may still be in the log, and
                            # sending it again is a new record, not a retry idempotence could dedupe.
                            value = f"{name}.{session}.{topic}-{partition}.{attempt}".encode()
                            op = self.history.invoke(name, "send", value, topic=topic, partition=partition)
                            op.session = session
                            try:
                                metadata = await producer.send_and_wait(topic, op.value, partition=partition)
                            except KafkaError as e:
                                self.history.info(op, e)
                                await trio.sleep(0.2)
                                continue
                            self.history.ok(op, metadata.offset)
                            pending.pop(0)
                except Exception as e:  # noqa: BLE001 - a failed client session: try a new one
                    if not client_error(e):
                        raise
                    await trio.sleep(0.2)
        return not pending

    async def _final_reads(self, deadline: float) -> bool:
        """Read every data partition from offset 0 to its end offset (after the last ack)."""
        session = 0
        with trio.move_on_at(deadline):
            while len(self.final) < len(self.settings.partitions()):
                session += 1
                try:
                    await self._read_all(self.env_for("final-reader", session))
                except Exception as e:  # noqa: BLE001 - a failed client session: try a new one
                    if not client_error(e):
                        raise
                    await trio.sleep(0.2)
        return len(self.final) == len(self.settings.partitions())

    async def _read_all(self, env) -> None:
        async with Consumer(env, self.settings.bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=200,
                            **CLIENT) as consumer:
            todo = [tp for tp in self.settings.partitions() if tp not in self.final]
            ends = await consumer.end_offsets(todo)
            consumer.assign(todo)
            for tp in todo:
                consumer.seek(tp, 0)
            seen: dict[tuple[str, int], dict[int, bytes]] = {tp: {} for tp in todo}
            positions = {tp: 0 for tp in todo}
            while any(positions[tp] < ends[tp] for tp in todo):
                for r in await consumer.poll(0.5):
                    tp = (r.topic, r.partition)
                    seen[tp][r.offset] = r.value
                    positions[tp] = r.offset + 1
            for tp in todo:
                op = self.history.invoke("final-reader", "final_read", None, topic=tp[0], partition=tp[1])
                self.history.ok(op, sorted(seen[tp].items()))
                self.final[tp] = seen[tp]
                self.final_end[tp] = ends[tp]
