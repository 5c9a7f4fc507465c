"""Outcomes of a request other than a response."""
from __future__ import annotations

__all__ = ["CloseConnection", "CLOSE", "CloseAfter"]


class CloseConnection(Exception):
    """Answer by closing the connection (e.g. a failed acks=0 produce, as Kafka does)."""


CLOSE = object()  # what a responder returns to close the connection without an answer


class CloseAfter:
    """Send these response chunks, then close the connection after `delay` seconds (a failed
    SASL login: Kafka's connection.failed.authentication.delay.ms lets the client read the
    answer before the close and slows down password guessing)."""

    __slots__ = ("parts", "delay")

    def __init__(self, parts: list, delay: float = 0.0):
        self.parts = parts
        self.delay = delay
