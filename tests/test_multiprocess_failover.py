"""Fast failover with real `python -m raftkafka node` processes (the broker session is a
minute long here, so nothing below can be the session lapsing):

- a broker killed -9 and restarted at once takes its registration back straight away: it
  holds its log dirs' locks and names the incarnation it replaces, so no
  DUPLICATE_BROKER_REGISTRATION, and the old incarnation is never fenced;
- a broker killed -9 and left dead is fenced because its controller connection closed and
  stayed closed for the grace, its partitions' ISRs shrink and leadership moves; once
  restarted it is back in every ISR.
"""
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


def node_log(procs: ReplicationProcesses, node: int) -> str:
    with open(os.path.join(procs.base, f"node{node}.log")) as f:
        return f.read()


def controller_logs(procs: ReplicationProcesses, victim: int) -> str:
    """What the other nodes logged: whichever is the active controller (it may change)."""
    return "".join(node_log(procs, i) for i in procs.ids if i != victim)


def test_a_killed_broker_is_replaced_at_once_or_fenced_on_its_closed_connection(tmp_path):
    procs = ReplicationProcesses(str(tmp_path), settings={
        "broker.session.timeout.ms": "60000", "broker.heartbeat.interval.ms": "1000",
        "broker.connection.close.grace.ms": "10000"})
    try:
        procs.format()
        for i in procs.ids:
            procs.start(i)
        admin = AdminClient({"bootstrap.servers": procs.bootstrap})
        create_topic(admin, TOPIC, assignment=[[1, 2, 3], [2, 3, 1], [3, 1, 2]])
        wait_until(lambda: all(len(p.isrs) == 3 for p in partitions(admin)), 60, "full ISRs")
        controller = wait_until(lambda: _active_controller(procs), 30, "the active controller")
        victim = next(i for i in procs.ids if i != controller)  # the controller's own death: docs/failover.md
        registered = f"broker {victim} registered with epoch"

        procs.kill(victim)
        procs.start(victim)
        wait_until(lambda: node_log(procs, victim).count(registered) == 2, 30, "the restart registered")
        assert "DUPLICATE_BROKER_REGISTRATION" not in node_log(procs, victim)
        wait_until(lambda: all(len(p.isrs) == 3 for p in partitions(admin)), 60, f"broker {victim} back in every ISR")
        assert f"fencing broker {victim}:" not in controller_logs(procs, victim)

        procs.kill(victim)
        log = wait_until(lambda: (lambda text: text if f"fencing broker {victim}:" in text else None)(
            controller_logs(procs, victim)), 45, f"broker {victim} fenced")
        assert f"fencing broker {victim}: its controller connection closed" in log
        assert f"fencing broker {victim}: no heartbeat" not in log  # the session had not lapsed
        wait_until(lambda: all(victim not in p.isrs and p.leader not in (victim, -1)
                               for p in partitions(admin)), 45, f"broker {victim} out of every ISR")
        procs.start(victim)
        wait_until(lambda: all(len(p.isrs) == 3 for p in partitions(admin)), 60, f"broker {victim} back in every ISR")
    finally:
        procs.stop_all()
