"""A fault in the active controller (Kafka's QuorumController.renounce): the request fails with
UNKNOWN_SERVER_ERROR, nothing of the failed operation is written, the speculative state goes
back to the committed image, a healthy controller takes over and no process stops. A record
too large for the metadata log is refused without a fault.
3 controllers + 1 broker observer over TCP on 127.0.0.1, in one process."""
from __future__ import annotations

import uuid

import pytest

from metadata.controller import requests as controller_requests
from metadata.controller.topics import CreatableTopic
from metadata.controller.service import MAX_RECORD_BYTES, ControllerFault
from metadata.errors import ApiError
from metadata.image import TOPIC_RESOURCE
from metadata.records import Config, PartitionChange, Topic

from tests.metadata.metadata_cluster import MetadataCluster, open_client
from wire.error_codes import ErrorCode


@pytest.fixture
async def cluster(nursery):
    c = MetadataCluster(nursery, controllers=3, brokers=(101,))
    await c.start_all()
    await c.wait_active()
    yield c
    nursery.cancel_scope.cancel()


def _epoch(cluster, node):
    return cluster.nodes[node].driver.status().epoch


async def _new_active(cluster, renounced_epoch):
    def check():
        active = cluster.active_controller()
        return active if active is not None and _epoch(cluster, active) > renounced_epoch else None
    return await cluster.wait_for(check, 20)


async def test_a_fault_while_applying_renounces_reverts_and_another_controller_takes_over(
        cluster, nursery, monkeypatch):
    client = await open_client(cluster, nursery)
    await cluster.wait_for(lambda: any(not b.fenced for b in cluster.committed_image(1).brokers.values()))
    assert (await client.create_topics([CreatableTopic("before", 1, 1)])).results[0].error == ErrorCode.NONE
    first = cluster.active_controller()
    svc = cluster.service(first)
    epoch = _epoch(cluster, first)

    def too_large(image, next_offset, now):
        return [[Config(TOPIC_RESOURCE, "before", "retention.ms", "9" * MAX_RECORD_BYTES)]], None

    # A record over the limit is refused before anything is applied: no fault, no renounce.
    with pytest.raises(ApiError) as refused:
        await svc.submit("TooLarge", too_large)
    assert refused.value.code == ErrorCode.RECORD_LIST_TOO_LARGE
    assert svc.active and not svc.renounced and "retention.ms" not in svc.image.topic_config("before")

    def half_valid(image, next_offset, now):
        # A valid first batch, then one that does not apply: a bug in the middle of an operation.
        return [[Topic("half", uuid.UUID(int=4242))], [PartitionChange(0, uuid.UUID(int=999), isr=(101,))]], None

    with pytest.raises(ControllerFault):
        await svc.submit("HalfValid", half_valid)
    assert not svc.active and svc.image is None and [e for e, _ in svc.renounced] == [epoch]
    second = await _new_active(cluster, epoch)

    # The same through a client: the request gets UNKNOWN_SERVER_ERROR, the controller renounces.
    real = controller_requests.create_topics

    def faulty(image, topics, **kw):
        if any(t.name == "boom" for t in topics):
            raise RuntimeError("injected fault")
        return real(image, topics, **kw)

    monkeypatch.setattr(controller_requests, "create_topics", faulty)
    epoch = _epoch(cluster, second)
    reply = await client.create_topics([CreatableTopic("boom", 1, 1)])
    assert reply.results[0].error == ErrorCode.UNKNOWN_SERVER_ERROR
    assert [e for e, _ in cluster.service(second).renounced] == [epoch]
    await _new_active(cluster, epoch)

    reply = await client.create_topics([CreatableTopic("after", 1, 1)])
    assert reply.results[0].error == ErrorCode.NONE
    await cluster.wait_for(lambda: all("after" in cluster.committed_image(i).topics_by_name
                                       for i in cluster.controller_ids))
    for i in cluster.controller_ids:
        names = set(cluster.committed_image(i).topics_by_name)
        assert {"before", "after"} <= names and not names & {"half", "boom"}
    await cluster.wait_for(lambda: "after" in cluster.broker_image(101).topics_by_name)
    assert all(scope.cancel_called is False for scope in cluster.scopes.values())  # every node runs
