"""Metadata, auto topic creation, admin requests forwarded to the controller, configs, DescribeCluster."""
import trio

from metadata.records import BrokerRegistrationChange
from wire.batch_header import iter_batches

from tests.broker import builders as B
from tests.broker.harness import RawClient, running_cluster
from wire.error_codes import ErrorCode as E
from wire.protocol import (
    AlterConfigsRequest, ApiVersionsRequest, CreatePartitionsRequest, DescribeClusterRequest,
    DescribeConfigsRequest, IncrementalAlterConfigsRequest,
)

TOPIC = 2


async def test_api_versions_advertises_exactly_the_handled_apis():
    async with running_cluster() as c:
        client = await RawClient.connect(c.brokers[0].port)
        resp = await client.call(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
        table = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        assert table == {0: (0, 10), 1: (4, 16), 2: (1, 3), 3: (1, 12), 18: (0, 3), 23: (0, 3), 32: (0, 2),
                         33: (0, 1), 44: (0, 1), 60: (0, 1),
                         # up to the versions strict about controller_mutation_rate (KIP-599)
                         19: (0, 6), 20: (0, 5), 37: (0, 3),
                         # groups, offsets, InitProducerId (broker.handlers.groups / offsets / init_producer_id);
                         # the group APIs up to the versions carrying group_instance_id (KIP-345)
                         8: (2, 7), 9: (1, 7), 10: (0, 1), 11: (0, 5), 12: (0, 3), 13: (0, 3), 14: (0, 3),
                         15: (0, 4), 16: (0, 5), 22: (0, 1), 42: (0, 1), 47: (0, 0),
                         # DescribeAcls, CreateAcls, DeleteAcls (broker.handlers.acls)
                         29: (0, 3), 30: (0, 3), 31: (0, 3),
                         17: (0, 1), 36: (0, 2),  # SASL (served in a login; ILLEGAL_SASL_STATE after)
                         50: (0, 0), 51: (0, 0),  # SCRAM credentials (KIP-554)
                         # ElectLeaders, Alter/ListPartitionReassignments (broker.handlers.reassignments)
                         43: (0, 2), 45: (0, 0), 46: (0, 0),
                         # DeleteRecords, DescribeLogDirs, DescribeQuorum, UnregisterBroker
                         21: (0, 2), 35: (0, 4), 55: (0, 2), 64: (0, 0),
                         # transactions (broker.handlers.transactions, transactions_admin)
                         24: (0, 4), 25: (0, 2), 26: (0, 2), 27: (0, 0), 28: (0, 3), 61: (0, 0), 65: (0, 0),
                         66: (0, 1),
                         48: (0, 1), 49: (0, 1),  # client quotas (KIP-546)
                         75: (0, 0),  # DescribeTopicPartitions (KIP-966)
                         80: (0, 0), 81: (0, 0)}  # AddRaftVoter, RemoveRaftVoter (KIP-853)
        v0 = await client.call(ApiVersionsRequest(), 0)
        assert v0.error_code == 0 and len(v0.api_keys) == len(table)


async def test_metadata_lists_brokers_leaders_and_spreads_leaders_across_brokers():
    async with running_cluster(3) as c:
        client = await RawClient.connect(c.brokers[1].port)
        assert (await client.call(B.create_topic("t", 6), 4)).topics[0].error_code == 0
        resp = await client.call(B.metadata(all_topics=True), 5)
        assert [(b.node_id, b.port) for b in resp.brokers] == [(b.node_id, b.port) for b in c.brokers]
        assert resp.cluster_id == "test-cluster" and resp.controller_id == 2
        (topic,) = resp.topics
        assert topic.name == "t" and [p.partition_index for p in topic.partitions] == list(range(6))
        leaders = [p.leader_id for p in topic.partitions]
        assert sorted(set(leaders)) == [1, 2, 3]
        assert all(p.isr_nodes == [p.leader_id] and p.offline_replicas == [] for p in topic.partitions)
        # Each partition is writable on its leader and refused elsewhere.
        for p in topic.partitions:
            leader = await RawClient.connect(c.broker(p.leader_id).port)
            other = await RawClient.connect(c.broker(p.leader_id % 3 + 1).port)
            ok = B.one_partition(await leader.call(B.produce("t", p.partition_index, B.batch(1)), 8))
            bounced = B.one_partition(await other.call(B.produce("t", p.partition_index, B.batch(1)), 8))
            assert (ok.error_code, bounced.error_code) == (E.NONE, E.NOT_LEADER_OR_FOLLOWER)
            fetched = B.one_partition(await other.call(B.fetch([("t", p.partition_index, 0)]), 11))
            assert fetched.error_code == E.NOT_LEADER_OR_FOLLOWER


async def test_auto_topic_creation_when_enabled_and_allowed():
    async with running_cluster() as c:
        client = await RawClient.connect(c.brokers[0].port)
        first = await client.call(B.metadata("auto"), 5)
        assert first.topics[0].error_code in (E.LEADER_NOT_AVAILABLE, E.NONE)
        with trio.fail_after(10):
            while True:
                resp = await client.call(B.metadata("auto"), 5)
                if resp.topics[0].error_code == E.NONE:
                    break
                await trio.sleep(0.01)
        assert len(resp.topics[0].partitions) == 1
        refused = await client.call(B.metadata("other", auto_create=False), 5)
        assert refused.topics[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        bad = await client.call(B.metadata("bad name!"), 5)
        assert bad.topics[0].error_code == E.INVALID_TOPIC_EXCEPTION
        assert c.controller.calls.count("create_topics") == 1


async def test_auto_topic_creation_without_a_controller_logs_one_line_and_asks_again(caplog):
    from metadata.controller.client import ControllerUnavailableError

    async with running_cluster() as c:
        create_topics, attempts = c.controller.create_topics, []

        async def unavailable(topics, **kwargs):
            attempts.append([t.name for t in topics])
            if len(attempts) == 1:
                raise ControllerUnavailableError("no active controller answered CreateTopicsRequest within 30.0s")
            return await create_topics(topics, **kwargs)
        c.controller.create_topics = unavailable
        client = await RawClient.connect(c.brokers[0].port)
        with trio.fail_after(10):
            while (await client.call(B.metadata("auto"), 5)).topics[0].error_code != E.NONE:
                await trio.sleep(0.01)
        assert attempts == [["auto"], ["auto"]]
        failed = [r for r in caplog.records if "auto-creating topics" in r.getMessage()]
        assert [(r.levelname, r.exc_info) for r in failed] == [("WARNING", None)]
        assert "no active controller answered" in failed[0].getMessage()


async def test_auto_topic_creation_disabled_by_config():
    async with running_cluster(static={"auto.create.topics.enable": "false"}) as c:
        client = await RawClient.connect(c.brokers[0].port)
        resp = await client.call(B.metadata("auto"), 5)
        assert resp.topics[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        assert c.controller.calls == []


async def test_create_topics_errors_come_from_the_controller_logic():
    async with running_cluster() as c:
        client = await RawClient.connect(c.brokers[0].port)
        assert (await client.call(B.create_topic("t", 2), 4)).topics[0].error_code == 0
        again = (await client.call(B.create_topic("t", 2), 4)).topics[0]
        assert again.error_code == E.TOPIC_ALREADY_EXISTS and "already exists" in again.error_message
        assert (await client.call(B.create_topic("x", 0), 4)).topics[0].error_code == E.INVALID_PARTITIONS
        assert (await client.call(B.create_topic("y", 1, 3), 4)).topics[0].error_code == E.INVALID_REPLICATION_FACTOR
        assert (await client.call(B.create_topic("z", configs={"retention.ms": "soon"}), 4)).topics[0].error_code \
            == E.INVALID_CONFIG


async def test_delete_topic_removes_its_logs():
    async with running_cluster() as c:
        b = c.brokers[0]
        client = await RawClient.connect(b.port)
        await client.call(B.create_topic("t", 2), 4)
        await client.call(B.produce("t", 0, B.batch(3)), 8)
        data_dir = b.config.data_dirs[0]
        assert {"t-0", "t-1"} <= set(c.env.fs.listdir(data_dir))
        resp = await client.call(B.delete_topics("t", "missing"), 3)
        assert [(r.name, r.error_code) for r in resp.responses] == [("t", 0), ("missing", E.UNKNOWN_TOPIC_OR_PARTITION)]
        await c.settle()
        assert not any(name.startswith("t-") for name in c.env.fs.listdir(data_dir))
        assert b.replicas.get("t", 0) is None and b.log_manager.get_log("t", 0) is None
        assert B.one_partition(await client.call(B.produce("t", 0, B.batch(1)), 8)).error_code == \
            E.UNKNOWN_TOPIC_OR_PARTITION
        # A new topic with the same name starts from an empty log.
        await client.call(B.create_topic("t", 1), 4)
        assert B.one_partition(await client.call(B.produce("t", 0, B.batch(1)), 8)).base_offset == 0


async def test_create_partitions_grows_the_topic():
    async with running_cluster(2) as c:
        client = await RawClient.connect(c.brokers[0].port)
        await client.call(B.create_topic("t", 1), 4)
        P = CreatePartitionsRequest
        req = P(topics=[P.CreatePartitionsTopic(name="t", count=3, assignments=None),
                        P.CreatePartitionsTopic(name="missing", count=2, assignments=None)],
                timeout_ms=5000, validate_only=False)
        resp = await client.call(req, 1)
        assert [(r.name, r.error_code) for r in resp.results] == [("t", 0), ("missing", E.UNKNOWN_TOPIC_OR_PARTITION)]
        md = await client.call(B.metadata("t"), 5)
        assert len(md.topics[0].partitions) == 3
        await c.settle()
        for p in md.topics[0].partitions:
            leader = await RawClient.connect(c.broker(p.leader_id).port)
            assert B.one_partition(await leader.call(B.produce("t", p.partition_index, B.batch(1)), 8)).error_code == 0


async def test_describe_and_alter_configs_reach_the_logs():
    async with running_cluster(static={"log.retention.hours": "48"}) as c:
        b = c.brokers[0]
        client = await RawClient.connect(b.port)
        await client.call(B.create_topic("t", 1, configs={"cleanup.policy": "compact"}), 4)
        D = DescribeConfigsRequest
        desc = await client.call(D(resources=[D.DescribeConfigsResource(
            resource_type=TOPIC, resource_name="t", configuration_keys=["cleanup.policy", "retention.ms"])],
            include_synonyms=True), 2)
        configs = {e.name: e for e in desc.results[0].configs}
        assert configs["cleanup.policy"].value == "compact" and configs["cleanup.policy"].config_source == 1
        assert configs["retention.ms"].value == str(48 * 3600 * 1000) and configs["retention.ms"].config_source == 4
        assert b.replicas.get("t", 0).log.config.compact
        assert b.replicas.get("t", 0).log.config.retention_ms == 48 * 3600 * 1000

        A = AlterConfigsRequest
        resp = await client.call(A(resources=[A.AlterConfigsResource(resource_type=TOPIC, resource_name="t", configs=[
            A.AlterableConfig(name="retention.ms", value="1000")])], validate_only=False), 1)
        assert resp.responses[0].error_code == 0
        await c.settle()
        config = b.replicas.get("t", 0).log.config
        assert config.retention_ms == 1000 and not config.compact  # legacy Alter replaces the whole set

        I = IncrementalAlterConfigsRequest
        resp = await client.call(I(resources=[I.AlterConfigsResource(resource_type=TOPIC, resource_name="t", configs=[
            I.AlterableConfig(name="max.message.bytes", config_operation=0, value="200")])], validate_only=False), 1)
        assert resp.responses[0].error_code == 0
        await c.settle()
        assert b.replicas.get("t", 0).log.config.retention_ms == 1000
        too_big = B.one_partition(await client.call(B.produce("t", 0, B.batch(5, value_size=100)), 8))
        assert too_big.error_code == E.MESSAGE_TOO_LARGE

        bad = await client.call(I(resources=[I.AlterConfigsResource(resource_type=TOPIC, resource_name="nope", configs=[
            I.AlterableConfig(name="retention.ms", config_operation=0, value="1")])], validate_only=False), 1)
        assert bad.responses[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION


async def test_retention_runs_in_the_background_per_topic_config():
    overrides = {"retention_check_interval_s": 0.02}
    async with running_cluster(broker_overrides=overrides) as c:
        client = await RawClient.connect(c.brokers[0].port)
        await client.call(B.create_topic("t", 1, configs={"segment.bytes": str(1 << 20), "retention.bytes": "1"}), 4)
        for _ in range(3):
            r = B.one_partition(await client.call(B.produce("t", 0, B.batch(8, value_size=100_000)), 8))
            assert r.error_code == 0
        with trio.fail_after(10):
            while True:
                earliest = (await client.call(B.list_offsets("t", 0, -2), 3)).topics[0].partitions[0].offset
                if earliest > 0:
                    break
                await trio.sleep(0.02)
        gone = B.one_partition(await client.call(B.fetch([("t", 0, 0)]), 11))
        assert gone.error_code == E.OFFSET_OUT_OF_RANGE


async def test_describe_cluster():
    async with running_cluster(2) as c:
        client = await RawClient.connect(c.brokers[0].port)
        resp = await client.call(DescribeClusterRequest(include_cluster_authorized_operations=False), 1)
        assert resp.error_code == 0 and resp.cluster_id == "test-cluster" and resp.controller_id == 1
        assert [(b.broker_id, b.port) for b in resp.brokers] == [(1, c.brokers[0].port), (2, c.brokers[1].port)]


async def test_a_failing_controller_call_answers_unknown_server_error():
    async with running_cluster() as c:
        async def broken(*args, **kwargs):
            raise RuntimeError("controller exploded")

        c.controller.create_topics = broken
        client = await RawClient.connect(c.brokers[0].port)
        resp = await client.call(B.create_topic("t", 1), 4)
        assert resp.topics[0].error_code == E.UNKNOWN_SERVER_ERROR
        # The connection and the broker carry on.
        assert (await client.call(B.metadata(all_topics=True), 5)).topics == []


async def test_compaction_runs_in_the_background_for_compacted_topics():
    # The cleaner keeps its own cadence (log.cleaner.backoff.ms), not the retention check's.
    overrides = {"retention_check_interval_s": 300.0, "cleaner_backoff_s": 0.02}
    async with running_cluster(broker_overrides=overrides) as c:
        client = await RawClient.connect(c.brokers[0].port)
        await client.call(B.create_topic("c", 1, configs={"cleanup.policy": "compact",
                                                          "segment.bytes": str(1 << 20),
                                                          "min.cleanable.dirty.ratio": "0.01"}), 4)
        for _ in range(4):  # the same 8 keys again and again: only the last values must stay
            r = B.one_partition(await client.call(B.produce("c", 0, B.batch(8, value_size=100_000)), 8))
            assert r.error_code == 0
        with trio.fail_after(10):
            while True:
                part = B.one_partition(await client.call(B.fetch([("c", 0, 0)], partition_max_bytes=100), 11))
                first = next(iter_batches(bytes(part.records)))[1]
                if first.base_offset > 0 or first.records_count < 8:
                    break  # the first batch's records were superseded and cleaned away
                await trio.sleep(0.02)
        assert part.high_watermark == 32 and part.log_start_offset == 0


async def test_metadata_shows_offline_replicas_and_no_leader_for_a_fenced_leader():
    async with running_cluster(2) as c:
        client = await RawClient.connect(c.brokers[0].port)
        await client.call(B.create_topic("t", assignments=[(2, 1)]), 4)
        reg = c.controller.image.brokers[2]
        c.controller.commit([BrokerRegistrationChange(2, reg.epoch, fenced=True)])
        resp = await client.call(B.metadata("t"), 5)
        (p,) = resp.topics[0].partitions
        # Fenced just now: still listed for a moment (broker.metadata_cache), but offline.
        assert [b.node_id for b in resp.brokers] == [1, 2]
        assert (p.error_code, p.leader_id, p.replica_nodes, p.offline_replicas) == \
            (E.LEADER_NOT_AVAILABLE, -1, [2, 1], [2])


async def test_an_unreachable_controller_answers_request_timed_out():
    from metadata.controller.client import ControllerUnavailableError  # what the real channel raises

    async with running_cluster() as c:
        async def unreachable(*args, **kwargs):
            raise ControllerUnavailableError("no controller answered")

        c.controller.create_topics = c.controller.delete_topics = unreachable
        c.controller.incremental_alter_configs = unreachable
        client = await RawClient.connect(c.brokers[0].port)
        assert (await client.call(B.create_topic("t", 1), 4)).topics[0].error_code == E.REQUEST_TIMED_OUT
        assert (await client.call(B.delete_topics("t"), 3)).responses[0].error_code == E.REQUEST_TIMED_OUT
        I = IncrementalAlterConfigsRequest
        resp = await client.call(I(resources=[I.AlterConfigsResource(resource_type=TOPIC, resource_name="t", configs=[
            I.AlterableConfig(name="retention.ms", config_operation=0, value="1")])], validate_only=False), 1)
        assert resp.responses[0].error_code == E.REQUEST_TIMED_OUT
