"""SCRAM against the RFCs' example exchanges, round trips, and malformed messages at every step."""
from __future__ import annotations

import base64
import random

import pytest

from wire.security.sasl_common import SaslAuthenticationError
from wire.security.sasl_scram import (
    ScramClient, ScramServer, credential_from_password, escape_username, make_nonce, unescape_username,
)

# RFC 7677 section 3 (SCRAM-SHA-256) and RFC 5802 section 5 (SCRAM-SHA-1): user "user", password "pencil".
RFC_EXCHANGES = [
    ("SCRAM-SHA-256", "sha256", "rOprNGfwEbeRWgbNEkqO", "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
     "W22ZaJ0SNY7soEsUEjb6gQ==",
     "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=", "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="),
    ("SCRAM-SHA-1", "sha1", "fyko+d2lbbFgONRv9qkxdawL", "3rfcNHYJY1ZVvWVs7j", "QSXCR+Q6sek8bf92",
     "v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=", "rmF9pqV8S7suAoZWja4dJRkFsKQ="),
]


@pytest.mark.parametrize("mech,hash_name,cnonce,snonce,salt,proof,verifier", RFC_EXCHANGES)
def test_rfc_example_exchange_byte_for_byte(mech, hash_name, cnonce, snonce, salt, proof, verifier):
    cred = credential_from_password(hash_name, "pencil", base64.b64decode(salt), 4096)
    server = ScramServer(mech, {"user": cred}.get, snonce)
    client = ScramClient(mech, "user", "pencil", cnonce)

    first = client.initial()
    assert first == f"n,,n=user,r={cnonce}".encode()
    server_first = server.respond(first)
    assert server_first == f"r={cnonce}{snonce},s={salt},i=4096".encode()
    final = client.respond(server_first)
    assert final == f"c=biws,r={cnonce}{snonce},p={proof}".encode()
    server_final = server.respond(final)
    assert server_final == f"v={verifier}".encode()
    assert server.complete and server.username == "user"
    assert client.respond(server_final) == b"" and client.complete


def _exchange(mech, password_used, stored_password="secret", user="alice"):
    hash_name = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mech]
    rng = random.Random(7)
    cred = credential_from_password(hash_name, stored_password, b"salt-bytes-1234", 4096)
    server = ScramServer(mech, {user: cred}.get, make_nonce(rng))
    client = ScramClient(mech, user, password_used, make_nonce(rng))
    final = client.respond(server.respond(client.initial()))
    return server, client, final


@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_round_trip_and_wrong_password(mech):
    server, client, final = _exchange(mech, "secret")
    client.respond(server.respond(final))
    assert server.complete and client.complete and server.username == "alice"

    server, client, final = _exchange(mech, "not-the-secret")
    with pytest.raises(SaslAuthenticationError, match="Invalid user credentials"):
        server.respond(final)
    assert not server.complete


def test_unknown_user_fails_on_first_message():
    server = ScramServer("SCRAM-SHA-256", {}.get, "snonce")
    with pytest.raises(SaslAuthenticationError, match="Invalid user credentials"):
        server.respond(b"n,,n=nobody,r=abc")


def test_client_detects_a_server_that_does_not_know_the_credential():
    server, client, final = _exchange("SCRAM-SHA-256", "secret")
    server.respond(final)
    with pytest.raises(SaslAuthenticationError, match="server signature"):
        client.respond(b"v=" + base64.b64encode(b"\0" * 32))


def test_username_escaping():
    assert escape_username("a=b,c") == "a=3Db=2Cc"
    assert unescape_username("a=3Db=2Cc") == "a=b,c"
    with pytest.raises(SaslAuthenticationError):
        unescape_username("a=4Fb")


BAD_FIRST = [
    b"", b"\xff\xfe", b"x" * 5000, b"n", b"n,,", b"y,,n=user,r=abc", b"p=tls-unique,,n=user,r=abc",
    b"n,,r=abc,n=user", b"n,,n=,r=abc", b"n,,n=user,r=", b"n,,n=user", b"n,a=other,n=user,r=abc",
    b"n,,n=user,r=abc,tokenauth=true", b"n,,n=user,r=abc,junk", b"n,,n=us=er,r=abc",
]


@pytest.mark.parametrize("token", BAD_FIRST)
def test_malformed_client_first(token):
    cred = credential_from_password("sha256", "pw", b"salt", 4096)
    server = ScramServer("SCRAM-SHA-256", {"user": cred}.get, "snonce")
    with pytest.raises(SaslAuthenticationError):
        server.respond(token)
    with pytest.raises(SaslAuthenticationError):  # a failed exchange stays failed
        server.respond(b"n,,n=user,r=abc")


def _bad_finals(nonce: str):
    return [
        b"", b"\xff", b"c=biws,r=" + nonce.encode(), b"c=biws,r=wrong,p=AAAA",
        b"c=eSws,r=" + nonce.encode() + b",p=AAAA", b"c=!!,r=" + nonce.encode() + b",p=AAAA",
        b"c=biws,r=" + nonce.encode() + b",p=!!notbase64", b"c=biws,r=" + nonce.encode() + b",p=AAAA",
        b"r=" + nonce.encode() + b",c=biws,p=AAAA", b"x" * 5000,
    ]


@pytest.mark.parametrize("index", range(10))
def test_malformed_client_final(index):
    cred = credential_from_password("sha256", "pw", b"salt", 4096)
    server = ScramServer("SCRAM-SHA-256", {"user": cred}.get, "snonce")
    server.respond(b"n,,n=user,r=abc")
    with pytest.raises(SaslAuthenticationError):
        server.respond(_bad_finals("abcsnonce")[index])
    assert not server.complete


def test_a_third_message_is_refused():
    server, client, final = _exchange("SCRAM-SHA-256", "secret")
    server.respond(final)
    with pytest.raises(SaslAuthenticationError):
        server.respond(final)


@pytest.mark.parametrize("challenge", [
    b"", b"e=other-error", b"r=somebodyelse,s=c2FsdA==,i=4096", b"r={n}x,s=!!,i=4096",
    b"r={n}x,s=c2FsdA==,i=many", b"r={n}x,s=c2FsdA==,i=100000000", b"r={n},s=c2FsdA==,i=4096",
])
def test_client_refuses_malformed_server_first(challenge):
    client = ScramClient("SCRAM-SHA-256", "user", "pw", "cn")
    client.initial()
    with pytest.raises(SaslAuthenticationError):
        client.respond(challenge.replace(b"{n}", b"cn"))
