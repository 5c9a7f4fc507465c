"""SCRAM credentials on the command line, in kafka-configs' and kafka-storage's syntax.

    SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]
    SCRAM-SHA-256=[name=admin,password=admin-secret]          (format --add-scram)

The salt is random (32 bytes) unless given as `salt=<base64>`, iterations default to 4096 (Kafka's
default), and the salted password is computed here: only it, never the password, leaves the
command (AlterUserScramCredentials carries the salted password, as in Kafka).
"""
from __future__ import annotations

import base64
import binascii
import secrets
from dataclasses import dataclass

from raftkafka.node.config import ConfigError
from wire.security.sasl_scram import (
    HASHES, MAX_ITERATIONS, MECHANISM_IDS, MIN_ITERATIONS, salted_password,
)

__all__ = ["ScramArg", "ScramArgError", "parse_scram_args", "DEFAULT_ITERATIONS"]

DEFAULT_ITERATIONS = 4096


class ScramArgError(ConfigError):
    """str(e) is the one line to print."""


@dataclass(frozen=True)
class ScramArg:
    mechanism: str
    name: str | None
    iterations: int
    salt: bytes
    salted_password: bytes

    @property
    def mechanism_id(self) -> int:
        return MECHANISM_IDS[self.mechanism]


def _entries(text: str):
    """`MECH=[k=v,...],MECH=[...]` -> [(MECH, {k: v})]."""
    out, rest = [], text.strip()
    while rest:
        mech, eq, after = rest.partition("=[")
        body, close, rest = after.partition("]")
        if not eq or not close:
            raise ScramArgError(f"{text!r}: expected MECHANISM=[key=value,...]")
        pairs = {}
        for item in [i for i in body.split(",") if i.strip()]:
            key, sep, value = item.partition("=")
            if not sep:
                raise ScramArgError(f"{text!r}: {item!r} is not key=value")
            pairs[key.strip().lower()] = value
        out.append((mech.strip().upper(), pairs))
        rest = rest.strip()
        if rest.startswith(","):
            rest = rest[1:].strip()
        elif rest:
            raise ScramArgError(f"{text!r}: expected ',' between mechanisms")
    return out


def parse_scram_args(text: str, *, name_required: bool) -> list[ScramArg]:
    out = []
    for mech, pairs in _entries(text):
        if mech not in MECHANISM_IDS:
            raise ScramArgError(f"{mech} is not a SCRAM mechanism (SCRAM-SHA-256 or SCRAM-SHA-512)")
        name = pairs.pop("name", None)
        if name_required and not name:
            raise ScramArgError(f"{mech}: name=<user> is required")
        try:
            iterations = int(pairs.pop("iterations", DEFAULT_ITERATIONS))
        except ValueError:
            raise ScramArgError(f"{mech}: iterations must be an integer") from None
        if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            raise ScramArgError(f"{mech}: iterations must be {MIN_ITERATIONS}..{MAX_ITERATIONS}")
        try:
            salt = base64.b64decode(pairs.pop("salt"), validate=True) if "salt" in pairs else secrets.token_bytes(32)
            salted = base64.b64decode(pairs.pop("saltedpassword"), validate=True) if "saltedpassword" in pairs else None
        except binascii.Error:
            raise ScramArgError(f"{mech}: salt and saltedpassword are base64") from None
        password = pairs.pop("password", None)
        if salted is None:
            if not password:
                raise ScramArgError(f"{mech}: password=<password> is required")
            salted = salted_password(HASHES[mech], password, salt, iterations)
        if pairs:
            raise ScramArgError(f"{mech}: unknown key(s) {', '.join(sorted(pairs))}")
        out.append(ScramArg(mech, name, iterations, salt, salted))
    if not out:
        raise ScramArgError(f"{text!r}: no SCRAM credential given")
    return out
