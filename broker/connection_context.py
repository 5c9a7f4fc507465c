"""The connection a request arrived on, for the handlers that must know it.

The Kafka server sets it once per connection task (trio gives each task its own context),
so a handler reads the listener it was reached on (Metadata answers with that listener's
endpoints, as Kafka does) and the authenticated principal, without every handler
signature carrying it.
"""
from __future__ import annotations

import contextvars

from wire.security.connection_security import ConnectionSecurity

__all__ = ["current_security", "set_current_security"]

_CURRENT: contextvars.ContextVar[ConnectionSecurity | None] = contextvars.ContextVar("connection_security",
                                                                                       default=None)


def current_security() -> ConnectionSecurity | None:
    """The security state of the connection being served by this task, or None outside one."""
    return _CURRENT.get()


def set_current_security(security: ConnectionSecurity | None) -> None:
    _CURRENT.set(security)
