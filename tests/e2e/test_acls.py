"""ACL authorization on a real node with real clients.

The node authenticates itself and its admin with TLS client certificates: its CONTROLLER
listener and an SSL client listener require a certificate of the test's CA, and
`super.users` names the node (`User:node-1`, which its own broker speaks to its controller
as) and `User:admin`. Clients on its PLAINTEXT listener are `User:ANONYMOUS`, which has no
ACL: deny by default refuses those librdkafka clients everything. Then the admin's `acls`
CLI (over SSL) grants ANONYMOUS --producer and --consumer ACLs on one topic and they produce
and consume there, while the other topic stays invisible and refused.
"""
from __future__ import annotations

import time
import uuid

import pytest

from metadata.authorizer import STANDARD_AUTHORIZER
from tests.e2e.procs import free_base_port, write_single_node

pytestmark = pytest.mark.e2e


def _acls(processes, bootstrap: str, admin_config: str, *args: str) -> str:
    """`python -m raftkafka acls` as the admin, a process: its output (it must succeed)."""
    proc = processes.start("acls", "--bootstrap-server", bootstrap, "--command-config", admin_config, *args)
    code = proc.wait(60)
    assert code == 0, proc.output()
    return proc.output() + "\n"


def _secured_node(processes, tmp_path, base: int):
    """A node whose CONTROLLER and SSL listeners require a certificate of a fresh CA; the
    admin's client properties (Kafka/librdkafka names) and the path of their file."""
    from raftkafka.cli.dev_certs import CertificateAuthority

    ca = CertificateAuthority()
    truststore = ca.write_truststore(str(tmp_path / "ca.pem"))
    node_cert = ca.issue(str(tmp_path / "node-1.pem"), "node-1")
    admin_cert = ca.issue(str(tmp_path / "admin.pem"), "admin")
    config = write_single_node(
        str(tmp_path / "data"), base,
        ("listeners", f"PLAINTEXT://127.0.0.1:{base},SSL://127.0.0.1:{base + 2},CONTROLLER://127.0.0.1:{base + 1}"),
        ("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,SSL:SSL,CONTROLLER:SSL"),
        ("inter.broker.listener.name", "SSL"),
        ("ssl.keystore.type", "PEM"), ("ssl.keystore.location", node_cert.keystore),
        ("ssl.truststore.type", "PEM"), ("ssl.truststore.location", truststore),
        ("ssl.client.auth", "required"),
        ("ssl.principal.mapping.rules", "RULE:^CN=([^,]+).*$/$1/,DEFAULT"),
        ("authorizer.class.name", STANDARD_AUTHORIZER), ("super.users", "User:node-1;User:admin"))
    node = processes.node(config)
    node.wait_line(rf"serving Kafka clients on PLAINTEXT://127.0.0.1:{base}", 60)
    admin = {"security.protocol": "SSL", "ssl.ca.location": truststore,
             "ssl.certificate.location": admin_cert.certificate, "ssl.key.location": admin_cert.key}
    admin_config = tmp_path / "admin.properties"
    admin_config.write_text("".join(f"{k}={v}\n" for k, v in admin.items()))
    return admin, str(admin_config)


def _secured_node_with_topics(processes, tmp_path, host: str, topics: dict[str, int]):
    """A `_secured_node` with `topics` (name: partitions) created by its admin: the PLAINTEXT
    and SSL bootstraps on `host`, the admin's properties and their file, the admin's AdminClient."""
    from confluent_kafka.admin import AdminClient, NewTopic

    base = free_base_port(2)
    admin_conf, admin_config = _secured_node(processes, tmp_path, base)
    admin = AdminClient({"bootstrap.servers": f"{host}:{base + 2}", **admin_conf})
    for f in admin.create_topics([NewTopic(name, partitions) for name, partitions in topics.items()]).values():
        f.result(30)
    return f"{host}:{base}", f"{host}:{base + 2}", admin_conf, admin_config, admin


def _produce(bootstrap: str, topic: str, conf: dict | None = None) -> list:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 8000, **(conf or {})})
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

    bootstrap, ssl_bootstrap, admin_conf, admin_config, admin = _secured_node_with_topics(
        processes, tmp_path, "localhost", {"events": 1, "secret": 1})
    assert _produce(ssl_bootstrap, "events", admin_conf) == [None] * 3

    # Deny by default: ANONYMOUS is no super user and has no ACL.
    anonymous = AdminClient({"bootstrap.servers": bootstrap})
    assert _topics(bootstrap) == set()  # not even a name it may not describe
    errors = _produce(bootstrap, "events")
    assert errors and all(e.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED for e in errors)
    got, consume_errors = _consume(bootstrap, "events", "readers", 3)
    assert got == [] and consume_errors, "a consumer without ACLs must be refused"
    # Creating a topic needs CREATE on the cluster or the topic.
    with pytest.raises(KafkaException) as refused:
        anonymous.create_topics([NewTopic("more", 1)])["more"].result(30)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # Listing ACLs needs DESCRIBE on the cluster.
    listing = processes.start("acls", "--bootstrap-server", bootstrap, "--list")
    assert listing.wait(60) == 1
    assert "DescribeAcls: CLUSTER_AUTHORIZATION_FAILED" in listing.output()

    # The admin grants ANONYMOUS producer and consumer rights on events.
    out = _acls(processes, ssl_bootstrap, admin_config, "--add", "--allow-principal", "User:ANONYMOUS",
                "--topic", "events", "--producer")
    assert ("Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=events, patternType=LITERAL)`: \n"
            " \t(principal=User:ANONYMOUS, host=*, operation=WRITE, permissionType=ALLOW)\n") in out
    _acls(processes, ssl_bootstrap, admin_config, "--add", "--allow-principal", "User:ANONYMOUS", "--topic", "events",
          "--consumer", "--group", "readers")
    assert _acls(processes, ssl_bootstrap, admin_config, "--list", "--topic", "events") == (
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
    _acls(processes, ssl_bootstrap, admin_config, "--remove", "--force", "--allow-principal", "User:ANONYMOUS",
          "--operation", "Write", "--topic", "events")
    assert [b.operation.name for b in admin.describe_acls(AclBindingFilter(
        ResourceType.TOPIC, "events", ResourcePatternType.LITERAL, None, None, AclOperation.WRITE,
        AclPermissionType.ANY)).result(10)] == []
    errors = _produce(bootstrap, "events")
    assert errors and all(e.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED for e in errors)


def test_describe_topics_reports_authorized_operations_to_real_admin_clients(processes, tmp_path):
    """Metadata v8+ (KIP-430) and v12 (lookups by topic id) through librdkafka and kafka-python."""
    from confluent_kafka import KafkaError, KafkaException, TopicCollection
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, AdminClient
    from confluent_kafka.admin import ResourcePatternType, ResourceType
    from kafka import KafkaAdminClient

    bootstrap, _, _, _, admin = _secured_node_with_topics(processes, tmp_path, "127.0.0.1",
                                                          {"visible": 2, "hidden": 1})
    for f in admin.create_acls([AclBinding(ResourceType.TOPIC, "visible", ResourcePatternType.LITERAL,
                                           "User:ANONYMOUS", "*", op, AclPermissionType.ALLOW)
                                for op in (AclOperation.READ, AclOperation.ALTER_CONFIGS)]).values():
        f.result(30)

    def described(client, name):
        return client.describe_topics(TopicCollection([name]), include_authorized_operations=True)[name].result(30)

    topic_ops = {"READ", "WRITE", "CREATE", "DESCRIBE", "DELETE", "ALTER", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}
    assert {op.name for op in described(admin, "visible").authorized_operations} == topic_ops  # a super user
    wait_until = time.monotonic() + 15
    anonymous = AdminClient({"bootstrap.servers": bootstrap})
    while True:  # the ACLs reach the broker's image a moment after CreateAcls answers
        try:
            mine = described(anonymous, "visible")
            break
        except KafkaException:
            assert time.monotonic() < wait_until
            time.sleep(0.2)
    assert {op.name for op in mine.authorized_operations} == {"READ", "DESCRIBE", "ALTER_CONFIGS",
                                                               "DESCRIBE_CONFIGS"}
    assert len(mine.partitions) == 2 and mine.topic_id is not None
    with pytest.raises(KafkaException) as refused:
        described(anonymous, "hidden")
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    # kafka-python asks Metadata v12 with the operations, by name and by topic id.
    kp = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        [by_name] = kp.describe_topics(["visible"])
        assert by_name["error_code"] == 0 and set(by_name["authorized_operations"]) == {
            "READ", "DESCRIBE", "ALTER_CONFIGS", "DESCRIBE_CONFIGS"}
        visible_id = uuid.UUID(str(by_name["topic_id"]))
        [by_id] = kp.describe_topics([visible_id])
        assert (by_id["name"], by_id["error_code"]) == ("visible", 0)
        hidden = described(admin, "hidden").topic_id
        hidden_id = uuid.UUID(int=((hidden.get_most_significant_bits() % 2**64) << 64)
                              | (hidden.get_least_significant_bits() % 2**64))
        [unseen] = kp.describe_topics([hidden_id])
        assert unseen["error_code"] == KafkaError.UNKNOWN_TOPIC_ID and unseen["name"] is None  # never named
    finally:
        kp.close()


def test_admin_api_rows_refused_then_allowed_by_the_acl_each_names(processes, tmp_path):
    """Rows of docs/authorization.md's table through librdkafka's AdminClient as User:ANONYMOUS:
    each call is refused with the row's error, then allowed once the admin grants exactly the
    row's operation on the row's resource (one topic per row, so no grant implies another's)."""
    from confluent_kafka import KafkaError, KafkaException, TopicPartition
    from confluent_kafka.admin import (
        AclBinding, AclBindingFilter, AclOperation as Op, AclPermissionType, AdminClient, AlterConfigOpType,
        ConfigEntry, ConfigResource, NewPartitions, NewTopic, ResourcePatternType, ResourceType,
    )

    bootstrap, ssl_bootstrap, admin_conf, _, admin = _secured_node_with_topics(
        processes, tmp_path, "127.0.0.1", dict.fromkeys(("described", "altered", "grown", "trimmed", "deleted"), 1))
    assert _produce(ssl_bootstrap, "trimmed", admin_conf) == [None] * 3
    anonymous = AdminClient({"bootstrap.servers": bootstrap})
    topic_denied, cluster_denied = KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED
    any_acl = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, Op.ANY,
                               AclPermissionType.ANY)
    altered = ConfigResource(ResourceType.TOPIC, "altered", incremental_configs=[
        ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)])
    cluster = (ResourceType.BROKER, "kafka-cluster")  # librdkafka calls the ACL resource type 4 (CLUSTER) BROKER
    rows = [  # (API, call, (resource type, name, operation) to grant, error when refused)
        ("DescribeConfigs", lambda: anonymous.describe_configs([ConfigResource(ResourceType.TOPIC, "described")])[
            ConfigResource(ResourceType.TOPIC, "described")].result(10),
         (ResourceType.TOPIC, "described", Op.DESCRIBE_CONFIGS), topic_denied),
        ("IncrementalAlterConfigs", lambda: anonymous.incremental_alter_configs([altered])[altered].result(10),
         (ResourceType.TOPIC, "altered", Op.ALTER_CONFIGS), topic_denied),
        ("CreatePartitions", lambda: anonymous.create_partitions([NewPartitions("grown", 2)])["grown"].result(10),
         (ResourceType.TOPIC, "grown", Op.ALTER), topic_denied),
        # (librdkafka asks the partition's leader: Describe lets it see the topic, and does not imply Delete)
        ("DeleteRecords", lambda: anonymous.delete_records([TopicPartition("trimmed", 0, 2)])[
            TopicPartition("trimmed", 0, 2)].result(10), (ResourceType.TOPIC, "trimmed", Op.DELETE), topic_denied),
        ("DeleteTopics", lambda: anonymous.delete_topics(["deleted"])["deleted"].result(10),
         (ResourceType.TOPIC, "deleted", Op.DELETE), topic_denied),
        ("CreateTopics", lambda: anonymous.create_topics([NewTopic("made", 1)])["made"].result(10),
         (ResourceType.TOPIC, "made", Op.CREATE), topic_denied),
        ("CreateAcls", lambda: list(anonymous.create_acls([AclBinding(
            ResourceType.GROUP, "g", ResourcePatternType.LITERAL, "User:x", "*", Op.READ,
            AclPermissionType.ALLOW)]).values())[0].result(10), (*cluster, Op.ALTER), cluster_denied),
    ]

    def grant(rtype, name, op) -> None:
        for f in admin.create_acls([AclBinding(rtype, name, ResourcePatternType.LITERAL, "User:ANONYMOUS", "*", op,
                                               AclPermissionType.ALLOW)]).values():
            f.result(30)

    def outcome(call, api: str, passing: set) -> int | None:
        """The call's error code (None: it succeeded), once it is not one of `passing` (the
        ACL reaches the broker's image, and the client's metadata, a moment after CreateAcls)."""
        deadline = time.monotonic() + 15
        while True:
            try:
                call()
                return None
            except KafkaException as e:
                code = e.args[0].code()
                if code not in passing or time.monotonic() > deadline:
                    return code
                time.sleep(0.2)

    grant(ResourceType.TOPIC, "trimmed", Op.DESCRIBE)
    # DescribeAcls (CLUSTER Describe): librdkafka drops the response's top-level error, so refused
    # it lists nothing; allowed, the ACLs there are (Describe on trimmed, and this one)
    assert anonymous.describe_acls(any_acl).result(10) == []
    grant(*cluster, Op.DESCRIBE)
    deadline = time.monotonic() + 15
    while len(anonymous.describe_acls(any_acl).result(10)) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    for api, call, (rtype, name, op), refused in rows:
        assert outcome(call, api, {KafkaError._NOENT}) == refused, api
        grant(rtype, name, op)
        assert outcome(call, api, {refused}) is None, api
    topics = set(admin.list_topics(timeout=10).topics)
    assert "made" in topics and "deleted" not in topics


def test_group_and_transaction_rows_refused_then_allowed_for_librdkafka(processes, tmp_path):
    """The group and transaction rows of docs/authorization.md's table through librdkafka as
    User:ANONYMOUS, each refused with its error, then allowed by the ACL the row names: a
    consumer group (FindCoordinator, OffsetFetch: GROUP Describe; JoinGroup and OffsetCommit:
    GROUP Read), an idempotent producer (CLUSTER IdempotentWrite) and a transactional one
    (TRANSACTIONAL_ID Describe to find its coordinator, Write to initialise, produce, send
    offsets and commit; GROUP Read for the offsets)."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
    from confluent_kafka.admin import (
        AclBinding, AclBindingFilter, AclOperation as Op, AclPermissionType, ResourcePatternType, ResourceType,
    )

    bootstrap, ssl_bootstrap, admin_conf, _, admin = _secured_node_with_topics(
        processes, tmp_path, "127.0.0.1", {"grouped": 1, "ledger": 1})
    assert _produce(ssl_bootstrap, "grouped", admin_conf) == [None] * 3

    def grant(rtype, name, op) -> None:
        binding = AclBinding(rtype, name, ResourcePatternType.LITERAL, "User:ANONYMOUS", "*", op,
                             AclPermissionType.ALLOW)
        for f in admin.create_acls([binding]).values():
            f.result(30)
        # the ACL reaches the broker's image (which DescribeAcls reads) a moment after CreateAcls answers
        deadline = time.monotonic() + 15
        while binding not in admin.describe_acls(AclBindingFilter(
                rtype, name, ResourcePatternType.LITERAL, None, None, op, AclPermissionType.ANY)).result(10):
            assert time.monotonic() < deadline
            time.sleep(0.1)

    grant(ResourceType.TOPIC, "grouped", Op.READ)  # the topic is allowed: what is refused is the group
    grouped = TopicPartition("grouped", 0)

    def consumer() -> Consumer:
        return Consumer({"bootstrap.servers": bootstrap, "group.id": "team", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})

    def group_error(call) -> int | None:
        try:
            call()
            return None
        except KafkaException as e:
            return e.args[0].code()

    def joined(c: Consumer) -> tuple[list, list]:
        c.subscribe(["grouped"])
        got, errors = [], []
        deadline = time.monotonic() + 15
        while len(got) < 3 and not errors and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is not None:
                (errors if msg.error() else got).append(msg.error().code() if msg.error() else msg.value())
        return got, errors

    denied = KafkaError.GROUP_AUTHORIZATION_FAILED
    c = consumer()
    try:  # no ACL on the group: its coordinator is not even found (FindCoordinator: Describe)
        assert joined(c) == ([], [denied])
    finally:
        c.close()
    grant(ResourceType.GROUP, "team", Op.DESCRIBE)
    c = consumer()
    try:  # Describe: OffsetFetch answers, JoinGroup and OffsetCommit are refused (Read)
        [fetched] = c.committed([grouped], timeout=10)
        assert fetched.error is None and fetched.offset < 0  # nothing committed yet
        c.assign([grouped])
        assert group_error(lambda: c.commit(offsets=[TopicPartition("grouped", 0, 1)], asynchronous=False)) == denied
        c.unassign()
        assert joined(c) == ([], [denied])
    finally:
        c.close()
    grant(ResourceType.GROUP, "team", Op.READ)
    c = consumer()
    try:  # Read: the group joins, consumes and commits
        assert joined(c) == ([b"v0", b"v1", b"v2"], [])
        c.commit(asynchronous=False)
        assert [tp.offset for tp in c.committed([grouped], timeout=10)] == [3]
    finally:
        c.close()

    # an idempotent producer needs CLUSTER IdempotentWrite (or Write on some topic) to get its id
    def idempotent_codes() -> set:
        """The error codes an idempotent producer meets (deliveries', error_cb's, a fatal error's)."""
        errors = []
        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "message.timeout.ms": 5000,
                             "error_cb": errors.append})
        try:
            for i in range(3):
                producer.produce("ledger", b"v%d" % i, on_delivery=lambda err, msg: errors.append(err))
            producer.flush(10)
        except SystemError as e:  # confluent-kafka raises the fatal error on a callback's return
            errors.append(e.__cause__.args[0])
        return {e and e.code() for e in errors}

    grant(ResourceType.TOPIC, "ledger", Op.DESCRIBE)  # librdkafka asks for its id once it knows the topic
    # no CLUSTER IdempotentWrite nor Write on any topic: InitProducerId is refused, a fatal error
    assert KafkaError.CLUSTER_AUTHORIZATION_FAILED in idempotent_codes()
    grant(ResourceType.BROKER, "kafka-cluster", Op.IDEMPOTENT_WRITE)  # (librdkafka's name for CLUSTER)
    # its id granted, its records are refused by the topic's ACL
    assert idempotent_codes() == {KafkaError.TOPIC_AUTHORIZATION_FAILED}
    grant(ResourceType.TOPIC, "ledger", Op.WRITE)
    assert idempotent_codes() == {None}

    def transaction(offsets_group: str) -> int | None:
        """init, one record, offsets sent to the transaction for `offsets_group`, commit: the
        first error's code (None: committed)."""
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "payments",
                             "transaction.timeout.ms": 10_000})
        try:
            producer.init_transactions(10)
            producer.begin_transaction()
            producer.produce("ledger", b"paid")
            reader = Consumer({"bootstrap.servers": bootstrap, "group.id": offsets_group})
            group = reader.consumer_group_metadata()
            reader.close()
            producer.send_offsets_to_transaction([TopicPartition("grouped", 0, 3)], group, 10)
            producer.commit_transaction(10)
            return None
        except KafkaException as e:
            return e.args[0].code()

    refused = KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert transaction("team") == refused  # FindCoordinator (Describe)
    grant(ResourceType.TRANSACTIONAL_ID, "payments", Op.DESCRIBE)
    assert transaction("team") == refused  # InitProducerId (Write)
    grant(ResourceType.TRANSACTIONAL_ID, "payments", Op.WRITE)
    assert transaction("auditors") == denied  # AddOffsetsToTxn: GROUP Read on the offsets' group
    assert transaction("team") is None
