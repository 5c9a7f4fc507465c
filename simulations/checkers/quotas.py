"""Quota checker: every broker enforces the client quotas the committed metadata log says.

Quotas are metadata records, so after any failover, restart or snapshot load each broker must
give every (user, client-id) the quota Kafka's precedence (KIP-55) picks from the image
replayed from the committed log at the broker's offset, measured under the same tags. Image
equality (the metadata checker) does not imply that: a broker decides through its own quota
path (broker.quotas.enforcement.ClientQuotas.effective), which could read a stale view or
apply the levels in the wrong order.

- QuotaMatchesLog: for every live broker whose image changed, each (user, client-id, key) of
  simulations.workloads.quotas.QUOTA_QUESTIONS gets the same bound and metric tags from the
  broker as from metadata.client_quotas.resolve over the reference image at the same offset.

Also run once more over every live broker at the end of the run (`check_all`).
"""
from __future__ import annotations

from metadata.client_quotas import resolve
from simulations.checkers.broker_decisions import BrokerDecisionsChecker
from simulations.checkers.metadata import MetadataChecker

__all__ = ["QuotaChecker"]


class QuotaChecker(BrokerDecisionsChecker):
    def __init__(self, metadata: MetadataChecker, questions):
        super().__init__(metadata)
        self.questions = tuple(questions)

    def compare(self, node: int, broker, image, expected_image) -> None:
        for user, client_id, key in self.questions:
            self.asked += 1
            want = resolve(expected_image.client_quotas, user, client_id, key)
            got = broker.client_quotas.effective(user, client_id, key)
            if got != want:
                self.metadata.raft.violate(
                    "QuotaMatchesLog",
                    f"broker {node} at metadata offset {image.offset} gives user {user!r} client-id "
                    f"{client_id!r} {key}={got.bound} measured as {got.tags}; the committed log gives "
                    f"{want.bound} measured as {want.tags}")
                return  # one report per broker image
