"""ListGroups v4/v5 (KIP-518 states filter, types filter) through librdkafka's admin client,
against real brokers: what librdkafka's test 0081 asks of list_consumer_groups."""
from __future__ import annotations

from confluent_kafka import ConsumerGroupState, ConsumerGroupType
from confluent_kafka.admin import AdminClient


def test_list_consumer_groups_filters_by_state_and_type(cli, brokers, topic_name):
    assert cli("topics", "--bootstrap-server", brokers, "--create", "--topic", topic_name, "--partitions", 1,
               "--replication-factor", 1).code == 0
    cli("produce", "--bootstrap-server", brokers, "--topic", topic_name, stdin=b"a\n")
    empty_group = f"{topic_name}-empty"
    assert cli("consume", "--bootstrap-server", brokers, "--topic", topic_name, "--group", empty_group,
               "--from-beginning", "--max-messages", 1, "--timeout-ms", 20_000).code == 0  # left: Empty
    admin = AdminClient({"bootstrap.servers": brokers})

    def listed(**kw) -> dict[str, object]:
        result = admin.list_consumer_groups(request_timeout=10, **kw).result(15)
        assert not result.errors
        return {g.group_id: g for g in result.valid}

    everything = listed()
    assert everything[empty_group].state == ConsumerGroupState.EMPTY
    assert empty_group in listed(states={ConsumerGroupState.EMPTY})
    assert empty_group not in listed(states={ConsumerGroupState.STABLE})
    assert empty_group in listed(types={ConsumerGroupType.CLASSIC})
    assert empty_group not in listed(types={ConsumerGroupType.CONSUMER})
