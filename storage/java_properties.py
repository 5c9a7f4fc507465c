"""Java `.properties` text, as java.util.Properties.load reads it: the one parser in the project
(meta.properties, Kafka's server.properties for a node, client property files for the tools).

    parse_properties("listeners = PLAINTEXT://:9092\\n# comment\\nlog.dirs=/a,\\\\\\n  /b\\n")
    # {"listeners": "PLAINTEXT://:9092", "log.dirs": "/a,/b"}

Rules (Properties.load): a logical line may continue over physical lines ending in an odd
number of backslashes (leading whitespace of the continuation dropped); `#` or `!` first on
a line starts a comment; the key ends at the first unescaped `=`, `:` or whitespace, and one
separator (with whitespace around it) is skipped; `\\t \\n \\r \\f \\uXXXX` are escapes and
a backslash before any other character stands for that character. A key with no value maps
to "". A later duplicate replaces an earlier one. Pure: text in, dict out.
"""
from __future__ import annotations

__all__ = ["parse_properties", "PropertiesError"]

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_WHITESPACE = " \t\f"


class PropertiesError(ValueError):
    """Text that java.util.Properties would refuse (a malformed \\uXXXX escape); names the line."""


def parse_properties(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for number, line in _logical_lines(text):
        key, value = _split(line)
        try:
            out[_unescape(key)] = _unescape(value)
        except PropertiesError as e:
            raise PropertiesError(f"line {number}: {e}") from None
    return out


def _logical_lines(text: str):
    """(first physical line number, logical line) with continuations joined, comments and blanks gone."""
    pending: list[str] | None = None
    start = 0
    for number, raw in enumerate(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"), 1):
        line = raw.lstrip(_WHITESPACE)
        if pending is None:
            if not line or line[0] in "#!":
                continue
            start = number
            pending = []
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:  # an odd run of backslashes: the line goes on
            pending.append(line[:-1])
            continue
        pending.append(line)
        yield start, "".join(pending)
        pending = None
    if pending is not None:
        yield start, "".join(pending)


def _split(line: str) -> tuple[str, str]:
    i, n = 0, len(line)
    while i < n:
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=:" or ch in _WHITESPACE:
            break
        i += 1
    key = line[:i]
    j = i
    while j < n and line[j] in _WHITESPACE:
        j += 1
    if j < n and line[j] in "=:":
        j += 1
        while j < n and line[j] in _WHITESPACE:
            j += 1
    return key, line[j:]


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out, i, n = [], 0, len(text)
    while i < n:
        ch = text[i]
        if ch != "\\" or i + 1 >= n:
            out.append(ch if ch != "\\" else "")  # a lone trailing backslash stands for nothing
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2:i + 6]
            if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise PropertiesError(f"malformed \\uXXXX escape {text[i:i + 6]!r}")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)
