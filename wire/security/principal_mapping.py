"""`ssl.principal.mapping.rules`: a TLS certificate's subject → the principal's name.

Kafka's SslPrincipalMapper: a comma-separated list of rules tried in order, the first
that applies wins.

- `DEFAULT`: the subject unchanged (RFC 2253 form, e.g. `CN=alice,OU=eng,O=acme`).
- `RULE:pattern/replacement/` with an optional `L` or `U` after the last slash: applies
  when `pattern` matches the whole subject; `$1`.. in `replacement` name its groups;
  L/U lower/upper-case the result. A `/` or `\\` inside pattern or replacement is escaped
  with a backslash.

No applicable rule is an authentication failure (Kafka's NoMatchingRule).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["PrincipalMapper", "NoMatchingRule", "subject_from_peercert"]

_RULE = re.compile(
    r"\s*(?:(?P<default>DEFAULT)|RULE:(?P<pattern>(?:\\.|[^\\/])*)/(?P<replacement>(?:\\.|[^\\/])*)/(?P<case>[LU]?))"
    r"\s*(?:,|$)"
)


class NoMatchingRule(ValueError):
    pass


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern | None  # None = DEFAULT
    replacement: str = ""
    case: str = ""

    def apply(self, subject: str) -> str | None:
        if self.pattern is None:
            return subject
        m = self.pattern.fullmatch(subject)
        if m is None:
            return None
        out = m.expand(self.replacement)
        return out.lower() if self.case == "L" else out.upper() if self.case == "U" else out


def _java_replacement(text: str) -> str:
    """Java's `$1` group references and `\\x` escapes as Python's `\\g<1>` template."""
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            out.append("\\\\" if nxt == "\\" else nxt)
            i += 2
        elif c == "$" and i + 1 < len(text) and text[i + 1].isdigit():
            j = i + 1
            while j < len(text) and text[j].isdigit():
                j += 1
            out.append(f"\\g<{text[i + 1:j]}>")
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


class PrincipalMapper:
    def __init__(self, rules: str = "DEFAULT"):
        self.rules: list[_Rule] = []
        text, pos = rules.strip(), 0
        while pos < len(text):
            m = _RULE.match(text, pos)
            if m is None or m.end() == pos:
                raise ValueError(f"ssl.principal.mapping.rules: cannot parse {text[pos:]!r}")
            if m.group("default"):
                self.rules.append(_Rule(None))
            else:
                pattern = re.sub(r"\\/", "/", m.group("pattern"))
                try:
                    compiled = re.compile(pattern)
                except re.error as e:
                    raise ValueError(f"ssl.principal.mapping.rules: bad pattern {pattern!r}: {e}") from None
                self.rules.append(_Rule(compiled, _java_replacement(m.group("replacement")), m.group("case")))
            pos = m.end()
        if not self.rules:
            self.rules.append(_Rule(None))

    def name_for(self, subject: str) -> str:
        for rule in self.rules:
            name = rule.apply(subject)
            if name is not None:
                return name
        raise NoMatchingRule(f"no ssl.principal.mapping.rules rule applies to {subject!r}")


def subject_from_peercert(cert: dict | None) -> str | None:
    """The RFC 2253 subject of `ssl.SSLSocket.getpeercert()`'s answer (most specific RDN
    first, as Java's X500Principal.getName() prints it), or None without a certificate."""
    if not cert or "subject" not in cert:
        return None
    rdns = []
    for rdn in reversed(cert["subject"]):
        rdns.append("+".join(f"{_SHORT.get(k, k)}={_escape(v)}" for k, v in rdn))
    return ",".join(rdns)


_SHORT = {
    "commonName": "CN", "organizationalUnitName": "OU", "organizationName": "O",
    "localityName": "L", "stateOrProvinceName": "ST", "countryName": "C",
    "streetAddress": "STREET", "domainComponent": "DC", "userId": "UID",
}


def _escape(value: str) -> str:
    out = re.sub(r'([,+"\\<>;=])', r"\\\1", value)
    if out.startswith((" ", "#")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out
