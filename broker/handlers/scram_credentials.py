"""DescribeUserScramCredentials v0 (answered from this broker's image) and
AlterUserScramCredentials v0 (forwarded to the active controller), KIP-554.

Describe never shows a salt or key: only each user's mechanisms and iterations. An unknown
user named in the request gets RESOURCE_NOT_FOUND, a user named twice DUPLICATE_RESOURCE, as in
Kafka; no names (null or empty) lists every user that has a credential.
"""
from __future__ import annotations

from broker.controller_channel import ControllerUnavailableError, ScramDeletion, ScramUpsertion
from wire.error_codes import ErrorCode
from wire.protocol import AlterUserScramCredentialsResponse, DescribeUserScramCredentialsResponse

__all__ = ["handle_describe", "describe_error", "handle_alter", "alter_error"]

DEFAULT_TIMEOUT_S = 30.0


async def handle_describe(broker, header, request) -> DescribeUserScramCredentialsResponse:
    R = DescribeUserScramCredentialsResponse
    by_user: dict[str, list] = {}
    for (user, mechanism), rec in sorted(broker.metadata.image.scram.items()):
        by_user.setdefault(user, []).append(R.CredentialInfo(mechanism=mechanism, iterations=rec.iterations))
    names = [u.name for u in request.users or ()]
    results = []
    if not names:
        results = [R.DescribeUserScramCredentialsResult(user=user, error_code=ErrorCode.NONE, error_message=None,
                                                        credential_infos=infos)
                   for user, infos in by_user.items()]
    for name in dict.fromkeys(names):
        if names.count(name) > 1:
            code, message, infos = ErrorCode.DUPLICATE_RESOURCE, f"Cannot describe SCRAM credentials for the same user twice in a single request: {name}", []
        elif name not in by_user:
            code, message, infos = ErrorCode.RESOURCE_NOT_FOUND, f"Attempt to describe a user credential that does not exist: {name}", []
        else:
            code, message, infos = ErrorCode.NONE, None, by_user[name]
        results.append(R.DescribeUserScramCredentialsResult(user=name, error_code=code, error_message=message,
                                                            credential_infos=infos))
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, results=results)


def describe_error(broker, header, request, code: int) -> DescribeUserScramCredentialsResponse:
    return DescribeUserScramCredentialsResponse(throttle_time_ms=0, error_code=code, error_message=None, results=[])


def _users(request) -> list[str]:
    return list(dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions]))


async def handle_alter(broker, header, request) -> AlterUserScramCredentialsResponse:
    deletions = [ScramDeletion(d.name, d.mechanism) for d in request.deletions]
    upsertions = [ScramUpsertion(u.name, u.mechanism, u.iterations, bytes(u.salt), bytes(u.salted_password))
                  for u in request.upsertions]
    try:
        reply = await broker.controller.alter_user_scram_credentials(deletions, upsertions,
                                                                     timeout_s=DEFAULT_TIMEOUT_S)
    except ControllerUnavailableError:
        return alter_error(broker, header, request, ErrorCode.REQUEST_TIMED_OUT)
    if reply.offset >= 0:  # answer once this broker authenticates with the new credentials
        await broker.metadata.wait_for_offset(reply.offset, broker.env.now() + DEFAULT_TIMEOUT_S)
    R = AlterUserScramCredentialsResponse
    results = []
    for user in _users(request):
        code, message = reply.results.get(user, (ErrorCode.UNKNOWN_SERVER_ERROR, None))
        results.append(R.AlterUserScramCredentialsResult(user=user, error_code=int(code), error_message=message))
    return R(throttle_time_ms=0, results=results)


def alter_error(broker, header, request, code: int) -> AlterUserScramCredentialsResponse:
    R = AlterUserScramCredentialsResponse
    return R(throttle_time_ms=0, results=[
        R.AlterUserScramCredentialsResult(user=user, error_code=code, error_message=None) for user in _users(request)])
