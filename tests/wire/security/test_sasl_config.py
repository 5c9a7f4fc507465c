"""SASL settings with Kafka's names: per-listener server settings, client and node logins."""
from __future__ import annotations

import pytest

from wire.security.sasl_config import SaslCredentials, client_credentials, node_credentials, server_settings

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="pw" user_admin="pw" user_bob="b";'


def lookup(values):
    return values.get


def test_listener_settings_and_defaults():
    s = server_settings("SASL_PLAINTEXT", lookup({"plain.sasl.jaas.config": JAAS,
                                                  "sasl.enabled.mechanisms": "plain, SCRAM-SHA-512",
                                                  "connections.max.reauth.ms": "60000"}))
    assert s.mechanisms == ("PLAIN", "SCRAM-SHA-512") and s.plain_users == {"admin": "pw", "bob": "b"}
    assert s.reauth_ms == 60000 and s.handshake_timeout_ms == 10000
    scram_only = server_settings("L", lookup({"sasl.enabled.mechanisms": "SCRAM-SHA-256"}))
    assert scram_only.mechanisms == ("SCRAM-SHA-256",) and scram_only.plain_users == {}


@pytest.mark.parametrize("values, message", [
    ({"sasl.enabled.mechanisms": "GSSAPI"}, "GSSAPI is not supported"),
    ({"sasl.enabled.mechanisms": " , "}, "no mechanism"),
    ({}, "no user_<name>"),
    ({"sasl.jaas.config": "broken"}, "plain.sasl.jaas.config"),
    ({"sasl.jaas.config": JAAS, "connections.max.reauth.ms": "soon"}, "connections.max.reauth.ms"),
    ({"sasl.jaas.config": JAAS, "sasl.handshake.timeout.ms": "-1"}, "sasl.handshake.timeout.ms"),
])
def test_bad_server_settings_name_the_setting(values, message):
    with pytest.raises(ValueError, match=message):
        server_settings("L", lookup(values))


def test_client_credentials_from_librdkafka_or_java_properties():
    assert client_credentials({"sasl.mechanism": "scram-sha-256", "sasl.username": "u", "sasl.password": "p"}) \
        == SaslCredentials("SCRAM-SHA-256", "u", "p")
    java = {"sasl.mechanism": "PLAIN", "sasl.jaas.config": JAAS}
    assert client_credentials(java) == SaslCredentials("PLAIN", "admin", "pw")
    with pytest.raises(ValueError, match="GSSAPI is not supported"):
        client_credentials({"sasl.username": "u", "sasl.password": "p"})  # Kafka's default mechanism
    with pytest.raises(ValueError, match="sasl.username"):
        client_credentials({"sasl.mechanism": "PLAIN"})


def test_node_credentials_come_from_the_mechanism_scoped_jaas_entry():
    scram = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="n" password="s";'
    creds = node_credentials("CONTROLLER", "sasl.mechanism.controller.protocol",
                             lookup({"sasl.mechanism.controller.protocol": "SCRAM-SHA-512",
                                     "scram-sha-512.sasl.jaas.config": scram, "sasl.jaas.config": JAAS}))
    assert creds == SaslCredentials("SCRAM-SHA-512", "n", "s")
    assert node_credentials("B", "m", lookup({"sasl.jaas.config": JAAS})) == SaslCredentials("PLAIN", "admin", "pw")
    with pytest.raises(ValueError, match="listener.name.b.plain.sasl.jaas.config: needs username and password"):
        node_credentials("B", "m", lookup({"sasl.jaas.config": 'x.Y required user_a="1";'}))
