"""Authorization checker: every broker decides as the committed metadata log says.

ACLs are metadata records, so after any failover, restart or snapshot load every broker must
answer each authorization question exactly as the StandardAuthorizer does over the image
replayed from the committed log at the broker's offset. Image equality (the metadata
checker) does not imply that: a broker decides through its own ACL index, built from its
image, and the index could miss or misread what the image holds.

- AuthorizationMatchesLog: for every live broker whose image changed, each of a fixed set of
  (principal, host, operation, resource) questions (simulations.workloads.acls.QUESTIONS) is
  answered by the broker's own decision path (broker.authorization.decide) and by
  metadata.authorizer.authorize over a fresh index of the reference image at the same offset,
  with the settings the simulation configured (not the broker's); they must agree.

Also run once more over every live broker at the end of the run (`check_all`).
"""
from __future__ import annotations

from broker.authorization import decide
from metadata.authorizer import AclIndex, AuthorizerSettings, authorize
from simulations.checkers.broker_decisions import BrokerDecisionsChecker
from simulations.checkers.metadata import MetadataChecker
from wire.acl_codes import AclOperation, ResourceType

__all__ = ["AuthorizationChecker"]


class AuthorizationChecker(BrokerDecisionsChecker):
    def __init__(self, metadata: MetadataChecker, settings: AuthorizerSettings, questions):
        super().__init__(metadata)
        self.settings = settings
        self.questions = tuple(questions)
        self._reference: dict[int, tuple[object, AclIndex]] = {}  # offset -> (acl map, its index)

    def compare(self, node: int, broker, image, expected_image) -> None:
        index = self._index(image.offset, expected_image.acls)
        for principal, host, op, rtype, name in self.questions:
            self.asked += 1
            want = authorize(index, self.settings, principal, host, op, rtype, name)
            got = decide(broker, principal, host, op, rtype, name)
            if got != want:
                self.metadata.raft.violate(
                    "AuthorizationMatchesLog",
                    f"broker {node} at metadata offset {image.offset} {'allows' if got else 'denies'} "
                    f"{principal}@{host} {AclOperation(op).name} on {ResourceType(rtype).name}:{name}; "
                    f"the committed log {'allows' if want else 'denies'} it")
                return  # one report per broker image

    def _index(self, offset: int, acls) -> AclIndex:
        cached = self._reference.get(offset)
        if cached is not None and cached[0] is acls:
            return cached[1]
        index = AclIndex(acls)
        if len(self._reference) > 64:
            self._reference.clear()
        self._reference[offset] = (acls, index)
        return index
