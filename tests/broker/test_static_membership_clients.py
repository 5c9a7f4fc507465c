"""Static group membership (KIP-345) end to end with real clients against two in-process brokers.

- confluent-kafka: a static member closed and restarted with the same group.instance.id within
  session.timeout.ms gets its partitions back with no rebalance (same generation; the other
  member's assignment is never revoked); a second live consumer with the same instance id
  fences the first, which gets librdkafka's fatal FENCED_INSTANCE_ID error.
- kafka-python: its admin removes a departed static member by instance id (LeaveGroup v3) and
  the group rebalances at once instead of waiting out the session timeout; a kafka-python
  static member restarts without a rebalance too.
- Every group request is recorded on the broker, so the versions each client picked from what
  we advertise are checked on the wire (the ones carrying group_instance_id)."""
from __future__ import annotations

import collections
import time

import pytest

from broker import handlers
from tests.broker.harness import ThreadedCluster
from wire.protocol import ApiKey

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # kafka-python's schema loading

PARTITIONS = 4
STATIC = {
    "offsets.topic.num.partitions": "4", "offsets.topic.replication.factor": "1",
    "group.initial.rebalance.delay.ms": "200", "group.min.session.timeout.ms": "1000",
}
GROUP_APIS = (ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH, ApiKey.JOIN_GROUP, ApiKey.HEARTBEAT,
              ApiKey.LEAVE_GROUP, ApiKey.SYNC_GROUP, ApiKey.DESCRIBE_GROUPS)
# (client id prefix, api key, version) -> count: what the clients sent
SEEN: collections.Counter = collections.Counter()


def _recording(api_key, handler: handlers.Handler) -> handlers.Handler:
    async def handle(broker, header, request):
        SEEN[((header.client_id or "").split("-")[0], int(api_key), header.api_version)] += 1
        return await handler.handle(broker, header, request)
    return handlers.Handler(handle, handler.error)


@pytest.fixture(scope="module")
def cluster():
    originals = {key: handlers.HANDLERS[key] for key in GROUP_APIS}
    for key, handler in originals.items():
        handlers.HANDLERS[key] = _recording(key, handler)
    SEEN.clear()
    cluster = ThreadedCluster(2, static=STATIC)
    cluster.start()
    yield cluster
    cluster.stop()
    handlers.HANDLERS.update(originals)


def versions(client: str, api_key: int) -> set[int]:
    return {v for (c, k, v) in SEEN if c == client and k == api_key}


def group_info(cluster, group: str):
    """(generation, state, {instance id: member id}) from the coordinator holding `group`."""
    def look():
        for broker in cluster.cluster.brokers:
            g = broker.groups.coordinator.groups.get(group)
            if g is not None:
                return g.generation, g.state.value, dict(g.static_members)
        return None
    return cluster.run_sync(look)


def make_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        f.result(15)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(40):
        producer.produce(topic, b"v%d" % i, partition=i % PARTITIONS)
    assert producer.flush(15) == 0


class Static:
    """A confluent-kafka consumer with a group.instance.id, and its rebalance history."""

    def __init__(self, bootstrap, group, topic, instance, session_ms=6000):
        from confluent_kafka import Consumer
        self.history: list[tuple[str, list[int]]] = []  # ("assign" | "revoke", partitions)
        self.errors = []
        self.records = 0
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "group.instance.id": instance,
            "session.timeout.ms": session_ms, "heartbeat.interval.ms": 200, "auto.offset.reset": "earliest",
            "enable.auto.commit": True, "auto.commit.interval.ms": 200})
        self.consumer.subscribe([topic], on_assign=self._on("assign"), on_revoke=self._on("revoke"))

    def _on(self, kind):
        return lambda consumer, partitions: self.history.append((kind, sorted(p.partition for p in partitions)))

    def poll(self) -> None:
        msg = self.consumer.poll(0.05)
        if msg is None:
            return
        if msg.error():
            self.errors.append(msg.error())
        else:
            self.records += 1

    @property
    def owned(self) -> list[int]:
        return sorted(p.partition for p in self.consumer.assignment())


def pump(members, done, timeout=30.0, what="condition"):
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}: "
                                 f"{[(m.owned, m.history, m.errors) for m in members]}")
        for m in members:
            m.poll()


def stable_pair(cluster, bootstrap, group, topic):
    a = Static(bootstrap, group, topic, "inst-a")
    b = Static(bootstrap, group, topic, "inst-b")
    pump([a, b], lambda: len(a.owned) == len(b.owned) == 2 and a.records + b.records >= 40,
         what="two static members with two partitions each and every record")
    generation, state, statics = group_info(cluster, group)
    assert state == "Stable" and sorted(statics) == ["inst-a", "inst-b"]
    return a, b, generation


# -- confluent-kafka ------------------------------------------------------------------------

def test_a_restarted_static_member_gets_its_partitions_back_without_a_rebalance(cluster):
    bootstrap, group, topic = cluster.cluster.bootstrap, "static-restart", "static-restart"
    make_topic(bootstrap, topic)
    a, b, generation = stable_pair(cluster, bootstrap, group, topic)
    a_owned, b_history = a.owned, list(b.history)
    old_member_id = group_info(cluster, group)[2]["inst-a"]
    a.consumer.close()  # a static member sends no LeaveGroup: its place is kept for session.timeout.ms
    for _ in range(20):
        b.poll()
    assert group_info(cluster, group)[:2] == (generation, "Stable")

    again = Static(bootstrap, group, topic, "inst-a")
    pump([again, b], lambda: again.owned == a_owned, what="the restarted member's partitions")
    for _ in range(20):  # a while longer: nothing else happens
        again.poll()
        b.poll()
    new_generation, state, statics = group_info(cluster, group)
    assert (new_generation, state) == (generation, "Stable")
    assert statics["inst-a"] != old_member_id  # the same member under a new member id
    assert b.history == b_history and b.owned == sorted(set(range(PARTITIONS)) - set(a_owned))
    assert again.history == [("assign", a_owned)] and not again.errors and not b.errors
    again.consumer.close()
    b.consumer.close()


def test_a_second_consumer_with_the_same_instance_id_fences_the_first(cluster):
    from confluent_kafka import KafkaError
    bootstrap, group, topic = cluster.cluster.bootstrap, "static-fence", "static-fence"
    make_topic(bootstrap, topic)
    a, b, generation = stable_pair(cluster, bootstrap, group, topic)
    a_owned, b_history = a.owned, list(b.history)
    twin = Static(bootstrap, group, topic, "inst-a")  # same instance id while `a` is still alive
    pump([a, twin, b], lambda: a.errors and twin.owned == a_owned, what="the first instance fenced")
    fatal = a.errors[0]
    assert fatal.code() == KafkaError._FATAL
    # librdkafka wraps the broker's error: FENCED_INSTANCE_ID is what made it fatal.
    assert KafkaError(KafkaError.FENCED_INSTANCE_ID).str() in fatal.str()
    for _ in range(20):
        twin.poll()
        b.poll()
    assert group_info(cluster, group)[:2] == (generation, "Stable")
    assert b.history == b_history and not twin.errors and not b.errors
    for m in (a, twin, b):
        m.consumer.close()


# -- kafka-python ---------------------------------------------------------------------------

def test_admin_removes_a_departed_static_member_by_instance_id(cluster):
    from kafka import KafkaAdminClient
    from kafka.admin import MemberToRemove
    from kafka.errors import NoError, UnknownMemberIdError
    bootstrap, group, topic = cluster.cluster.bootstrap, "static-remove", "static-remove"
    make_topic(bootstrap, topic)
    a = Static(bootstrap, group, topic, "inst-a", session_ms=60_000)
    b = Static(bootstrap, group, topic, "inst-b", session_ms=60_000)
    pump([a, b], lambda: len(a.owned) == len(b.owned) == 2, what="a stable group")
    generation = group_info(cluster, group)[0]
    a.consumer.close()  # gone for good; without the admin, b would wait a minute for a's partitions
    for _ in range(10):
        b.poll()
    assert len(b.owned) == 2

    admin = KafkaAdminClient(bootstrap_servers=cluster.cluster.bootstrap)
    try:
        result = admin.remove_group_members(group, [MemberToRemove(group_instance_id="inst-a"),
                                                    MemberToRemove(group_instance_id="inst-z")])
    finally:
        admin.close()
    assert {k: v for k, v in result.items()} == {"inst-a": NoError, "inst-z": UnknownMemberIdError}
    pump([b], lambda: b.owned == list(range(PARTITIONS)), timeout=20, what="b taking over every partition")
    new_generation, state, statics = group_info(cluster, group)
    assert new_generation > generation and state == "Stable" and sorted(statics) == ["inst-b"]
    b.consumer.close()


def test_kafka_python_static_member_restarts_without_a_rebalance(cluster):
    from kafka import KafkaConsumer
    bootstrap, group, topic = cluster.cluster.bootstrap, "static-kp", "static-kp"
    make_topic(bootstrap, topic)

    def consumer(until):
        """A static kafka-python consumer polled until `until(consumer, records so far)`."""
        c = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, group_instance_id="kp-1",
                          session_timeout_ms=10_000, heartbeat_interval_ms=200, auto_offset_reset="earliest",
                          enable_auto_commit=False)
        records, deadline = 0, time.monotonic() + 30
        while not until(c, records):
            assert time.monotonic() < deadline, f"kafka-python: {c.assignment()}, {records} records"
            records += sum(len(batch) for batch in c.poll(timeout_ms=100).values())
        return c

    first = consumer(lambda c, records: records >= 40)
    first.commit()
    generation = group_info(cluster, group)[0]
    first.close(autocommit=False)
    # Same instance id within the session: its partitions at once, from the committed offsets.
    second = consumer(lambda c, records: len(c.assignment()) == PARTITIONS)
    assert group_info(cluster, group)[:2] == (generation, "Stable")
    assert sum(len(batch) for batch in second.poll(timeout_ms=500).values()) == 0  # nothing redelivered
    second.close(autocommit=False)


# -- on the wire ----------------------------------------------------------------------------

def test_clients_use_the_static_membership_versions(cluster):
    """Runs last in this module: what the tests above sent, by client."""
    assert versions("rdkafka", ApiKey.JOIN_GROUP) == {5}
    assert versions("rdkafka", ApiKey.SYNC_GROUP) == {3}
    assert versions("rdkafka", ApiKey.HEARTBEAT) == {3}
    assert versions("rdkafka", ApiKey.OFFSET_COMMIT) == {7}
    assert versions("rdkafka", ApiKey.OFFSET_FETCH) == {7}  # require_stable (KIP-447) since v7
    assert versions("rdkafka", ApiKey.LEAVE_GROUP) == set()  # static members never leave on close
    assert versions("kafka", ApiKey.LEAVE_GROUP) == {3}  # the admin's removal batch
    assert versions("kafka", ApiKey.HEARTBEAT) <= {3} and versions("kafka", ApiKey.JOIN_GROUP) == {5}
    assert versions("kafka", ApiKey.OFFSET_COMMIT) == {7}
