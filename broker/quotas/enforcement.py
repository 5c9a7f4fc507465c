"""Where the server applies client quotas to each answered request (KIP-219).

`ClientQuotas.throttle_ms(...)` records what a request cost against the quotas of the entity
that sent it (its authenticated user and its client-id, metadata.client_quotas) and answers
the throttle time in ms: the larger of

- producer_byte_rate: the Produce request's size (acks=0 included);
- consumer_byte_rate: the Fetch response's size (a follower's replica fetch is exempt); a
  throttled Fetch is answered without its records, whose bytes are then not counted (Kafka
  answers it empty and "unrecords" it; here its partitions stay, with their watermarks, so a
  fetch session's view of them stays as the handler left it);
- request_percentage: the time the request's handler ran on the event loop, as a percentage
  of one second (broker.quotas.run_time: waiting, for data, acks or anything else, is not
  handling); not for acks=0 produces, nor follower fetches, as Kafka;
- controller_mutation_rate: counted by the active controller (metadata.controller
  .mutation_quota), whose throttle the handler put in the CreateTopics / DeleteTopics /
  CreatePartitions response: it is taken from there, as Kafka's broker takes a forwarded
  response's.

The server then puts the time in the response's throttle_time_ms and stops reading that
connection for it. Time comes from the Env.
"""
from __future__ import annotations

from typing import Callable, Mapping

from broker.connection_context import current_security
from broker.quotas.quota_manager import QuotaManager
from metadata.client_quotas import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE, Entity, Resolved
from metrics.registry import MetricsRegistry
from metrics.sampled_stats import QuotaWindow
from wire.protocol import ApiKey

__all__ = ["ClientQuotas", "quota_user"]

_MUTATIONS = frozenset({ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.CREATE_PARTITIONS})
_GAUGES = (("raftkafka_client_quota_rate", "rate"), ("raftkafka_client_quota_throttle_time_ms", "throttle_ms"),
           ("raftkafka_client_quota_bound", "bound"))


def quota_user() -> str:
    """The `user` quota entity of the connection being served: its principal's name."""
    security = current_security()
    return security.principal.name if security is not None else "ANONYMOUS"


class ClientQuotas:
    def __init__(self, env, image: Callable, registry: MetricsRegistry | None = None,
                 window: QuotaWindow = QuotaWindow()):
        self.env = env
        self._image = image
        self.produce = QuotaManager(PRODUCER_BYTE_RATE, window)
        self.fetch = QuotaManager(CONSUMER_BYTE_RATE, window)
        self.request = QuotaManager(REQUEST_PERCENTAGE, window, max_throttle_ms=window.window_ms)
        self.managers = (self.produce, self.fetch, self.request)
        if registry is not None:
            for name, field in _GAUGES:
                registry.gauge(name).set_function(lambda field=field: self._samples(field))

    def quotas(self) -> Mapping[Entity, Mapping[str, float]]:
        """The quotas this broker enforces: its metadata image's."""
        return self._image().client_quotas

    def effective(self, user: str, client_id: str, key: str) -> Resolved:
        """The quota `key` that applies to (user, client_id) on this broker, as its requests are
        measured (what the simulation's quota checker compares with the committed log)."""
        [manager] = [m for m in self.managers if m.key == key]
        return manager.resolve(self.quotas(), user, client_id)

    def _samples(self, field: str) -> dict:
        now_ms = self.env.now() * 1000.0
        return {(m.key, s.user, s.client_id): getattr(s, field) for m in self.managers
                for s in m.stats(now_ms) if getattr(s, field) is not None}

    def throttle_ms(self, header, request, response, request_bytes: int, response_bytes: int,
                    handled_s: float) -> int:
        api = header.api_key
        if api in (ApiKey.FETCH, ApiKey.LIST_OFFSETS) and getattr(request, "replica_id", -1) >= 0:
            return 0  # replication traffic: Kafka's replication quotas, not client quotas
        quotas = self.quotas()
        user = quota_user()
        client_id = header.client_id or ""
        now_ms = self.env.now() * 1000.0
        throttle = 0
        if api == ApiKey.PRODUCE:
            throttle = self.produce.record(quotas, user, client_id, request_bytes, now_ms)
        elif api == ApiKey.FETCH:
            throttle = self.fetch.record(quotas, user, client_id, response_bytes, now_ms)
            if throttle > 0:  # as Kafka: answered without records, which then do not count
                self.fetch.unrecord(quotas, user, client_id, _drop_records(response), now_ms)
        elif api in _MUTATIONS and response is not None:
            throttle = response.throttle_time_ms  # the controller's (controller_mutation_rate)
        if not (api == ApiKey.PRODUCE and request.acks == 0):
            handled_percent = handled_s * 100.0
            throttle = max(throttle, self.request.record(quotas, user, client_id, handled_percent, now_ms))
        return throttle


def _drop_records(response) -> int:
    """Empty the records of a Fetch response; the bytes they held."""
    dropped = 0
    for topic in response.responses:
        for partition in topic.partitions:
            if partition.records:
                dropped += len(partition.records)
                partition.records = b""
    return dropped
