"""The protocol fuzzer against a real node process: it must answer or close every case and stay healthy.

Replays the regression corpus (tests/fuzz_corpus/*.bin) and then RAFTKAFKA_FUZZ_CASES
(default 3000) generated cases of seed RAFTKAFKA_FUZZ_SEED (default 1): mutated
client requests on the Kafka listener, mutated internal RPC frames on the
controller listener. Afterwards the process is alive, its log holds no traceback,
and a real client still creates a topic, produces with acks=all and consumes.
Long runs: `python -m raftkafka.bench.fuzz` (docs/hardening.md).
"""
from __future__ import annotations

import os
import pathlib
import random
import time

import pytest
import trio

from raftkafka.bench.fuzz.kafka_cases import load_seeds
from raftkafka.bench.fuzz.runner import FuzzConfig, case_bytes, replay_corpus_files, run_fuzz
from tests.e2e.procs import HOST, free_base_port, pid_alive

CORPUS = pathlib.Path(__file__).resolve().parents[1] / "fuzz_corpus"


def test_cases_are_a_function_of_seed_and_index():
    config = FuzzConfig(bootstrap=(HOST, 1), controller=(HOST, 2), seed=7)
    first = [case_bytes(config, i) for i in range(50)]
    assert first == [case_bytes(config, i) for i in range(50)]
    assert {target for target, _, _ in first} == {"kafka", "rpc"}
    assert len({data for _, data, _ in first}) > 45


def test_every_golden_client_session_is_a_seed():
    seeds = load_seeds()
    api_keys = {int.from_bytes(s[:2], "big") for s in seeds}
    assert {0, 1, 3, 8, 9, 10, 11, 12, 14, 18, 19, 22} <= api_keys


@pytest.mark.e2e
def test_fuzzed_node_answers_or_closes_and_stays_healthy(processes, tmp_path):
    base = free_base_port()
    data_dir = tmp_path / "data"
    _, pids = processes.dev(1, base, str(data_dir))
    log_path = data_dir / "node-1" / "node.log"
    config = FuzzConfig(
        bootstrap=(HOST, base), controller=(HOST, base + 1),
        cases=int(os.environ.get("RAFTKAFKA_FUZZ_CASES", "3000")),
        seed=int(os.environ.get("RAFTKAFKA_FUZZ_SEED", "1")),
        logs=(str(log_path),), pids=(pids[1],), corpus=replay_corpus_files(CORPUS),
    )
    report = trio.run(run_fuzz, config)
    print(report.summary())
    assert report.findings == [], report.summary()
    assert report.cases_run >= config.cases
    assert pid_alive(pids[1])
    _produce_and_consume(f"{HOST}:{base}")
    assert "Traceback" not in log_path.read_text()


def _produce_and_consume(bootstrap: str) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"after-fuzz-{random.randrange(1 << 30)}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    errors = []
    for i in range(100):
        producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i, on_delivery=lambda err, _: err and errors.append(err))
    assert producer.flush(30) == 0 and errors == []
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "after-fuzz", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 100 and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    consumer.close()
    assert got == [b"v%d" % i for i in range(100)]
