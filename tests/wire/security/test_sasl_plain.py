"""SASL PLAIN: the one token, checked against static users; every malformed shape refused."""
from __future__ import annotations

import pytest

from wire.security.sasl_common import SaslAuthenticationError
from wire.security.sasl_plain import PlainClient, PlainServer, static_users_check

USERS = static_users_check({"alice": "alice-secret", "admin": "admin-secret"})


def test_client_token_is_accepted():
    client, server = PlainClient("alice", "alice-secret"), PlainServer(USERS)
    assert client.initial() == b"\0alice\0alice-secret"
    assert server.respond(client.initial()) == b""
    assert server.complete and server.username == "alice"
    assert client.respond(b"") == b"" and client.complete


def test_authzid_equal_to_the_user_is_accepted():
    server = PlainServer(USERS)
    server.respond(b"alice\0alice\0alice-secret")
    assert server.username == "alice"


@pytest.mark.parametrize("token,message", [
    (b"\0alice\0wrong", "Invalid username or password"),
    (b"\0nobody\0alice-secret", "Invalid username or password"),
    (b"admin\0alice\0alice-secret", "authorization id"),
    (b"\0\0alice-secret", "username not specified"),
    (b"\0alice\0", "password not specified"),
    (b"alice-secret", "expected 3 tokens"),
    (b"\0a\0b\0c", "expected 3 tokens"),
    (b"", "expected 3 tokens"),
    (b"\0al\xffice\0pw", "not UTF-8"),
    (b"\0alice\0" + b"x" * 5000, "too long"),
])
def test_bad_tokens_fail_with_a_message(token, message):
    server = PlainServer(USERS)
    with pytest.raises(SaslAuthenticationError, match=message):
        server.respond(token)
    assert not server.complete and server.username is None


def test_second_token_is_refused():
    server = PlainServer(USERS)
    server.respond(b"\0alice\0alice-secret")
    with pytest.raises(SaslAuthenticationError):
        server.respond(b"\0alice\0alice-secret")
