"""Transactions served by real brokers (in-process, raw protocol, two brokers): the
coordinator found with key type TRANSACTION, KIP-890's verification of a transactional write
(in place and across brokers), the last stable offset, aborted transactions in
read_committed fetches, TxnOffsetCommit offsets that count only once committed, and the
admin's DescribeTransactions / ListTransactions / DescribeProducers."""
from __future__ import annotations

import trio

from broker.group_settings import OFFSETS_TOPIC
from broker.txn_driver import TRANSACTION_STATE_TOPIC
from tests.broker.builders import fetch, list_offsets, produce
from tests.broker.harness import RawClient, running_cluster
from tests.broker.test_groups_broker import GROUPS, commit as simple_commit, coordinator_of, fetch_offsets, make_topic
from wire.batch_header import iter_batches
from wire.error_codes import ErrorCode as E
from wire.protocol import (
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, DescribeProducersRequest, DescribeTransactionsRequest,
    EndTxnRequest, FindCoordinatorRequest, InitProducerIdRequest, ListTransactionsRequest, TxnOffsetCommitRequest,
)
from wire.records import SimpleRecord, build_batch

STATIC = {**GROUPS, "transaction.state.log.num.partitions": "4", "transaction.state.log.replication.factor": "1"}
TX = "tx-1"
READ_COMMITTED = 1
LATEST = -1


async def until(call, ok=lambda r: True, retry=(E.COORDINATOR_NOT_AVAILABLE, E.COORDINATOR_LOAD_IN_PROGRESS,
                                              E.NOT_COORDINATOR, E.CONCURRENT_TRANSACTIONS), timeout=10.0):
    with trio.fail_after(timeout):
        while True:
            response = await call()
            if getattr(response, "error_code", E.NONE) not in retry and ok(response):
                return response
            await trio.sleep(0.02)


async def coordinator(c) -> RawClient:
    any_broker = await RawClient.connect(c.broker(1).port)
    found = await until(lambda: any_broker.call(FindCoordinatorRequest(key=TX, key_type=1), 1))
    await any_broker.aclose()
    assert found.error_code == E.NONE
    return await RawClient.connect(found.port)


async def transactional_producer(c) -> tuple[RawClient, int, int]:
    """A connection to TX's coordinator and the producer id and epoch InitProducerId gave."""
    coord = await coordinator(c)
    init = await until(lambda: coord.call(InitProducerIdRequest(transactional_id=TX, transaction_timeout_ms=60_000), 1))
    assert init.error_code == E.NONE
    return coord, init.producer_id, init.producer_epoch


def txn_batch(pid, epoch, seq, *values):
    return build_batch([SimpleRecord(None, v) for v in values], producer_id=pid, producer_epoch=epoch,
                       base_sequence=seq, transactional=True)


def txn_produce(topic, partition, records):
    request = produce(topic, partition, records, acks=-1)
    request.transactional_id = TX
    return request


def add_partitions(pid, epoch, topic, *partitions):
    A = AddPartitionsToTxnRequest
    return A(transactional_id=TX, producer_id=pid, producer_epoch=epoch,
             topics=[A.V3AndBelowTopic(name=topic, partitions=list(partitions))])


async def leader_client(c, topic, partition):
    leader = c.controller.image.topics_by_name[topic].partitions[partition].leader
    return await RawClient.connect(c.broker(leader).port)


async def test_writes_are_verified_and_read_committed_stops_at_open_transactions():
    async with running_cluster(2, static=STATIC) as c:
        await make_topic(c, "t", partitions=2)
        coord, pid, epoch = await transactional_producer(c)
        assert len(c.controller.image.topics_by_name[TRANSACTION_STATE_TOPIC].partitions) == 4
        assert pid >= 0 and epoch == 0
        leaders = [await leader_client(c, "t", p) for p in (0, 1)]
        # Outside the transaction (KIP-890): refused, whichever broker leads the partition.
        for p, client in enumerate(leaders):
            refused = await client.call(txn_produce("t", p, txn_batch(pid, epoch, 0, b"early")), 7)
            assert refused.responses[0].partition_responses[0].error_code == E.INVALID_TXN_STATE
        added = await coord.call(add_partitions(pid, epoch, "t", 0, 1), 1)
        assert [r.error_code for t in added.results for r in t.results] == [E.NONE, E.NONE]
        base = {}
        for p, client in enumerate(leaders):
            await client.call(produce("t", p, build_batch([SimpleRecord(None, b"plain")]), acks=-1), 7)
            written = await client.call(txn_produce("t", p, txn_batch(pid, epoch, 0, b"a", b"b")), 7)
            answer = written.responses[0].partition_responses[0]
            assert answer.error_code == E.NONE
            base[p] = answer.base_offset
            lso = await client.call(list_offsets("t", p, LATEST, isolation_level=READ_COMMITTED), 2)
            assert lso.topics[0].partitions[0].offset == base[p]  # the open transaction's first offset
            hw = await client.call(list_offsets("t", p, LATEST), 2)
            assert hw.topics[0].partitions[0].offset == base[p] + 2
        ended = await coord.call(EndTxnRequest(transactional_id=TX, producer_id=pid, producer_epoch=epoch,
                                               committed=False), 1)
        assert ended.error_code == E.NONE
        for p, client in enumerate(leaders):
            # The ABORT marker lands at base + 2; then the LSO is the log end.
            await until(lambda: client.call(list_offsets("t", p, LATEST, isolation_level=READ_COMMITTED), 2),
                        ok=lambda r: r.topics[0].partitions[0].offset == base[p] + 3)
            read = (await client.call(fetch([("t", p, 0)], isolation_level=READ_COMMITTED), 11)).responses[0]
            part = read.partitions[0]
            assert [(a.producer_id, a.first_offset) for a in part.aborted_transactions] == [(pid, base[p])]
            headers = [h for _, h in iter_batches(bytes(part.records))]
            assert [h.is_control for h in headers] == [False, False, True]
            assert part.last_stable_offset == base[p] + 3
        # The same producer, still at its epoch, may start the next transaction; an older epoch may not.
        again = await until(lambda: coord.call(add_partitions(pid, epoch, "t", 0), 1),
                            ok=lambda r: r.results[0].results[0].error_code != E.CONCURRENT_TRANSACTIONS)
        assert again.results[0].results[0].error_code == E.NONE
        stale = await coord.call(add_partitions(pid, epoch - 1, "t", 0), 1)
        assert stale.results[0].results[0].error_code == E.INVALID_PRODUCER_EPOCH  # v1 predates PRODUCER_FENCED


async def test_txn_offset_commits_count_only_once_the_transaction_commits():
    async with running_cluster(2, static=STATIC) as c:
        await make_topic(c, "t", partitions=1)
        coord, pid, epoch = await transactional_producer(c)
        added = await until(lambda: coord.call(AddOffsetsToTxnRequest(
            transactional_id=TX, producer_id=pid, producer_epoch=epoch, group_id="g"), 1))
        assert added.error_code == E.NONE
        T = TxnOffsetCommitRequest
        groups_client, group_node = await coordinator_of(c, "g")
        commit = T(transactional_id=TX, group_id="g", producer_id=pid, producer_epoch=epoch, topics=[
            T.TxnOffsetCommitRequestTopic(name="t", partitions=[T.TxnOffsetCommitRequestPartition(
                partition_index=0, committed_offset=42, committed_leader_epoch=-1, committed_metadata="m")])])
        result = await until(lambda: groups_client.call(commit, 2),
                             ok=lambda r: r.topics[0].partitions[0].error_code not in (
                                 E.COORDINATOR_LOAD_IN_PROGRESS, E.NOT_COORDINATOR))
        assert result.topics[0].partitions[0].error_code == E.NONE
        before = await groups_client.call(fetch_offsets("g", {"t": [0]}), 3)
        assert before.topics[0].partitions[0].committed_offset == -1  # pending: not visible yet
        stable = fetch_offsets("g", {"t": [0]})
        stable.require_stable = True  # v7 (KIP-447): a pending offset is unstable, not absent
        unstable = (await groups_client.call(stable, 7)).topics[0].partitions[0]
        assert (unstable.error_code, unstable.committed_offset) == (E.UNSTABLE_OFFSET_COMMIT, -1)
        assert (await groups_client.call(stable, 6)).topics[0].partitions[0].error_code == E.NONE  # not asked
        ended = await coord.call(EndTxnRequest(transactional_id=TX, producer_id=pid, producer_epoch=epoch,
                                               committed=True), 1)
        assert ended.error_code == E.NONE
        after = await until(lambda: groups_client.call(fetch_offsets("g", {"t": [0]}), 3),
                            ok=lambda r: r.topics[0].partitions[0].committed_offset == 42)
        assert after.topics[0].partitions[0].metadata == "m"
        settled = (await groups_client.call(stable, 7)).topics[0].partitions[0]
        assert (settled.error_code, settled.committed_offset) == (E.NONE, 42)
        # Next transaction: its offset is written, then a plain commit of the same partition; the
        # later record wins when the transaction commits (and after a reload of the partition).
        again = await until(lambda: coord.call(AddOffsetsToTxnRequest(
            transactional_id=TX, producer_id=pid, producer_epoch=epoch, group_id="g"), 1))
        assert again.error_code == E.NONE
        commit.topics[0].partitions[0].committed_offset = 60
        assert (await groups_client.call(commit, 2)).topics[0].partitions[0].error_code == E.NONE
        plain = await groups_client.call(simple_commit("g", {("t", 0): 50}), 7)
        assert plain.topics[0].partitions[0].error_code == E.NONE
        ended = await coord.call(EndTxnRequest(transactional_id=TX, producer_id=pid, producer_epoch=epoch,
                                               committed=True), 1)
        assert ended.error_code == E.NONE
        await until(lambda: coord.call(DescribeTransactionsRequest(transactional_ids=[TX]), 0),
                    ok=lambda r: r.transaction_states[0].transaction_state == "CompleteCommit")
        final = await groups_client.call(fetch_offsets("g", {"t": [0]}), 3)
        assert final.topics[0].partitions[0].committed_offset == 50
        # The loader replays the same log to the same answer.
        driver = c.broker(group_node).groups
        index = driver.coordinator.partition_for("g")
        driver._unload(index)
        driver._served[index] = c.controller.image.topics_by_name[OFFSETS_TOPIC].partitions[index].leader_epoch
        driver.coordinator.begin_loading(index)
        await driver._load(index, driver._served[index])
        reloaded = await until(lambda: groups_client.call(fetch_offsets("g", {"t": [0]}), 3))
        assert reloaded.topics[0].partitions[0].committed_offset == 50


async def test_describe_and_list_transactions_and_producers():
    async with running_cluster(1, static=STATIC) as c:
        await make_topic(c, "t", partitions=1)
        coord, pid, epoch = await transactional_producer(c)
        await coord.call(add_partitions(pid, epoch, "t", 0), 1)
        written = await coord.call(txn_produce("t", 0, txn_batch(pid, epoch, 0, b"x")), 7)
        start = written.responses[0].partition_responses[0].base_offset
        [described] = (await coord.call(DescribeTransactionsRequest(transactional_ids=[TX]), 0)).transaction_states
        assert (described.error_code, described.transaction_state, described.producer_id) == (E.NONE, "Ongoing", pid)
        assert [(t.topic, t.partitions) for t in described.topics] == [("t", [0])]
        [unknown] = (await coord.call(DescribeTransactionsRequest(transactional_ids=["nope"]), 0)).transaction_states
        assert unknown.error_code in (E.TRANSACTIONAL_ID_NOT_FOUND, E.NOT_COORDINATOR)
        listed = await coord.call(ListTransactionsRequest(state_filters=["Ongoing", "Bogus"], producer_id_filters=[]), 1)
        assert [(t.transactional_id, t.transaction_state) for t in listed.transaction_states] == [(TX, "Ongoing")]
        assert listed.unknown_state_filters == ["Bogus"]
        long_open = await coord.call(ListTransactionsRequest(state_filters=[], producer_id_filters=[pid],
                                                             duration_filter=3_600_000), 1)
        assert long_open.transaction_states == []
        producers = await coord.call(DescribeProducersRequest(topics=[
            DescribeProducersRequest.TopicRequest(name="t", partition_indexes=[0])]), 0)
        [state] = producers.topics[0].partitions[0].active_producers
        assert (state.producer_id, state.producer_epoch, state.current_txn_start_offset) == (pid, epoch, start)


async def test_transaction_log_is_not_created_with_fewer_brokers_than_its_replication_factor():
    """As Kafka: transaction.state.log.replication.factor (3 by default) is never lowered to the
    brokers alive; FindCoordinator answers COORDINATOR_NOT_AVAILABLE until there are enough."""
    static = {k: v for k, v in STATIC.items() if k != "transaction.state.log.replication.factor"}
    async with running_cluster(2, static=static) as c:
        client = await RawClient.connect(c.broker(1).port)
        for _ in range(5):
            found = await client.call(FindCoordinatorRequest(key=TX, key_type=1), 1)
            assert found.error_code == E.COORDINATOR_NOT_AVAILABLE
            await trio.sleep(0.02)
        assert TRANSACTION_STATE_TOPIC not in c.controller.image.topics_by_name
