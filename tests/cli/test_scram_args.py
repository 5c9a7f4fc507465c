"""SCRAM credentials on the command line in kafka-configs' and kafka-storage's syntax."""
from __future__ import annotations

import base64

import pytest

from raftkafka.cli.scram_args import ScramArgError, parse_scram_args
from wire.security.sasl_scram import salted_password


def test_kafka_configs_form_with_two_mechanisms():
    a, b = parse_scram_args("SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]",
                            name_required=False)
    assert (a.mechanism, a.mechanism_id, a.iterations, len(a.salt)) == ("SCRAM-SHA-256", 1, 8192, 32)
    assert a.salted_password == salted_password("sha256", "alice-secret", a.salt, 8192)
    assert (b.mechanism, b.iterations) == ("SCRAM-SHA-512", 4096) and b.salt != a.salt


def test_storage_format_form_with_name_and_explicit_salt():
    salt = base64.b64encode(b"fixed-salt").decode()
    (arg,) = parse_scram_args(f"SCRAM-SHA-256=[name=admin,password=admin-secret,salt={salt}]", name_required=True)
    assert arg.name == "admin" and arg.salt == b"fixed-salt"


@pytest.mark.parametrize("text, message", [
    ("SCRAM-SHA-256=[password=x", "expected MECHANISM"),
    ("PLAIN=[password=x]", "not a SCRAM mechanism"),
    ("SCRAM-SHA-256=[password=x]", "name=<user> is required"),
    ("SCRAM-SHA-256=[name=a,iterations=100,password=x]", "4096..16384"),
    ("SCRAM-SHA-256=[name=a,iterations=lots,password=x]", "integer"),
    ("SCRAM-SHA-256=[name=a]", "password=<password> is required"),
    ("SCRAM-SHA-256=[name=a,password=x,colour=blue]", "unknown key"),
    ("SCRAM-SHA-256=[name=a,password=x,salt=!!]", "base64"),
    ("SCRAM-SHA-256=[name=a,password=x] SCRAM-SHA-512=[name=a,password=x]", "between mechanisms"),
    ("", "no SCRAM credential"),
])
def test_bad_arguments_are_one_line(text, message):
    with pytest.raises(ScramArgError, match=message):
        parse_scram_args(text, name_required=True)
