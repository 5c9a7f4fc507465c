"""Fast failover with real `python -m raftkafka node` processes: a broker killed -9 is fenced
because its controller connection closed (not because its session lapsed: the session here
is a minute long), its partitions' ISRs shrink and leadership moves, and its restart
registers at once, without DUPLICATE_BROKER_REGISTRATION."""
from __future__ import annotations

import os

import pytest

from raftkafka.bench.failover import _active_controller
from raftkafka.bench.replication import ReplicationProcesses
from tests.test_multiprocess_replication import create_topic, wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient  # noqa: E402

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

TOPIC = "failover"


def partitions(admin: AdminClient):
    return admin.list_topics(TOPIC, timeout=5).topics[TOPIC].partitions.values()


def fenced_in(procs: ReplicationProcesses, controller: int, victim: int) -> str | None:
    """The controller's log once it holds a line fencing `victim`."""
    with open(os.path.join(procs.base, f"node{controller}.log")) as f:
        text = f.read()
    return text if f"fencing broker {victim}:" in text else None


def test_a_killed_broker_is_fenced_on_its_closed_connection_and_its_restart_registers_at_once(tmp_path):
    procs = ReplicationProcesses(str(tmp_path), settings={
        "broker.session.timeout.ms": "60000", "broker.heartbeat.interval.ms": "1000"})
    try:
        procs.format()
        for i in procs.ids:
            procs.start(i)
        admin = AdminClient({"bootstrap.servers": procs.bootstrap})
        create_topic(admin, TOPIC, assignment=[[1, 2, 3], [2, 3, 1], [3, 1, 2]])
        wait_until(lambda: all(len(p.isrs) == 3 for p in partitions(admin)), 60, "full ISRs")
        controller = wait_until(lambda: _active_controller(procs), 30, "the active controller")
        victim = next(i for i in procs.ids if i != controller)
        procs.kill(victim)
        controller_log = wait_until(lambda: fenced_in(procs, controller, victim), 45, f"broker {victim} fenced")
        assert f"fencing broker {victim}: its controller connection closed" in controller_log
        assert f"fencing broker {victim}: no heartbeat" not in controller_log  # the session had not lapsed
        wait_until(lambda: all(victim not in p.isrs and p.leader not in (victim, -1)
                               for p in partitions(admin)), 45, f"broker {victim} out of every ISR")

        procs.start(victim)
        wait_until(lambda: all(len(p.isrs) == 3 for p in partitions(admin)), 60, f"broker {victim} back in every ISR")
        with open(os.path.join(procs.base, f"node{victim}.log")) as f:
            victim_log = f.read()
        assert victim_log.count(f"broker {victim} registered with epoch") == 2
        assert "DUPLICATE_BROKER_REGISTRATION" not in victim_log
    finally:
        procs.stop_all()
