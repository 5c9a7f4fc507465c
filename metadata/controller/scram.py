"""AlterUserScramCredentials (KIP-554) as a pure function of the image, as Kafka's
ScramControlManager: the client sends (salt, iterations, salted password); the controller keeps
only the StoredKey and ServerKey derived from it (wire.security.sasl_scram), in
UserScramCredential records that every node replays into its image.

Results are per user: one bad change fails all of that user's changes, and nothing of theirs is
written. Kafka's checks: a known mechanism, a non-empty name, 4096..16384 iterations, a salt and
a salted password, no user/mechanism pair twice in one request, and a deletion must name a
credential that exists.
"""
from __future__ import annotations

from dataclasses import dataclass

from metadata.image import MetadataImage
from metadata.records import RemoveUserScramCredential, UserScramCredential
from wire.error_codes import ErrorCode
from wire.security.sasl_scram import (
    HASHES, MAX_ITERATIONS, MECHANISM_NAMES, MIN_ITERATIONS, credential_from_salted,
)

__all__ = ["ScramUpsertion", "ScramDeletion", "alter_user_scram_credentials", "credential_record"]


@dataclass(frozen=True, slots=True)
class ScramDeletion:
    name: str
    mechanism: int


@dataclass(frozen=True, slots=True)
class ScramUpsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


def credential_record(name: str, mechanism: int, iterations: int, salt: bytes,
                      salted_password: bytes) -> UserScramCredential:
    cred = credential_from_salted(HASHES[MECHANISM_NAMES[mechanism]], salted_password, salt, iterations)
    return UserScramCredential(name, mechanism, salt, cred.stored_key, cred.server_key, iterations)


def _check(change, image: MetadataImage) -> tuple[ErrorCode, str] | None:
    if change.mechanism not in MECHANISM_NAMES:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, f"Unknown SCRAM mechanism {change.mechanism}"
    if not change.name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if isinstance(change, ScramDeletion):
        if (change.name, change.mechanism) not in image.scram:
            return ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"
        return None
    if change.iterations < MIN_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Too few iterations (minimum {MIN_ITERATIONS})"
    if change.iterations > MAX_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Too many iterations (maximum {MAX_ITERATIONS})"
    if not change.salt or not change.salted_password:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty"
    return None


def alter_user_scram_credentials(image: MetadataImage, deletions: list[ScramDeletion],
                                 upsertions: list[ScramUpsertion],
                                 ) -> tuple[list, dict[str, tuple[ErrorCode, str | None]]]:
    """(records, user -> (error, message)) for one request."""
    changes = [*deletions, *upsertions]
    seen: dict[tuple[str, int], int] = {}
    for change in changes:
        key = (change.name, change.mechanism)
        seen[key] = seen.get(key, 0) + 1
    failed: dict[str, tuple[ErrorCode, str]] = {}
    for change in changes:
        if change.name in failed:
            continue
        if seen[(change.name, change.mechanism)] > 1:
            failed[change.name] = (ErrorCode.DUPLICATE_RESOURCE,
                                   "A user credential cannot be altered twice in the same request")
            continue
        problem = _check(change, image)
        if problem is not None:
            failed[change.name] = problem
    records: list = []
    for change in changes:
        if change.name in failed:
            continue
        if isinstance(change, ScramDeletion):
            records.append(RemoveUserScramCredential(change.name, change.mechanism))
        else:
            records.append(credential_record(change.name, change.mechanism, change.iterations,
                                             change.salt, change.salted_password))
    results = {c.name: failed.get(c.name, (ErrorCode.NONE, None)) for c in changes}
    return records, results
