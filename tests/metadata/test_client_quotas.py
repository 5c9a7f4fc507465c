"""AlterClientQuotas as a pure controller function (Kafka's checks, per-entry results, records
only for changed keys, snapshots keep them) and DescribeClientQuotas' filters."""
from __future__ import annotations

import pytest

from metadata.client_quotas import QuotaFilterError, describe, ip_connection_rate
from metadata.controller.client_quotas import QuotaAlteration, QuotaOp, alter_client_quotas
from metadata.delta import MetadataDelta
from metadata.image import EMPTY_IMAGE
from metadata.records import ClientQuota, EntityPart as P
from metadata.snapshot import image_to_records
from wire.error_codes import ErrorCode as E

ALICE_APP = (P("client-id", "app"), P("user", "alice"))


def apply(image, records):
    delta = MetadataDelta(image)
    for rec in records:
        delta.replay(rec)
    return delta.apply()


def change(entity, *ops):
    return QuotaAlteration(tuple(entity), tuple(QuotaOp(*op) for op in ops))


def test_sets_and_removes_quotas_on_canonical_entities_and_snapshots_keep_them():
    records, results = alter_client_quotas(EMPTY_IMAGE, [
        change([("user", "alice"), ("client-id", "app")], ("producer_byte_rate", 5e6)),
        change([("user", None)], ("consumer_byte_rate", 1e6), ("request_percentage", 50.5))])
    assert results == [(E.NONE, None), (E.NONE, None)]
    image = apply(EMPTY_IMAGE, records)
    assert image.client_quotas == {ALICE_APP: {"producer_byte_rate": 5e6},
                                   (P("user", None),): {"consumer_byte_rate": 1e6, "request_percentage": 50.5}}
    assert apply(EMPTY_IMAGE, list(image_to_records(image))).client_quotas == image.client_quotas

    # the same value again, or removing what is not set: nothing to write
    records, results = alter_client_quotas(image, [
        change([("client-id", "app"), ("user", "alice")], ("producer_byte_rate", 5e6), ("consumer_byte_rate", 0, True))])
    assert (records, results) == ([], [(E.NONE, None)])
    records, _ = alter_client_quotas(image, [change([("user", None)], ("consumer_byte_rate", 0, True))])
    assert records == [ClientQuota((P("user", None),), "consumer_byte_rate", 0.0, remove=True)]
    assert apply(image, records).client_quotas[(P("user", None),)] == {"request_percentage": 50.5}


@pytest.mark.parametrize("entity, op, message", [
    ([], ("producer_byte_rate", 1), "Invalid empty client quota entity"),
    ([("group", "g")], ("producer_byte_rate", 1), "Unhandled client quota entity type: group"),
    ([("user", "a"), ("user", "b")], ("producer_byte_rate", 1), "duplicate entity entry user"),
    ([("user", "")], ("producer_byte_rate", 1), "Empty user not supported"),
    ([("ip", "1.2.3.4"), ("user", "a")], ("connection_creation_rate", 1), "IP entity should not be combined"),
    ([("ip", "not-an-ip")], ("connection_creation_rate", 1), "not a valid IP"),
    ([("user", "a")], ("bogus", 1), "Invalid configuration key bogus"),
    ([("user", "a")], ("connection_creation_rate", 1), "Invalid configuration key connection_creation_rate"),
    ([("ip", None)], ("producer_byte_rate", 1), "Invalid configuration key producer_byte_rate"),
    ([("user", "a")], ("producer_byte_rate", -5), "non-negative"),
    ([("user", "a")], ("request_percentage", float("nan")), "non-negative"),
    ([("user", "a")], ("producer_byte_rate", 1.5), "cannot be a fractional value"),
    ([("user", "a")], ("producer_byte_rate", 1e30), "too large for a LONG"),
])
def test_invalid_entries_fail_alone_with_invalid_request(entity, op, message):
    good = change([("client-id", "ok")], ("producer_byte_rate", 1))
    records, results = alter_client_quotas(EMPTY_IMAGE, [change(entity, op), good])
    assert results[0][0] == E.INVALID_REQUEST and message in results[0][1]
    assert results[1] == (E.NONE, None)
    assert records == [ClientQuota((P("client-id", "ok"),), "producer_byte_rate", 1.0)]


def test_validate_only_checks_and_writes_nothing():
    records, results = alter_client_quotas(EMPTY_IMAGE, [change([("user", "a")], ("producer_byte_rate", 1))],
                                           validate_only=True)
    assert (records, results) == ([], [(E.NONE, None)])


QUOTAS = {(P("user", "alice"),): {"q": 1.0}, (P("user", None),): {"q": 2.0}, ALICE_APP: {"q": 3.0},
          (P("client-id", "app"),): {"q": 4.0}, (P("ip", None),): {"connection_creation_rate": 5.0}}


@pytest.mark.parametrize("components, strict, expected", [
    ([], False, [1.0, 2.0, 3.0, 4.0, 5.0]),
    ([], True, []),
    ([("user", 0, "alice")], False, [1.0, 3.0]),
    ([("user", 0, "alice")], True, [1.0]),
    ([("user", 1, None)], True, [2.0]),
    ([("user", 2, None)], False, [1.0, 3.0]),  # any named user, not the default
    ([("user", 0, "alice"), ("client-id", 2, None)], True, [3.0]),
    ([("client-id", 0, "app")], False, [3.0, 4.0]),
])
def test_describe_filters_as_kafka(components, strict, expected):
    found = describe(QUOTAS, components, strict)
    assert sorted(v for _, values in found for v in values.values()) == expected


@pytest.mark.parametrize("components, code", [
    ([("", 0, "x")], E.INVALID_REQUEST),
    ([("user", 0, None)], E.INVALID_REQUEST),
    ([("user", 1, "x")], E.INVALID_REQUEST),
    ([("user", 0, "a"), ("user", 1, None)], E.INVALID_REQUEST),
    ([("ip", 2, None), ("user", 2, None)], E.INVALID_REQUEST),
    ([("group", 0, "g")], E.UNSUPPORTED_VERSION),
    ([("user", 7, None)], E.UNSUPPORTED_VERSION),
])
def test_describe_refuses_the_filters_kafka_refuses(components, code):
    with pytest.raises(QuotaFilterError) as refused:
        describe(QUOTAS, components, False)
    assert refused.value.code == code


def test_messages_quoting_a_longest_name_fit_an_int16_string():
    # A v0 request's string holds 32,767 bytes; the message quoting it must still fit one.
    name = "t" * 32767
    with pytest.raises(QuotaFilterError) as refused:
        describe(QUOTAS, [(name, 0, "x")], False)
    _, results = alter_client_quotas(EMPTY_IMAGE, [change([(name, "x")], ("consumer_byte_rate", 1.0, False))])
    for message in (refused.value.message, results[0][1]):
        assert message.startswith(("Unsupported entity type ttt", "Unhandled client quota entity type: ttt"))
        assert len(message.encode()) <= 1003


def test_an_address_takes_its_own_ip_quota_else_the_default_ip_quota():
    quotas = {(P("ip", "10.0.0.7"),): {"connection_creation_rate": 2.0},
              (P("ip", None),): {"connection_creation_rate": 50.0},
              (P("user", "alice"),): {"producer_byte_rate": 1e6}}
    assert ip_connection_rate(quotas, "10.0.0.7") == 2.0
    assert ip_connection_rate(quotas, "10.0.0.8") == 50.0
    assert ip_connection_rate({}, "10.0.0.8") is None
