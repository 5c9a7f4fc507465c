"""controller_mutation_rate on the controller (KIP-599): a token bucket per quota entity; strict
requests are refused THROTTLING_QUOTA_EXCEEDED while the bucket is in debt, permissive ones
are recorded and told the debt's refill time."""
from __future__ import annotations

import random

import pytest

from metadata.client_quotas import CONTROLLER_MUTATION_RATE, USER
from metadata.controller.mutation_quota import MutationQuotas, MutationRequester, TokenBucket
from metadata.controller.topics import CreatableTopic, NewPartitions, create_partitions, create_topics, delete_topics
from metadata.records import EntityPart
from metrics.sampled_stats import QuotaWindow
from tests.metadata.helpers import apply, cluster
from wire.error_codes import ErrorCode

QUOTAS = {(EntityPart(USER, None),): {CONTROLLER_MUTATION_RATE: 2.0}}  # every user: a bucket of 20, 2/s


def test_token_bucket_starts_full_goes_into_debt_and_refills_at_the_quota():
    bucket = TokenBucket()
    assert bucket.measure(2.0, 0.0) == 20.0  # burst: 10 s of 2/s
    assert bucket.take(2.0, 30, 0.0) == -10.0
    assert bucket.measure(2.0, 5.0) == 0.0
    assert bucket.measure(2.0, 60.0) == 20.0  # never above the burst


def test_strict_refuses_while_in_debt_and_permissive_records_and_throttles():
    quotas = MutationQuotas()
    strict = quotas.for_request(QUOTAS, MutationRequester("alice", "admin", strict=True), 0.0)
    assert strict.admit(25) is None  # the bucket had tokens: taken, 5 into debt
    assert strict.throttle_ms == 0
    assert strict.admit(1) == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    assert strict.throttle_ms == 2500  # 5 partitions of debt at 2/s
    later = quotas.for_request(QUOTAS, MutationRequester("alice", "other-client", strict=True), 2.5)
    assert later.admit(1) is None  # the debt refilled; the user's bucket is shared by its clients
    permissive = quotas.for_request(QUOTAS, MutationRequester("alice", "admin", strict=False), 2.5)
    assert permissive.admit(7) is None and permissive.throttle_ms == 4000  # 8 of debt at 2/s
    bob = quotas.for_request(QUOTAS, MutationRequester("bob", "admin", strict=True), 2.5)
    assert bob.admit(20) is None and bob.throttle_ms == 0  # another user, another bucket
    unlimited = quotas.for_request({}, MutationRequester("alice", "admin", strict=True), 2.5)
    assert unlimited.admit(10_000) is None


def test_the_bucket_holds_quota_window_num_minus_one_windows_of_the_quota():
    quotas = MutationQuotas(QuotaWindow.of_settings({"quota.window.num": "3", "quota.window.size.seconds": "2"}))
    first = quotas.for_request(QUOTAS, MutationRequester("alice", "admin", strict=True), 0.0)
    assert first.admit(9) is None  # a bucket of 2 windows of 2 s at 2/s: 8, so 1 into debt
    assert first.admit(1) == ErrorCode.THROTTLING_QUOTA_EXCEEDED and first.throttle_ms == 500


def test_stats_show_each_entitys_admitted_rate_tokens_and_throttles():
    quotas = MutationQuotas()
    who = MutationRequester("alice", "admin", strict=True)
    first = quotas.for_request(QUOTAS, who, 0.0)
    assert first.admit(25) is None and first.admit(1) == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    assert first.finish() == 2500
    second = quotas.for_request(QUOTAS, who, 3.0)
    assert second.admit(3) is None and second.finish() == 0  # the debt was refilled by then
    [stats] = quotas.stats(4.0)
    assert (stats.user, stats.client_id, stats.bound) == ("alice", "", 2.0)  # the user's shared bucket
    assert stats.rate == pytest.approx(28 / 10.0)  # 28 admitted (not the refused 1), over 10 windows at least
    assert stats.tokens == pytest.approx(0.0)  # -5 at 0 s, +6 (refill), -3, +2 (refill)
    assert stats.throttle_ms == 2500.0  # only throttled requests are averaged
    assert quotas.stats(4.0) == [stats]  # a scrape uses nothing


def test_topic_operations_refuse_what_a_strict_quota_does_not_admit():
    quotas = MutationQuotas()
    image = cluster(1)
    who = MutationRequester("alice", "admin", strict=True)
    quota = quotas.for_request(QUOTAS, who, 0.0)
    records, results = create_topics(image, [CreatableTopic("a", 15, 1), CreatableTopic("b", 10, 1),
                                             CreatableTopic("c", 1, 1)], rng=random.Random(0), quota=quota)
    assert [r.error for r in results] == [ErrorCode.NONE, ErrorCode.NONE, ErrorCode.THROTTLING_QUOTA_EXCEEDED]
    assert {r.name for r in records if type(r).__name__ == "Topic"} == {"a", "b"}
    assert quota.throttle_ms == 2500
    image = apply(image, records)
    _, grown = create_partitions(image, [NewPartitions("a", 16)], quota=quotas.for_request(QUOTAS, who, 1.0))
    assert grown == {"a": (ErrorCode.THROTTLING_QUOTA_EXCEEDED, "The throttling quota has been exceeded.")}
    removed, deleted = delete_topics(image, names=["a"], quota=quotas.for_request(QUOTAS, who, 1.0))
    assert removed == [] and deleted[0].error == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    removed, deleted = delete_topics(image, names=["a"], quota=quotas.for_request(QUOTAS, who, 2.5))
    assert len(removed) == 1 and deleted[0].error == ErrorCode.NONE
