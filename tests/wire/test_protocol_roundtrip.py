"""Property tests: every message, every version: object -> bytes -> equal object -> same bytes."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tests.tools.protocol_strategies import message_strategy
from wire.errors import DecodeError
from wire.protocol import (
    REQUESTS, RESPONSES, ConsumerProtocolAssignment, ConsumerProtocolSubscription, decode_request,
    decode_response, encode_request, encode_response,
)

MESSAGES = [cls for table in (REQUESTS, RESPONSES) for cls in table.values()]
MESSAGES += [ConsumerProtocolSubscription, ConsumerProtocolAssignment]
CASES = [(cls, v) for cls in MESSAGES for v in range(cls.VERSIONS.lo, cls.VERSIONS.hi + 1)]
IDS = [f"{cls.__name__}-v{v}" for cls, v in CASES]
FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FRAMES = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize(("cls", "version"), CASES, ids=IDS)
@FAST
@given(data=st.data())
def test_encode_decode_roundtrip(cls, version, data):
    obj = data.draw(message_strategy(cls, version))
    encoded = obj.encode(version)
    decoded = cls.decode(encoded, version)
    assert decoded == obj
    assert decoded.encode(version) == encoded


@pytest.mark.parametrize(("cls", "version"), [c for c in CASES if c[0].KIND == "request"],
                         ids=[i for c, i in zip(CASES, IDS) if c[0].KIND == "request"])
@FRAMES
@given(data=st.data(), correlation_id=st.integers(-(1 << 31), (1 << 31) - 1),
       client_id=st.one_of(st.none(), st.text(max_size=10)))
def test_request_frames_roundtrip(cls, version, data, correlation_id, client_id):
    body = data.draw(message_strategy(cls, version))
    frame = encode_request(body, version, correlation_id, client_id)
    header, decoded = decode_request(frame[4:])
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == \
        (cls.API_KEY, version, correlation_id, client_id)
    assert decoded == body


@pytest.mark.parametrize(("cls", "version"), [c for c in CASES if c[0].KIND == "response"],
                         ids=[i for c, i in zip(CASES, IDS) if c[0].KIND == "response"])
@FRAMES
@given(data=st.data(), correlation_id=st.integers(-(1 << 31), (1 << 31) - 1))
def test_response_frames_roundtrip(cls, version, data, correlation_id):
    body = data.draw(message_strategy(cls, version))
    frame = encode_response(correlation_id, body, version)
    assert int.from_bytes(frame[:4], "big", signed=True) == len(frame) - 4
    got_id, decoded = decode_response(frame[4:], cls.API_KEY, version)
    assert got_id == correlation_id
    assert decoded == body


@pytest.mark.parametrize(("cls", "version"), CASES, ids=IDS)
@settings(max_examples=5, deadline=None)
@given(data=st.data())
def test_decoding_at_another_version_never_crashes(cls, version, data):
    obj = data.draw(message_strategy(cls, version))
    encoded = obj.encode(version)
    other = data.draw(st.integers(cls.VERSIONS.lo, cls.VERSIONS.hi))
    try:
        cls.decode(encoded, other)
    except DecodeError:
        pass
