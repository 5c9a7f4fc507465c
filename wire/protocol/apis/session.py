"""Connection set-up: version negotiation (KIP-35/KIP-511) and SASL."""
from __future__ import annotations

from wire.protocol.message import request, response
from wire.protocol.schema import ArrayOf, F, BOOL, BYTES, INT16, INT32, INT64, STRING

__all__ = [
    "ApiVersionsRequest", "ApiVersionsResponse", "SaslHandshakeRequest",
    "SaslHandshakeResponse", "SaslAuthenticateRequest", "SaslAuthenticateResponse",
]

ApiVersionsRequest = request(18, "ApiVersions", "0-3", flexible="3+", fields=[
    F("client_software_name", STRING, "3+"),
    F("client_software_version", STRING, "3+"),
])

ApiVersionsResponse = response(18, "ApiVersions", "0-3", flexible="3+", fields=[
    F("error_code", INT16),
    F("api_keys", ArrayOf("ApiVersion",
        F("api_key", INT16),
        F("min_version", INT16),
        F("max_version", INT16),
    )),
    F("throttle_time_ms", INT32, "1+"),
    F("supported_features", ArrayOf("SupportedFeatureKey",
        F("name", STRING, "3+"),
        F("min_version", INT16, "3+"),
        F("max_version", INT16, "3+"),
    ), "3+", tag=0),
    F("finalized_features_epoch", INT64, "3+", default=-1, tag=1),
    F("finalized_features", ArrayOf("FinalizedFeatureKey",
        F("name", STRING, "3+"),
        F("max_version_level", INT16, "3+"),
        F("min_version_level", INT16, "3+"),
    ), "3+", tag=2),
    F("zk_migration_ready", BOOL, "3+", default=False, tag=3),
])

SaslHandshakeRequest = request(17, "SaslHandshake", "0-1", fields=[
    F("mechanism", STRING),
])

SaslHandshakeResponse = response(17, "SaslHandshake", "0-1", fields=[
    F("error_code", INT16),
    F("mechanisms", ArrayOf(STRING)),
])

SaslAuthenticateRequest = request(36, "SaslAuthenticate", "0-2", flexible="2+", fields=[
    F("auth_bytes", BYTES),
])

SaslAuthenticateResponse = response(36, "SaslAuthenticate", "0-2", flexible="2+", fields=[
    F("error_code", INT16),
    F("error_message", STRING, nullable="0+"),
    F("auth_bytes", BYTES),
    F("session_lifetime_ms", INT64, "1+", default=0),
])
