"""The shared skeleton of the checkers that ask every broker questions its metadata image
decides (authorization, client quotas): each live broker is asked whenever its image changes,
and once more at the end of the run, and its answers are compared with the answers the
replayed committed log gives at the broker's image offset.

A subclass implements `compare(node, broker, image, expected_image)`; it reports a violation
through `self.metadata.raft.violate` and counts what it compared in `self.asked`.
"""
from __future__ import annotations

from simulations.checkers.metadata import MetadataChecker

__all__ = ["BrokerDecisionsChecker"]


class BrokerDecisionsChecker:
    def __init__(self, metadata: MetadataChecker):
        self.metadata = metadata
        self._last_seen: dict[int, tuple[int, object]] = {}  # broker -> (incarnation, image it was asked at)
        self.asked = 0  # questions compared

    def observe(self, node: int, incarnation: int, broker) -> None:
        """Ask `broker` (a broker.broker.Broker), if its image changed."""
        image = broker.metadata.image
        if self._last_seen.get(node) == (incarnation, image):
            return
        self._last_seen[node] = (incarnation, image)
        self._ask(node, broker, image)

    def check_all(self, brokers: dict[int, object]) -> None:
        for node, broker in sorted(brokers.items()):
            self._ask(node, broker, broker.metadata.image)

    def _ask(self, node: int, broker, image) -> None:
        if image.offset < 0:
            return
        self.metadata._catch_up()
        expected_image = self.metadata.images.get(image.offset)
        if expected_image is None:
            return  # not committed (the metadata checker reports it) or older than what is kept
        self.compare(node, broker, image, expected_image)

    def compare(self, node: int, broker, image, expected_image) -> None:
        raise NotImplementedError
