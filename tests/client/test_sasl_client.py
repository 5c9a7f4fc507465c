"""Our client logs in on a SASL listener (the real broker, tests/broker/harness.py): each
mechanism, a refused login as AuthenticationError (not retried), SCRAM users managed through
the admin API, and KIP-368 sessions: connections are retired before the broker would cut them."""
from __future__ import annotations

import pytest
import trio

from broker.broker_config import BrokerListener
from raftkafka.client.admin import Admin
from raftkafka.client.errors import AuthenticationError
from raftkafka.client.producer import Producer
from raftkafka.client.security import ClientSecurity
from storage.listener_security import ListenerSecurity
from tests.broker.harness import running_cluster
from wire.security.sasl_config import SaslCredentials, SaslServerSettings
from wire.security.sasl_scram import salted_password

ADMIN = ClientSecurity("SASL_PLAINTEXT", login=SaslCredentials("PLAIN", "admin", "admin-secret"))


def sasl_cluster(**settings):
    sasl = SaslServerSettings(mechanisms=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
                              plain_users={"admin": "admin-secret"}, **settings)
    listener = BrokerListener("127.0.0.1", 0, ListenerSecurity("PLAINTEXT", "SASL_PLAINTEXT", sasl=sasl))
    return running_cluster(broker_overrides={"listeners": (listener,)})


async def test_scram_user_added_through_admin_then_used():
    async with sasl_cluster() as cluster:
        async with Admin(cluster.env, cluster.bootstrap, security=ADMIN) as admin:
            salt = b"s" * 16
            results = await admin.alter_user_scram_credentials([
                ("bob", 1, 4096, salt, salted_password("sha256", "bob-pw", salt, 4096)),
                ("bob", 2, 4096, salt, salted_password("sha512", "bob-pw", salt, 4096))])
            assert results == {"bob": None}
            assert await admin.describe_user_scram_credentials(["bob"]) == {"bob": [(1, 4096), (2, 4096)]}
            await admin.create_topic("t", 1)
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            async with Producer(cluster.env, cluster.bootstrap, security=ClientSecurity("SASL_PLAINTEXT", login=SaslCredentials(mechanism, "bob", "bob-pw"))) as p:
                assert (await (await p.send("t", b"v"))).offset >= 0


@pytest.mark.parametrize("credentials, message", [
    (SaslCredentials("PLAIN", "admin", "wrong"), "Invalid username or password"),
    (SaslCredentials("SCRAM-SHA-256", "nobody", "x"), "Invalid user credentials"),
])
async def test_a_refused_login_is_an_authentication_error(credentials, message):
    async with sasl_cluster() as cluster:
        async with Admin(cluster.env, cluster.bootstrap, security=ClientSecurity("SASL_PLAINTEXT", login=credentials)) as admin:
            with pytest.raises(AuthenticationError, match=message), trio.fail_after(5):
                await admin.list_topics()


async def test_connections_are_retired_before_their_session_ends():
    async with sasl_cluster(reauth_ms=400) as cluster:
        async with Admin(cluster.env, cluster.bootstrap, security=ADMIN) as admin:
            first = await admin.cluster.any_connection()
            with trio.fail_after(10):
                for _ in range(12):  # 1.2 s: three session lifetimes, not one failed request
                    await admin.list_topics()
                    await trio.sleep(0.1)
            assert first.closed and (await admin.cluster.any_connection()) is not first
            assert first._closed  # not only retired: closed, once idle
