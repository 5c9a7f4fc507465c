"""The trio driver of the transaction coordinator (broker.transactions) on `__transaction_state`:
broker.coordinator_driver.CoordinatorDriver plus the markers.

    driver = TxnDriver(broker)              # Broker builds one; handlers use broker.transactions

Markers: each MarkerRequest the coordinator hands back (a transaction that reached
PrepareCommit/PrepareAbort, or was found there by a load) is sent as WriteTxnMarkers to the
current leader of each of its partitions — written in place when this broker leads the
partition, else over a connection to the leader (broker.broker_link, one per broker, one
request at a time) — and retried every 100 ms until each partition answers NONE, its
topic is gone, or the transaction is no longer ours in that state. Kafka's
TransactionMarkerChannelManager does the same. The coordinator epoch a marker carries is
the leader epoch of the `__transaction_state` partition we serve.

KIP-890 part 1: a partition leader asks `verify` before the first transactional batch of
a producer's transaction there (broker.handlers.produce).

Settings (Kafka's names, node file): transaction.state.log.num.partitions (50),
transaction.state.log.replication.factor (3: exactly that many replicas; with fewer live
brokers the controller refuses the topic and FindCoordinator answers COORDINATOR_NOT_AVAILABLE
until enough are up, as Kafka does — a single-node cluster sets it to 1),
transaction.state.log.min.isr (2, at most the RF), transaction.state.log.segment.bytes,
transaction.max.timeout.ms (900000),
transaction.abort.timed.out.transaction.cleanup.interval.ms (10000),
transactional.id.expiration.ms (7 days),
transaction.remove.expired.transaction.cleanup.interval.ms (1 hour).
"""
from __future__ import annotations

import trio

from broker.broker_link import BrokerLink, open_link
from broker.controller_channel import CreatableTopic
from broker.coordinator_driver import CoordinatorDriver
from broker.group_settings import static_int
from broker.transactions import MarkerRequest, TransactionCoordinator, TxnConfig, TxnOutput, TxnState
from broker.txn_markers import write_markers
from wire.error_codes import ErrorCode
from wire.errors import DecodeError
from wire.protocol import AddPartitionsToTxnRequest, WriteTxnMarkersRequest

__all__ = ["TxnDriver", "TRANSACTION_STATE_TOPIC"]

TRANSACTION_STATE_TOPIC = "__transaction_state"
_MARKER_RETRY_S = 0.1
_MARKER_TIMEOUT_S = 30.0
_PREPARE = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
# Answers that end a marker's retries although nothing was written: the producer moved on
# (a newer epoch wrote there), so this transaction has nothing left to say on that partition.
_GIVE_UP = (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED, ErrorCode.TRANSACTION_COORDINATOR_FENCED)


class TxnDriver(CoordinatorDriver):
    name = "transaction-coordinator"
    topic = TRANSACTION_STATE_TOPIC

    def __init__(self, broker):
        static = broker.static
        config = TxnConfig(
            num_partitions=static_int(static, "transaction.state.log.num.partitions", 50, minimum=1),
            max_timeout_ms=static_int(static, "transaction.max.timeout.ms", 900_000, minimum=1),
            abort_check_interval_ms=static_int(
                static, "transaction.abort.timed.out.transaction.cleanup.interval.ms", 10_000, minimum=1),
            id_expiration_ms=static_int(static, "transactional.id.expiration.ms", 604_800_000, minimum=1),
            expiry_check_interval_ms=static_int(
                static, "transaction.remove.expired.transaction.cleanup.interval.ms", 3_600_000, minimum=1))
        super().__init__(broker, TransactionCoordinator(config), commit_timeout_ms=5_000)
        self.replication_factor = static_int(static, "transaction.state.log.replication.factor", 3, minimum=1)
        self.min_isr = static_int(static, "transaction.state.log.min.isr", 2, minimum=1)
        self.segment_bytes = static_int(static, "transaction.state.log.segment.bytes", 104_857_600, minimum=1)
        self._links: dict[int, BrokerLink] = {}
        self._link_locks: dict[int, trio.Lock] = {}

    def topic_spec(self) -> CreatableTopic:
        rf = self.replication_factor
        configs = {"cleanup.policy": "compact", "min.insync.replicas": str(max(1, min(self.min_isr, rf))),
                   "segment.bytes": str(self.segment_bytes), "compression.type": "uncompressed"}
        return CreatableTopic(TRANSACTION_STATE_TOPIC, self.coordinator.config.num_partitions, rf, configs=configs)

    def carry_out(self, out) -> None:
        super().carry_out(out)
        if isinstance(out, TxnOutput) and self._nursery is not None:
            for request in out.markers:
                self._nursery.start_soon(self._send_markers, request)

    # -- KIP-890 part 1 ------------------------------------------------------------------
    async def verify(self, transactional_id: str, producer_id: int, epoch: int, partition) -> ErrorCode:
        """Whether `partition` is in the producer's open transaction, asked of its coordinator
        (in place, or as AddPartitionsToTxn v4 verify_only over a broker link)."""
        error, reg = self.coordinator_for(transactional_id)
        if error != ErrorCode.NONE:
            return error
        if reg.leader == self.broker.node_id:
            return self.coordinator.verify_partitions(transactional_id, producer_id, epoch, [partition])[partition]
        A = AddPartitionsToTxnRequest
        body = A(transactions=[A.AddPartitionsToTxnTransaction(
            transactional_id=transactional_id, producer_id=producer_id, producer_epoch=epoch, verify_only=True,
            topics=[A.AddPartitionsToTxnTopic(name=partition[0], partitions=[partition[1]])])])
        response = await self._call(reg.leader, body, 4)
        if response is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if response.error_code != ErrorCode.NONE:
            return ErrorCode(response.error_code)
        for txn in response.results_by_transaction:
            for topic in txn.topic_results:
                for p in topic.results:
                    if (topic.name, p.partition_index) == tuple(partition):
                        return ErrorCode(p.error_code)
        return ErrorCode.UNKNOWN_SERVER_ERROR

    # -- markers -------------------------------------------------------------------------
    def _still_wanted(self, request: MarkerRequest) -> bool:
        txn = self.coordinator.txns.get(request.transactional_id)
        return (txn is not None and txn.producer_id == request.producer_id
                and txn.producer_epoch == request.producer_epoch and txn.state in _PREPARE)

    async def _send_markers(self, request: MarkerRequest) -> None:
        remaining = set(request.partitions)
        while remaining and self._still_wanted(request):
            coordinator_epoch = self._served.get(self.coordinator.partition_for(request.transactional_id), -1)
            by_leader: dict[int, list] = {}
            done = []
            for key in sorted(remaining):
                topic = self.image.topics_by_name.get(key[0])
                reg = None if topic is None else topic.partitions.get(key[1])
                if reg is None:
                    done.append(key)  # the partition is gone: nothing to mark
                elif reg.leader >= 0:
                    by_leader.setdefault(reg.leader, []).append(key)
            for leader in sorted(by_leader):
                results = await self._write(leader, request, coordinator_epoch, by_leader[leader])
                for key, error in results.items():
                    if error == ErrorCode.NONE:
                        done.append(key)
                    elif error in _GIVE_UP:
                        self.log.warning("marker of %s for %s-%d refused (%s); not retried",
                                         request.transactional_id, key[0], key[1], ErrorCode(error).name)
                        done.append(key)
            if done:
                remaining.difference_update(done)
                self.carry_out(self.coordinator.markers_written(
                    request.transactional_id, request.producer_id, request.producer_epoch, done, self.now()))
            if remaining:
                await self.env.sleep(_MARKER_RETRY_S)

    async def _write(self, leader: int, request: MarkerRequest, coordinator_epoch: int, partitions: list):
        if leader == self.broker.node_id:
            return await write_markers(self.broker, request.producer_id, request.producer_epoch, request.commit,
                                       coordinator_epoch, partitions, self.env.now() + _MARKER_TIMEOUT_S)
        W = WriteTxnMarkersRequest
        topics: dict[str, list[int]] = {}
        for topic, index in partitions:
            topics.setdefault(topic, []).append(index)
        body = W(markers=[W.WritableTxnMarker(
            producer_id=request.producer_id, producer_epoch=request.producer_epoch,
            transaction_result=request.commit, coordinator_epoch=coordinator_epoch,
            topics=[W.WritableTxnMarkerTopic(name=t, partition_indexes=ps) for t, ps in topics.items()])])
        response = await self._call(leader, body, 0)
        if response is None:
            return {}
        return {(t.name, p.partition_index): p.error_code
                for m in response.markers for t in m.topics for p in t.partitions}

    async def _call(self, broker_id: int, body, version: int):
        """One request to another broker over our link to it; None if it failed."""
        async with self._link_locks.setdefault(broker_id, trio.Lock()):
            try:
                link = await self._link(broker_id)
                return await link.call(body, version, _MARKER_TIMEOUT_S)
            except (OSError, trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError,
                    DecodeError) as exc:
                self.log.info("%s to broker %d failed: %s", type(body).__name__, broker_id, exc)
                link = self._links.pop(broker_id, None)
                if link is not None:
                    await link.aclose()
                return None

    async def _link(self, broker_id: int) -> BrokerLink:
        link = self._links.get(broker_id)
        if link is not None and self.env.now() < link.retire_at:
            return link
        if link is not None:
            del self._links[broker_id]
            await link.aclose()
        address = self.broker.broker_address(broker_id)
        if address is None:
            raise OSError(f"no address for broker {broker_id}")
        config = self.broker.config
        link = self._links[broker_id] = await open_link(
            self.env, address, client_id="transaction-markers", tls=config.inter_broker_tls,
            sasl=config.inter_broker_sasl, timeout_s=_MARKER_TIMEOUT_S)
        return link
