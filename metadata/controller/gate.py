"""Who may ask the active controller for what: the one check before a controller request runs.

The controller listener is internal: brokers register and heartbeat there, and forward the
admin requests their clients send. A client never reaches it directly, so:

- every controller request must name this cluster; an empty or foreign cluster id is
  refused with INCONSISTENT_CLUSTER_ID (the transport already refuses a foreign one);
- an admin request (metadata.controller.rpc.ADMIN_REQUESTS: topics, partitions, configs,
  elections) must come from a broker: `forwarded_by` must name a broker registered with
  exactly that epoch in the controller's image, else CLUSTER_AUTHORIZATION_FAILED.

On an SSL or SASL controller listener the transport has already admitted only members'
connections (raft.transport.Transport.admit: certificate, login, super.users) before any
frame; these checks add the request-level rules, and on a PLAINTEXT listener they keep out
stray and misconfigured processes and anything that only knows the cluster id.
"""
from __future__ import annotations

from metadata.controller import rpc
from metadata.errors import ApiError
from metadata.image import MetadataImage
from wire.error_codes import ErrorCode

__all__ = ["admit", "check_forwarder"]


def admit(request, cluster_id: str) -> ApiError | None:
    """Why `request` may not run at all (None: it may). Checked before it is queued."""
    theirs = getattr(request, "cluster_id", None)
    if theirs != cluster_id:
        return ApiError(ErrorCode.INCONSISTENT_CLUSTER_ID,
                        f"request names cluster {theirs!r}; this is cluster {cluster_id!r}")
    if isinstance(request, rpc.ADMIN_REQUESTS) and request.forwarded_by is None:
        return ApiError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                        "admin requests reach the controller only forwarded by a broker")
    return None


def check_forwarder(image: MetadataImage, request) -> None:
    """ApiError(CLUSTER_AUTHORIZATION_FAILED) unless an admin request's forwarder is a live
    broker registration. Runs on the controller's task, against its current image."""
    broker_id, epoch = request.forwarded_by
    registration = image.brokers.get(broker_id)
    if registration is None or registration.epoch != epoch:
        raise ApiError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                       f"broker {broker_id} with epoch {epoch} is not registered")
