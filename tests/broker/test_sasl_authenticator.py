"""The SASL phase of a Kafka connection on a SASL_PLAINTEXT listener, over real sockets with raw
frames: logins with each mechanism, every refusal Kafka gives, deadlines, KIP-368 sessions, and
malformed tokens at every step (the broker keeps serving others throughout)."""
from __future__ import annotations

import random

import pytest
import trio

from broker.broker_config import BrokerListener
from storage.listener_security import ListenerSecurity
from tests.broker import builders as B
from tests.broker.harness import RawClient, running_cluster
from wire.protocol import (
    AlterUserScramCredentialsRequest as Alter, ApiVersionsRequest, DescribeUserScramCredentialsRequest as Describe,
    SaslAuthenticateRequest, SaslHandshakeRequest,
)
from wire.security.sasl_config import SaslCredentials, SaslServerSettings, new_client
from wire.security.sasl_scram import HASHES, MECHANISM_IDS, salted_password

USERS = {"admin": "admin-secret", "alice": "alice-secret"}


def sasl_cluster(**settings):
    sasl = SaslServerSettings(mechanisms=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"), plain_users=USERS,
                              **settings)
    listener = BrokerListener("127.0.0.1", 0, ListenerSecurity("PLAINTEXT", "SASL_PLAINTEXT", sasl=sasl))
    return running_cluster(broker_overrides={"listeners": (listener,)})


async def login(port, mechanism="PLAIN", user="admin", password="admin-secret", *, version=2, client=None):
    """(client, last SaslAuthenticate response) after a full exchange (or its first failure)."""
    client = client or await RawClient.connect(port)
    hs = await client.call(SaslHandshakeRequest(mechanism=mechanism), 1)
    assert hs.error_code == 0, hs
    mech = new_client(SaslCredentials(mechanism, user, password), random.Random(1))
    token = mech.initial()
    while True:
        resp = await client.call(SaslAuthenticateRequest(auth_bytes=token), version)
        if resp.error_code:
            return client, resp
        token = mech.respond(resp.auth_bytes)
        if mech.complete:
            return client, resp


async def add_scram(port, user, password, mechanism, iterations=4096):
    admin, _ = await login(port)
    salt = b"0123456789abcdef"
    up = Alter.ScramCredentialUpsertion(name=user, mechanism=MECHANISM_IDS[mechanism], iterations=iterations, salt=salt,
                                        salted_password=salted_password(HASHES[mechanism], password, salt, iterations))
    return await admin.call(Alter(deletions=[], upsertions=[up]), 0)


async def test_plain_login_then_requests_are_served():
    async with sasl_cluster() as c:
        client, resp = await login(c.brokers[0].port)
        assert resp.error_code == 0 and resp.session_lifetime_ms == 0
        assert (await client.call(B.metadata(all_topics=True), 5)).brokers


async def test_before_login_only_api_versions_is_answered():
    async with sasl_cluster() as c:
        client = await RawClient.connect(c.brokers[0].port)
        versions = await client.call(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
        assert {k.api_key for k in versions.api_keys} >= {17, 36}
        await client.send(B.metadata(all_topics=True), 5)
        assert await client.is_closed()


async def test_unknown_mechanism_lists_the_enabled_ones_then_closes():
    async with sasl_cluster() as c:
        client = await RawClient.connect(c.brokers[0].port)
        resp = await client.call(SaslHandshakeRequest(mechanism="GSSAPI"), 1)
        assert resp.error_code == 33 and resp.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert await client.is_closed()


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
async def test_wrong_password_fails_with_a_message_then_closes(mechanism):
    async with sasl_cluster() as c:
        port = c.brokers[0].port
        if mechanism != "PLAIN":
            assert (await add_scram(port, "alice", "alice-secret", mechanism)).results[0].error_code == 0
        client, resp = await login(port, mechanism, "alice", "wrong")
        assert resp.error_code == 58 and "Invalid" in resp.error_message
        assert await client.is_closed()
        _, ok = await login(port, mechanism, "alice", "alice-secret")  # others are still served
        assert ok.error_code == 0


async def test_scram_users_are_managed_through_the_admin_apis():
    async with sasl_cluster() as c:
        port = c.brokers[0].port
        for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            assert (await add_scram(port, "bob", "bob-secret", mech, 8192)).results[0].error_code == 0
            _, resp = await login(port, mech, "bob", "bob-secret")
            assert resp.error_code == 0
        admin, _ = await login(port)
        described = await admin.call(Describe(users=None), 0)
        (bob,) = described.results
        assert bob.user == "bob" and [(i.mechanism, i.iterations) for i in bob.credential_infos] == [(1, 8192), (2, 8192)]
        missing = await admin.call(Describe(users=[Describe.UserName(name="carol")]), 0)
        assert missing.results[0].error_code == 91  # RESOURCE_NOT_FOUND
        bad = await add_scram(port, "carol", "pw", "SCRAM-SHA-256", iterations=100)
        assert bad.results[0].error_code == 93  # UNACCEPTABLE_CREDENTIAL
        gone = await admin.call(Alter(deletions=[Alter.ScramCredentialDeletion(name="bob", mechanism=1)], upsertions=[]), 0)
        assert gone.results[0].error_code == 0
        _, resp = await login(port, "SCRAM-SHA-256", "bob", "bob-secret")
        assert resp.error_code == 58


async def test_handshake_v0_takes_bare_tokens():
    async with sasl_cluster() as c:
        client = await RawClient.connect(c.brokers[0].port)
        assert (await client.call(SaslHandshakeRequest(mechanism="PLAIN"), 0)).error_code == 0
        token = b"\0alice\0alice-secret"
        await client.send_raw(len(token).to_bytes(4, "big") + token)
        assert await client.read_frame() == b""  # an empty challenge: done
        assert (await client.call(B.metadata(all_topics=True), 5)).brokers
        bad = await RawClient.connect(c.brokers[0].port)
        await bad.call(SaslHandshakeRequest(mechanism="PLAIN"), 0)
        await bad.send_raw(len(b"\0alice\0x").to_bytes(4, "big") + b"\0alice\0x")
        assert await bad.is_closed()


async def test_authenticate_without_handshake_is_an_illegal_state():
    async with sasl_cluster() as c:
        client = await RawClient.connect(c.brokers[0].port)
        resp = await client.call(SaslAuthenticateRequest(auth_bytes=b"\0admin\0admin-secret"), 2)
        assert resp.error_code == 34
        assert await client.is_closed()


async def test_a_silent_login_is_cut_at_the_deadline():
    async with sasl_cluster(handshake_timeout_ms=300) as c:
        client = await RawClient.connect(c.brokers[0].port)
        await client.call(SaslHandshakeRequest(mechanism="PLAIN"), 1)
        with trio.fail_after(5):
            assert await client.is_closed()
        _, ok = await login(c.brokers[0].port)  # a prompt login is unaffected
        assert ok.error_code == 0


async def test_session_lifetime_reauthentication_and_expiry():
    async with sasl_cluster(reauth_ms=600) as c:
        port = c.brokers[0].port
        client, resp = await login(port)
        assert resp.session_lifetime_ms == 600
        await trio.sleep(0.3)
        _, again = await login(port, client=client)  # KIP-368: log in again on the same connection
        assert again.error_code == 0 and again.session_lifetime_ms == 600
        await trio.sleep(0.4)  # past the first session, within the second
        assert (await client.call(B.metadata(all_topics=True), 5)).brokers
        _, other = await login(port, client=client, user="alice", password="alice-secret")
        assert other.error_code == 58 and "principal" in other.error_message
        assert await client.is_closed()
        expired, _ = await login(port)
        await trio.sleep(0.7)
        await expired.send(B.metadata(all_topics=True), 5)
        assert await expired.is_closed()


@pytest.mark.parametrize("tokens", [
    [b""], [b"\xff\xfe"], [b"x" * 10000], [b"n,,n=admin"], [b"p=x,,n=admin,r=abc"],
    [b"n,,n=alice,r=abc", b""], [b"n,,n=alice,r=abc", b"c=biws,r=abc,p=AAAA"],
    [b"n,,n=alice,r=abc", b"garbage"],
])
async def test_malformed_scram_tokens_fail_and_the_broker_keeps_serving(tokens):
    async with sasl_cluster() as c:
        port = c.brokers[0].port
        await add_scram(port, "alice", "alice-secret", "SCRAM-SHA-256")
        client = await RawClient.connect(port)
        await client.call(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), 1)
        for token in tokens:
            resp = await client.call(SaslAuthenticateRequest(auth_bytes=token), 1)
            if resp.error_code:
                break
        assert resp.error_code == 58
        assert await client.is_closed()
        _, ok = await login(port, "SCRAM-SHA-256", "alice", "alice-secret")
        assert ok.error_code == 0


async def test_a_large_frame_before_login_closes_the_connection():
    async with sasl_cluster(max_receive_size=1024) as c:
        client = await RawClient.connect(c.brokers[0].port)
        await client.send_raw((4096).to_bytes(4, "big") + b"\0" * 4096)
        assert await client.is_closed()
        client, resp = await login(c.brokers[0].port)  # after the login, ordinary frame sizes
        assert resp.error_code == 0
        assert (await client.call(B.metadata(*[f"t{i:04}" for i in range(200)], auto_create=False), 5)).topics
