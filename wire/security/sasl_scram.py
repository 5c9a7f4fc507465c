"""SASL SCRAM (RFC 5802, RFC 7677): server and client as sans-IO state machines.

The exchange is two round trips:

    client-first   n,,n=<user>,r=<client nonce>
    server-first   r=<client nonce><server nonce>,s=<base64 salt>,i=<iterations>
    client-final   c=biws,r=<nonce>,p=<base64 ClientProof>
    server-final   v=<base64 ServerSignature>

The server holds only a `ScramCredential` (salt, iterations, StoredKey,
ServerKey): enough to verify a proof, never enough to log in. Hashing is the
standard library's (`hashlib.pbkdf2_hmac` for Hi, `hmac` for HMAC). As in
Kafka, channel binding is not offered (gs2 flag "n" only), an authzid must
name the user itself, and the delegation-token extension is refused.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import random
from dataclasses import dataclass
from typing import Callable

from wire.security.sasl_common import SCRAM_SHA_256, SCRAM_SHA_512, SaslAuthenticationError

__all__ = [
    "ScramCredential", "ScramServer", "ScramClient", "HASHES", "MECHANISM_IDS", "MECHANISM_NAMES", "MIN_ITERATIONS", "MAX_ITERATIONS",
    "salted_password", "credential_from_password", "credential_from_salted", "make_nonce",
    "escape_username", "unescape_username",
]

# SCRAM-SHA-1 is RFC 5802's own example (its test vector runs through this code);
# it is never enabled on a listener (sasl_common.MECHANISMS, as in Kafka).
HASHES = {SCRAM_SHA_256: "sha256", SCRAM_SHA_512: "sha512", "SCRAM-SHA-1": "sha1"}
# Kafka's ScramMechanism type ids, as the metadata records and the admin APIs carry them.
MECHANISM_IDS = {SCRAM_SHA_256: 1, SCRAM_SHA_512: 2}
MECHANISM_NAMES = {v: k for k, v in MECHANISM_IDS.items()}
MIN_ITERATIONS = 4096  # Kafka's ScramMechanism minimum
MAX_ITERATIONS = 16384  # Kafka refuses more in AlterUserScramCredentials
MAX_MESSAGE = 4096  # any honest SCRAM message is a few hundred bytes
_INVALID = "Authentication failed: Invalid user credentials"


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes


def _hmac(hash_name: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, hash_name).digest()


def salted_password(hash_name: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) of RFC 5802 is PBKDF2 with HMAC and one block."""
    return hashlib.pbkdf2_hmac(hash_name, password.encode("utf-8"), salt, iterations)


def credential_from_salted(hash_name: str, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    client_key = _hmac(hash_name, salted, b"Client Key")
    return ScramCredential(
        salt=salt, iterations=iterations,
        stored_key=hashlib.new(hash_name, client_key).digest(),
        server_key=_hmac(hash_name, salted, b"Server Key"),
    )


def credential_from_password(hash_name: str, password: str, salt: bytes, iterations: int) -> ScramCredential:
    return credential_from_salted(hash_name, salted_password(hash_name, password, salt, iterations), salt, iterations)


def make_nonce(rng: random.Random) -> str:
    """32 random bytes, base64: printable and free of ',' as the RFC requires."""
    return base64.b64encode(rng.getrandbits(256).to_bytes(32, "big")).decode("ascii")


def escape_username(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def unescape_username(saslname: str) -> str:
    rest = saslname.replace("=2C", "").replace("=3D", "")
    if "=" in rest or "," in rest:
        raise SaslAuthenticationError("Invalid SCRAM user name encoding")
    return saslname.replace("=2C", ",").replace("=3D", "=")


def _attributes(text: str, expected: str, what: str) -> list[str]:
    """Split `k=v,...`; the first len(expected) keys must be `expected` in order."""
    parts = text.split(",")
    if len(parts) < len(expected):
        raise SaslAuthenticationError(f"Invalid SCRAM {what}")
    values = []
    for key, part in zip(expected, parts):
        if len(part) < 2 or part[0] != key or part[1] != "=":
            raise SaslAuthenticationError(f"Invalid SCRAM {what}")
        values.append(part[2:])
    return values + parts[len(expected):]


def _decode(token: bytes, what: str) -> str:
    if len(token) > MAX_MESSAGE:
        raise SaslAuthenticationError(f"Invalid SCRAM {what}: too long")
    try:
        return bytes(token).decode("utf-8")
    except UnicodeDecodeError:
        raise SaslAuthenticationError(f"Invalid SCRAM {what}: not UTF-8") from None


def _b64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise SaslAuthenticationError(f"Invalid SCRAM {what}: bad base64") from None


class ScramServer:
    """One server-side exchange; `lookup(username)` returns the user's credential or None."""

    def __init__(self, mechanism: str, lookup: Callable[[str], ScramCredential | None], nonce: str):
        if mechanism not in HASHES:
            raise ValueError(f"{mechanism} is not a SCRAM mechanism")
        self.mechanism = mechanism
        self._hash = HASHES[mechanism]
        self._lookup = lookup
        self._server_nonce = nonce
        self._step = 0
        self.complete = False
        self.username: str | None = None

    def respond(self, token: bytes) -> bytes:
        step, self._step = self._step, -1  # any failure leaves the exchange unusable
        if step == 0:
            reply = self._client_first(_decode(token, "client first message"))
        elif step == 1:
            reply = self._client_final(_decode(token, "client final message"))
        else:
            raise SaslAuthenticationError("Authentication failed: unexpected SCRAM message")
        self._step = step + 1
        return reply

    def _client_first(self, text: str) -> bytes:
        flag, sep, rest = text.partition(",")
        authzid, sep2, bare = rest.partition(",")
        if not sep or not sep2:
            raise SaslAuthenticationError("Invalid SCRAM client first message")
        if flag != "n":
            raise SaslAuthenticationError("Invalid SCRAM client first message: channel binding is not supported")
        saslname, client_nonce, *extensions = _attributes(bare, "nr", "client first message")
        username = unescape_username(saslname)
        if not username or not client_nonce:
            raise SaslAuthenticationError("Invalid SCRAM client first message")
        if authzid and authzid != f"a={saslname}":
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username")
        for ext in extensions:
            key, eq, value = ext.partition("=")
            if not eq or not key:
                raise SaslAuthenticationError("Invalid SCRAM client first message: bad extension")
            if key == "tokenauth" and value.lower() == "true":
                raise SaslAuthenticationError("Authentication failed: delegation tokens are not supported")
        credential = self._lookup(username)
        if credential is None:
            raise SaslAuthenticationError(_INVALID)
        self._credential = credential
        self._gs2_header = f"{flag},{authzid},"
        self._nonce = client_nonce + self._server_nonce
        self._client_first_bare = bare
        self.username = username
        salt = base64.b64encode(credential.salt).decode("ascii")
        self._server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        return self._server_first.encode("ascii")

    def _client_final(self, text: str) -> bytes:
        without_proof, sep, proof_part = text.rpartition(",p=")
        if not sep:
            raise SaslAuthenticationError("Invalid SCRAM client final message")
        channel, nonce, *_extensions = _attributes(without_proof, "cr", "client final message")
        if _b64(channel, "channel binding") != self._gs2_header.encode("utf-8"):
            raise SaslAuthenticationError("Invalid SCRAM client final message: channel binding mismatch")
        if nonce != self._nonce:
            raise SaslAuthenticationError("Invalid SCRAM client final message: nonce mismatch")
        proof = _b64(proof_part, "client proof")
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode("utf-8")
        cred = self._credential
        signature = _hmac(self._hash, cred.stored_key, auth_message)
        if len(proof) != len(signature):
            raise SaslAuthenticationError(_INVALID)
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not hmac.compare_digest(hashlib.new(self._hash, client_key).digest(), cred.stored_key):
            raise SaslAuthenticationError(_INVALID)
        self.complete = True
        server_signature = _hmac(self._hash, cred.server_key, auth_message)
        return b"v=" + base64.b64encode(server_signature)


class ScramClient:
    """One client-side exchange; verifies the server's signature at the end."""

    def __init__(self, mechanism: str, username: str, password: str, nonce: str):
        if mechanism not in HASHES:
            raise ValueError(f"{mechanism} is not a SCRAM mechanism")
        self.mechanism = mechanism
        self._hash = HASHES[mechanism]
        self._password = password
        self._nonce = nonce
        self._bare = f"n={escape_username(username)},r={nonce}"
        self._step = 0
        self.complete = False

    def initial(self) -> bytes:
        return ("n,," + self._bare).encode("utf-8")

    def respond(self, challenge: bytes) -> bytes:
        step, self._step = self._step, -1
        if step == 0:
            reply = self._server_first(_decode(challenge, "server first message"))
        elif step == 1:
            reply = self._server_final(_decode(challenge, "server final message"))
        else:
            raise SaslAuthenticationError("unexpected SCRAM message from the server")
        self._step = step + 1
        return reply

    def _server_first(self, text: str) -> bytes:
        if text.startswith("e="):
            raise SaslAuthenticationError(f"SCRAM server error: {text[2:]}")
        nonce, salt_text, iterations_text, *_ = _attributes(text, "rsi", "server first message")
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise SaslAuthenticationError("SCRAM server nonce does not extend the client nonce")
        try:
            iterations = int(iterations_text)
        except ValueError:
            raise SaslAuthenticationError("Invalid SCRAM server first message: iterations") from None
        if not 1 <= iterations <= MAX_ITERATIONS:
            raise SaslAuthenticationError(f"SCRAM server asked for {iterations} iterations")
        salted = salted_password(self._hash, self._password, _b64(salt_text, "salt"), iterations)
        client_key = _hmac(self._hash, salted, b"Client Key")
        stored_key = hashlib.new(self._hash, client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._bare},{text},{without_proof}".encode("utf-8")
        signature = _hmac(self._hash, stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        self._expected_server_signature = _hmac(
            self._hash, _hmac(self._hash, salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode('ascii')}".encode("ascii")

    def _server_final(self, text: str) -> bytes:
        if text.startswith("e="):
            raise SaslAuthenticationError(f"SCRAM server error: {text[2:]}")
        (verifier, *_) = _attributes(text, "v", "server final message")
        if not hmac.compare_digest(_b64(verifier, "server signature"), self._expected_server_signature):
            raise SaslAuthenticationError("SCRAM server signature is wrong: the server does not know the credential")
        self.complete = True
        return b""
