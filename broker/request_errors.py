"""Outcomes of a request other than a response."""
from __future__ import annotations

__all__ = ["CloseConnection"]


class CloseConnection(Exception):
    """Answer by closing the connection (e.g. a failed acks=0 produce, as Kafka does)."""
