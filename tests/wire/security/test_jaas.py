"""Kafka's sasl.jaas.config syntax: one login module entry with quoted or bare options."""
from __future__ import annotations

import pytest

from wire.security.jaas import PLAIN_LOGIN_MODULE, JaasError, parse_jaas


def test_kafka_broker_plain_entry():
    entry = parse_jaas(
        'org.apache.kafka.common.security.plain.PlainLoginModule required\n'
        '    username="admin"\n    password="admin-secret"\n'
        '    user_admin="admin-secret"\n    user_alice="alice secret; with = signs";')
    assert entry.login_module == PLAIN_LOGIN_MODULE and entry.control_flag == "required"
    assert entry.options["username"] == "admin" and entry.options["password"] == "admin-secret"
    assert entry.plain_users == {"admin": "admin-secret", "alice": "alice secret; with = signs"}


def test_bare_and_single_quoted_values_and_escapes():
    entry = parse_jaas(r"""m.X optional a=bare b='it"s' c="q\"uote\\d";""")
    assert entry.control_flag == "optional"
    assert entry.options == {"a": "bare", "b": 'it"s', "c": 'q"uote\\d'}


def test_empty_value_and_no_options():
    assert parse_jaas('m.X required password="";').options == {"password": ""}
    assert parse_jaas("m.X REQUIRED ;").options == {}


@pytest.mark.parametrize("text,message", [
    ("", "expected"),
    ("m.X required", "must end with ';'"),
    ('m.X required username="a"', "must end with ';'"),
    ("m.X mandatory;", "control flag"),
    ('m.X required username "a";', "key=value"),
    ("m.X required username=;", "has no value"),
    ('m.X required a="1" a="2";', "given twice"),
    ('m.X required a="open;', "unterminated"),
    ('m.X required; m.Y required;', "exactly one"),
    ('="x" required;', "expected"),
])
def test_malformed_entries_name_the_problem(text, message):
    with pytest.raises(JaasError, match=message):
        parse_jaas(text)
