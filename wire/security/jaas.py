"""Kafka's `sasl.jaas.config` values: one JAAS login module entry.

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_alice="alice-secret";

is `<class> <flag> (<key>=<value>)* ;` where a value is a bare word or a
quoted string ("..." or '...', backslash escapes the next character).
As in Kafka, a property holds exactly one login module.
"""
from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["JaasEntry", "JaasError", "parse_jaas", "PLAIN_LOGIN_MODULE", "SCRAM_LOGIN_MODULE"]

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_FLAGS = ("required", "requisite", "sufficient", "optional")
_SPECIAL = "=;\"'"


class JaasError(ValueError):
    """A value that is not one JAAS login module entry; str(e) says where."""


@dataclass(frozen=True)
class JaasEntry:
    login_module: str
    control_flag: str
    options: dict[str, str] = field(default_factory=dict)

    @property
    def plain_users(self) -> dict[str, str]:
        """Kafka's static PLAIN users: every `user_NAME="password"` option."""
        return {k[len("user_"):]: v for k, v in self.options.items() if k.startswith("user_") and len(k) > 5}


def _tokens(text: str):
    """(kind, value) pairs: ("word", w), ("string", s) or ("sym", "=" / ";")."""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif c in "=;":
            yield "sym", c
            i += 1
        elif c in "\"'":
            quote, i, out = c, i + 1, []
            while True:
                if i >= n:
                    raise JaasError("unterminated quoted value")
                c = text[i]
                if c == "\\" and i + 1 < n:
                    out.append(text[i + 1])
                    i += 2
                elif c == quote:
                    i += 1
                    break
                else:
                    out.append(c)
                    i += 1
            yield "string", "".join(out)
        else:
            start = i
            while i < n and not text[i].isspace() and text[i] not in _SPECIAL:
                i += 1
            yield "word", text[start:i]


def parse_jaas(text: str) -> JaasEntry:
    tokens = list(_tokens(text))
    if len(tokens) < 2 or tokens[0][0] != "word" or tokens[1][0] != "word":
        raise JaasError("expected '<LoginModule class> <flag> key=\"value\" ... ;'")
    module, flag = tokens[0][1], tokens[1][1].lower()
    if flag not in _FLAGS:
        raise JaasError(f"{tokens[1][1]!r} is not a control flag ({'/'.join(_FLAGS)})")
    options: dict[str, str] = {}
    i = 2
    while i < len(tokens) and tokens[i] != ("sym", ";"):
        if i + 2 >= len(tokens) or tokens[i][0] != "word" or tokens[i + 1] != ("sym", "="):
            raise JaasError(f"expected key=value near {tokens[i][1]!r}")
        kind, value = tokens[i + 2]
        if kind == "sym":
            raise JaasError(f"option {tokens[i][1]!r} has no value")
        if tokens[i][1] in options:
            raise JaasError(f"option {tokens[i][1]!r} given twice")
        options[tokens[i][1]] = value
        i += 3
    if i >= len(tokens):
        raise JaasError("the login module entry must end with ';'")
    if i + 1 != len(tokens):
        raise JaasError("exactly one login module is allowed")
    return JaasEntry(module, flag, options)
