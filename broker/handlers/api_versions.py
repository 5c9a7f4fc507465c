"""ApiVersions (KIP-35/511): advertise exactly the APIs this broker has handlers for.

An unsupported ApiVersions version is answered by the server with a v0 body
and UNSUPPORTED_VERSION (see `fallback_response`), so clients retry with a
version we speak.
"""
from __future__ import annotations

from wire.error_codes import ErrorCode
from wire.protocol import ApiVersionsResponse

__all__ = ["handle", "error_response", "fallback_response"]


def _api_keys(broker) -> list:
    return [ApiVersionsResponse.ApiVersion(api_key=key, min_version=lo, max_version=hi)
            for key, (lo, hi) in sorted(broker.advertised_versions.items())]


async def handle(broker, header, request) -> ApiVersionsResponse:
    return ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=_api_keys(broker), throttle_time_ms=0)


def error_response(broker, header, request, code: int) -> ApiVersionsResponse:
    return ApiVersionsResponse(error_code=code, api_keys=_api_keys(broker), throttle_time_ms=0)


def fallback_response(broker) -> ApiVersionsResponse:
    """The v0-shaped answer to an ApiVersions version we do not support."""
    return ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=_api_keys(broker),
                               throttle_time_ms=0)
