"""Kafka's textual Uuid (Uuid.toString / Uuid.fromString): URL-safe base64 of the 16 bytes,
unpadded, 22 characters. Topic ids, cluster ids and directory ids are written this way."""
from __future__ import annotations

import base64
import uuid

__all__ = ["uuid_to_str", "uuid_from_str", "is_valid_uuid"]


def uuid_to_str(u: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def uuid_from_str(text: str) -> uuid.UUID:
    """The Uuid `text` names; ValueError unless it is 22 base64url characters of 16 bytes."""
    if not is_valid_uuid(text):
        raise ValueError(f"{text!r} is not a Kafka Uuid (22 base64url characters)")
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))


def is_valid_uuid(text: str) -> bool:
    if not isinstance(text, str) or len(text) != 22:
        return False
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (ValueError, TypeError):
        return False
    return len(raw) == 16 and base64.urlsafe_b64encode(raw).decode().rstrip("=") == text
