"""storage.java_properties: java.util.Properties.load's syntax."""
from __future__ import annotations

import pytest

from storage.java_properties import PropertiesError, parse_properties


def test_separators_comments_and_blank_lines():
    text = "# comment\n! also a comment\n\n  a=1\nb = 2\nc:3\nd 4\ne\t:\t5\nf\ng=\n"
    assert parse_properties(text) == {"a": "1", "b": "2", "c": "3", "d": "4", "e": "5", "f": "", "g": ""}


def test_continuations_escapes_and_unicode():
    text = ("log.dirs=/a,\\\n    /b,\\\n    /c\n"
            "path=C:\\\\kafka\\\\data\n"
            "key\\ with\\ spaces=v\n"
            "colon\\:key=x\\=y\n"
            "tab=a\\tb\n"
            "snow=\\u2603\n"
            "ends.with.backslash=x\\\\\n"
            "next=after\n")
    assert parse_properties(text) == {
        "log.dirs": "/a,/b,/c", "path": "C:\\kafka\\data", "key with spaces": "v", "colon:key": "x=y",
        "tab": "a\tb", "snow": "\u2603", "ends.with.backslash": "x\\", "next": "after"}


def test_later_duplicates_win_and_crlf_is_a_line_end():
    assert parse_properties("a=1\r\na=2\r\nb=\\\r\n  3\r\n") == {"a": "2", "b": "3"}


def test_a_malformed_unicode_escape_names_its_line():
    with pytest.raises(PropertiesError, match="line 2"):
        parse_properties("ok=1\nbad=\\u12G4\n")
