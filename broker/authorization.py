"""What the caller on this connection may do, asked by the handlers as Kafka's KafkaApis asks.

Each handler makes its checks in one place (the per-resource ones filter items, as Kafka's
do) through `allowed(broker, operation, resource_type, name)` and the topic/group/cluster
shorthands. The decision is `metadata.authorizer.authorize` over the broker's current
image, with the broker's `authorizer.class.name` / `super.users` /
`allow.everyone.if.no.acl.found`; without an authorizer everything is allowed.

Who is asking comes from the connection, never from a request: the connection's security
state (broker.connection_context: its authenticated principal and peer host), read at each
check so a SASL login or re-authentication is seen at once; `User:ANONYMOUS` until a
connection authenticates.
"""
from __future__ import annotations

from typing import NamedTuple

from broker.connection_context import current_security
from metadata.acls import CLUSTER_NAME, AclOperation, ResourceType
from metadata.authorizer import AclIndex, authorize, authorized_operations as _operations
from wire.error_codes import ErrorCode
from wire.security.principal import ANONYMOUS

__all__ = ["Requester", "requester", "allowed", "decide", "topic_allowed", "group_allowed",
           "cluster_allowed", "authorized_operations", "config_resource_error"]


class Requester(NamedTuple):
    principal: str  # "User:alice"
    host: str  # the peer's IP address as text, what ACL hosts are compared with


_ANONYMOUS = Requester(str(ANONYMOUS), "")


def requester() -> Requester:
    """Who sent the request being handled, and from where: the connection's authenticated
    principal (broker.connection_context), User:ANONYMOUS outside a connection."""
    security = current_security()
    if security is None:
        return _ANONYMOUS
    return Requester(str(security.principal), security.peer_host)


def _index(broker) -> AclIndex:
    acls = broker.metadata.image.acls
    index = broker.acl_index
    if index is None or index.source is not acls:  # a new image with other ACLs
        index = broker.acl_index = AclIndex(acls)
    return index


def allowed(broker, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
    if not broker.config.authorizer.enabled:
        return True
    who = requester()
    return decide(broker, who.principal, who.host, operation, resource_type, name)


def decide(broker, principal: str, host: str, operation: int, resource_type: int, name: str) -> bool:
    """This broker's decision for any caller, from its current image (what `allowed` asks for
    the connection's caller; the simulation's authorization checker asks it directly)."""
    return authorize(_index(broker), broker.config.authorizer, principal, host, operation, resource_type, name)


def topic_allowed(broker, operation: AclOperation, topic: str) -> bool:
    return allowed(broker, operation, ResourceType.TOPIC, topic)


def group_allowed(broker, operation: AclOperation, group: str) -> bool:
    return allowed(broker, operation, ResourceType.GROUP, group)


def cluster_allowed(broker, operation: AclOperation) -> bool:
    return allowed(broker, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def authorized_operations(broker, resource_type: ResourceType, name: str) -> int:
    who = requester()
    return _operations(_index(broker), broker.config.authorizer, who.principal, who.host, resource_type, name)


_TOPIC_CONFIG = 2  # Kafka's ConfigResource.Type: TOPIC; BROKER (4) and BROKER_LOGGER (8) are the cluster's


def config_resource_error(broker, operation: AclOperation, resource_type: int, name: str) -> ErrorCode | None:
    """DESCRIBE_CONFIGS / ALTER_CONFIGS on a topic (TOPIC_AUTHORIZATION_FAILED) or on a broker,
    i.e. the cluster (CLUSTER_AUTHORIZATION_FAILED); None when allowed."""
    if resource_type == _TOPIC_CONFIG:
        return None if topic_allowed(broker, operation, name) else ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return None if cluster_allowed(broker, operation) else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
