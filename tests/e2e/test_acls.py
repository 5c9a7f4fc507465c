"""ACL authorization on a real node with real clients.

Until clients authenticate, every connection is User:ANONYMOUS. So the node first runs
with User:ANONYMOUS in super.users to create topics and grant ANONYMOUS ALTER on the
cluster (the right to manage ACLs, nothing else); restarted without it (deny by default),
the same librdkafka clients are refused everything, then the `acls` CLI grants them
--producer and --consumer ACLs on one topic and they produce and consume there, while the
other topic stays invisible and refused.
"""
from __future__ import annotations

import time

import pytest

from metadata.authorizer import STANDARD_AUTHORIZER
from tests.e2e.procs import free_base_port, write_single_node

pytestmark = pytest.mark.e2e


def _acls(processes, bootstrap: str, *args: str) -> str:
    """`python -m raftkafka acls` as a process: its output (it must succeed)."""
    proc = processes.start("acls", "--bootstrap-server", bootstrap, *args)
    code = proc.wait(60)
    assert code == 0, proc.output()
    return proc.output() + "\n"


def _start(processes, config: str, base: int):
    node = processes.node(config)
    node.wait_line(rf"serving Kafka clients on PLAINTEXT://127.0.0.1:{base}", 60)
    return node


def _produce(bootstrap: str, topic: str) -> list:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 8000})
    errors = []
    for i in range(3):
        producer.produce(topic, value=b"v%d" % i, on_delivery=lambda err, msg: errors.append(err))
    producer.flush(15)
    return errors


def _consume(bootstrap: str, topic: str, group: str, want: int) -> tuple[list, list]:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got, errors = [], []
    deadline = time.monotonic() + 20
    while len(got) < want and time.monotonic() < deadline and not errors:
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        (errors if msg.error() else got).append(msg.error() or msg.value())
    if got:
        consumer.commit(asynchronous=False)
    consumer.close()
    return got, errors


def _topics(bootstrap: str) -> set[str]:
    from confluent_kafka.admin import AdminClient

    return set(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics)


def test_deny_by_default_then_the_acls_cli_grants_producer_and_consumer(processes, tmp_path):
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AclBindingFilter, AclOperation, AclPermissionType, AdminClient, NewTopic
    from confluent_kafka.admin import ResourcePatternType, ResourceType

    base = free_base_port()
    bootstrap = f"localhost:{base}"
    config = write_single_node(str(tmp_path / "data"), base, ("authorizer.class.name", STANDARD_AUTHORIZER),
                               ("super.users", "User:ANONYMOUS"))
    node = _start(processes, config, base)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic("events", 1), NewTopic("secret", 1)]).values():
        f.result(30)
    assert _produce(bootstrap, "events") == [None] * 3
    out = _acls(processes, bootstrap, "--add", "--allow-principal", "User:ANONYMOUS", "--operation", "Alter",
                "--cluster")
    assert ("Adding ACLs for resource `ResourcePattern(resourceType=CLUSTER, name=kafka-cluster, "
            "patternType=LITERAL)`: \n \t(principal=User:ANONYMOUS, host=*, operation=ALTER, "
            "permissionType=ALLOW) \n") in out
    node.popen.kill()
    node.wait(10)

    # Deny by default: ANONYMOUS is no longer a super user and has no topic or group ACL.
    with open(config) as f:
        text = f.read()
    with open(config, "w") as f:
        f.write(text.replace('"User:ANONYMOUS"', '"User:admin"'))
    _start(processes, config, base)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    assert _topics(bootstrap) == set()  # not even a name it may not describe
    errors = _produce(bootstrap, "events")
    assert errors and all(e.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED for e in errors)
    got, consume_errors = _consume(bootstrap, "events", "readers", 3)
    assert got == [] and consume_errors, "a consumer without ACLs must be refused"
    # Creating a topic needs CREATE on the cluster or the topic.
    with pytest.raises(KafkaException) as refused:
        admin.create_topics([NewTopic("more", 1)])["more"].result(30)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    # ALTER on the cluster lets it manage ACLs: grant itself producer and consumer rights on events.
    for extra in (["--producer"], ["--consumer", "--group", "readers"]):
        _acls(processes, bootstrap, "--add", "--allow-principal", "User:ANONYMOUS", "--topic", "events", *extra)
    assert _acls(processes, bootstrap, "--list", "--topic", "events") == (
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=events, patternType=LITERAL)`: \n"
        " \t(principal=User:ANONYMOUS, host=*, operation=READ, permissionType=ALLOW)\n"
        "\t(principal=User:ANONYMOUS, host=*, operation=WRITE, permissionType=ALLOW)\n"
        "\t(principal=User:ANONYMOUS, host=*, operation=CREATE, permissionType=ALLOW)\n"
        "\t(principal=User:ANONYMOUS, host=*, operation=DESCRIBE, permissionType=ALLOW) \n\n")

    assert _topics(bootstrap) == {"events"}  # secret stays invisible
    assert _produce(bootstrap, "events") == [None] * 3
    got, consume_errors = _consume(bootstrap, "events", "readers", 6)
    assert consume_errors == [] and len(got) == 6
    errors = _produce(bootstrap, "secret")
    assert errors and all(e.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED for e in errors)

    # The same ACLs through confluent-kafka's AdminClient: describe, then delete the producer's.
    bindings = admin.describe_acls(AclBindingFilter(ResourceType.TOPIC, "events", ResourcePatternType.LITERAL, None, None,
                                              AclOperation.ANY, AclPermissionType.ANY)).result(10)
    assert sorted(b.operation.name for b in bindings) == ["CREATE", "DESCRIBE", "READ", "WRITE"]
    _acls(processes, bootstrap, "--remove", "--force", "--allow-principal", "User:ANONYMOUS", "--operation",
          "Write", "--topic", "events")
    assert [b.operation.name for b in admin.describe_acls(AclBindingFilter(
        ResourceType.TOPIC, "events", ResourcePatternType.LITERAL, None, None, AclOperation.WRITE,
        AclPermissionType.ANY)).result(10)] == []
    errors = _produce(bootstrap, "events")
    assert errors and all(e.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED for e in errors)
