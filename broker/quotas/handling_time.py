"""How long the request being handled has waited parked in the fetch purgatory (for data,
or for a produce's acks): time that is not handling time for request_percentage quotas.

A context variable, so it follows the connection task handling one request at a time; the
server starts it afresh for each request.
"""
from __future__ import annotations

import contextvars

__all__ = ["start_request", "add_parked", "parked_s"]

_parked: contextvars.ContextVar[list[float] | None] = contextvars.ContextVar("quota_parked_s", default=None)


def start_request() -> None:
    _parked.set([0.0])


def add_parked(seconds: float) -> None:
    total = _parked.get()
    if total is not None:
        total[0] += seconds


def parked_s() -> float:
    total = _parked.get()
    return 0.0 if total is None else total[0]
