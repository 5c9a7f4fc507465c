"""Divergence on fetch (Fetch v12+, broker.fetch_divergence): a leader answers a fetcher whose
last fetched epoch disagrees with its own log with the diverging epoch, and a follower with a
suffix its leader never had truncates it from that answer alone (no OffsetForLeaderEpoch)."""
from __future__ import annotations

import uuid
from types import SimpleNamespace

from broker.handlers.fetch import replica_topic_error
from broker.replica_fetcher import ReplicaFetcher
from storage.log.epoch_cache import UNDEFINED_EPOCH
from tests.broker import builders as B
from tests.broker.harness import RawClient, running_cluster
from tests.broker.test_replication import FAST, cut_off, heal, log_bytes, make_topic, part, produce, wait_for
from wire.error_codes import ErrorCode as E
from wire.protocol import FetchRequest as F


def _leader_epoch(c) -> int:
    return c.controller.image.topics_by_name["t"].partitions[0].leader_epoch


def _fetch(c, offset: int, last_fetched_epoch: int, *, by_id: bool) -> F:
    request = B.fetch([("t", 0, offset)], epoch=_leader_epoch(c))
    request.topics[0].partitions[0].last_fetched_epoch = last_fetched_epoch
    if by_id:
        request.topics[0].topic_id = c.controller.image.topics_by_name["t"].topic_id
    return request


async def test_a_follower_with_a_suffix_its_new_leader_never_had_truncates_it_from_the_fetch_answer(monkeypatch):
    asked_epoch_ends = []  # OffsetForLeaderEpoch asks: Kafka skips them when fetches carry epochs
    truncate = ReplicaFetcher._truncate

    async def no_offset_for_leader_epoch(self, link, states):
        with_epochs = [key for key, state in states.items()
                       if state.partition.log.epoch_cache.latest_epoch != UNDEFINED_EPOCH]
        if with_epochs:
            asked_epoch_ends.append(with_epochs)
            for key in with_epochs:
                self._delay(states.pop(key))
        await truncate(self, link, states)  # an empty log starts at its HW, with no request
    monkeypatch.setattr(ReplicaFetcher, "_truncate", no_offset_for_leader_epoch)

    async with running_cluster(3, static={**FAST, "replica.lag.time.max.ms": "30000"}) as c:
        await make_topic(c, replicas=(1, 2, 3))
        c1 = await RawClient.connect(c.broker(1).port)
        assert (await produce(c1, B.batch(2))).error_code == E.NONE  # [0, 2): everyone's
        first_epoch = _leader_epoch(c)
        await cut_off(c.broker(2), c)
        await cut_off(c.broker(3), c)
        assert (await produce(c1, B.batch(2), acks=1)).error_code == E.NONE  # [2, 4): only 1 has it
        await wait_for(lambda: part(c, 1).log_end_offset == 4)
        await c.stop(1)
        c.controller.fence(1)
        await c.settle()
        heal(c.broker(2))
        heal(c.broker(3))
        await wait_for(lambda: part(c, 2).is_leader)
        c2 = await RawClient.connect(c.broker(2).port)
        assert (await produce(c2, B.batch(1), acks=1)).error_code == E.NONE  # [2, 3) in the new epoch
        await wait_for(lambda: part(c, 2).high_watermark == 3)  # 3 has it (it had no suffix)

        # What broker 1 will send: offset 4 after records of the first epoch. Broker 2's copy of
        # that epoch ends at 2, so it answers that, with no records, by name (v12) or id (v13+).
        for version in (12, 16):
            answer = B.one_partition(await c2.call(_fetch(c, 4, first_epoch, by_id=version >= 13), version))
            assert answer.error_code == E.NONE and len(answer.records or b"") == 0
            assert (answer.diverging_epoch.epoch, answer.diverging_epoch.end_offset) == (first_epoch, 2)
        # A fetcher that agrees (or sends no epoch) is served as before.
        answer = B.one_partition(await c2.call(_fetch(c, 2, first_epoch, by_id=True), 16))
        assert answer.diverging_epoch.end_offset == -1 and len(answer.records) > 0
        answer = B.one_partition(await c2.call(_fetch(c, 0, -1, by_id=True), 16))
        assert answer.diverging_epoch.end_offset == -1 and len(answer.records) > 0

        await c.restart(1)
        await wait_for(lambda: part(c, 1).log_end_offset == 3 and part(c, 1).high_watermark == 3)
        assert log_bytes(c, 1, 3) == log_bytes(c, 2, 3)
        assert asked_epoch_ends == [] and c.broker(1).fetchers.fetchers[2].truncations >= 1


async def test_bad_divergence_fields_get_kafkas_answers():
    async with running_cluster(1) as c:
        await make_topic(c, replicas=(1,))
        client = await RawClient.connect(c.broker(1).port)
        assert (await produce(client, B.batch(2))).error_code == E.NONE
        epoch = _leader_epoch(c)
        # An epoch newer than any this leader has: it cannot say where it ended.
        answer = B.one_partition(await client.call(_fetch(c, 2, epoch + 5, by_id=True), 16))
        assert answer.error_code == E.OFFSET_OUT_OF_RANGE
        # Past the log end in the leader's own epoch: the fetcher has records this log lacks.
        answer = B.one_partition(await client.call(_fetch(c, 1 << 60, epoch, by_id=True), 16))
        assert (answer.diverging_epoch.epoch, answer.diverging_epoch.end_offset) == (epoch, 2)
        # A topic id that names no topic; the answer echoes it.
        request = _fetch(c, 0, epoch, by_id=True)
        request.topics[0].topic_id = request.topics[0].topic_id.__class__(int=12345)
        response = await client.call(request, 13)
        assert response.responses[0].topic_id.int == 12345
        assert B.one_partition(response).error_code == E.UNKNOWN_TOPIC_ID


def test_a_replica_of_an_older_topic_of_the_same_name_is_an_inconsistent_topic_id():
    old, new = uuid.UUID(int=1), uuid.UUID(int=2)

    def broker(replica_id):
        return SimpleNamespace(replicas=SimpleNamespace(get=lambda name, index: SimpleNamespace(topic_id=replica_id)),
                               metadata=SimpleNamespace(topic=lambda name: SimpleNamespace(topic_id=new)))
    assert replica_topic_error(broker(old), "t", 0, E.NOT_LEADER_OR_FOLLOWER) == E.INCONSISTENT_TOPIC_ID
    assert replica_topic_error(broker(new), "t", 0, E.NOT_LEADER_OR_FOLLOWER) == E.NOT_LEADER_OR_FOLLOWER
    assert replica_topic_error(broker(old), "t", 0, E.KAFKA_STORAGE_ERROR) == E.KAFKA_STORAGE_ERROR
