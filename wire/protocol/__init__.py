"""Kafka protocol messages: declarative definitions compiled into fast codecs.

Public surface:
- message classes, e.g. `ProduceRequest`, `FetchResponse` (nested structs as
  attributes: `FetchResponse.PartitionData`); `Cls.decode(data, version)`,
  `obj.encode(version)`;
- `decode_request(frame) -> (RequestHeader, body)`, `encode_response(header, body)`,
  `encode_request(...)`, `decode_response(...)`, `FrameReader`;
- `API_VERSIONS` (api_key -> (min, max), exactly what is defined), `ApiKey`,
  `lookup(api_key, version)`;
- the embedded consumer protocol (`decode_subscription`, `encode_assignment`, ...).
"""
from __future__ import annotations

from wire.protocol.apis.acls import *  # noqa: F401,F403
from wire.protocol.apis.admin import *  # noqa: F401,F403
from wire.protocol.apis.data import *  # noqa: F401,F403
from wire.protocol.apis.groups import *  # noqa: F401,F403
from wire.protocol.apis.operations import *  # noqa: F401,F403
from wire.protocol.apis.quotas import *  # noqa: F401,F403
from wire.protocol.apis.session import *  # noqa: F401,F403
from wire.protocol.apis.transactions import *  # noqa: F401,F403
from wire.protocol.apis import acls as _acls, admin as _admin, data as _data, groups as _groups, session as _session
from wire.protocol.apis import operations as _operations
from wire.protocol.apis import transactions as _transactions
from wire.protocol.apis import quotas as _quotas
from wire.protocol.consumer_protocol import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from wire.protocol.framing import (
    DEFAULT_MAX_FRAME_SIZE,
    FrameReader,
    MalformedRequestError,
    RequestHeader,
    UnsupportedRequestError,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    encode_response_parts,
    response_header_version,
    split_frame,
)
from wire.protocol.message import Message, Struct
from wire.protocol.registry import API_VERSIONS, REQUESTS, RESPONSES, ApiKey, lookup, request_class, response_class

__all__ = [
    *_acls.__all__, *_admin.__all__, *_data.__all__, *_groups.__all__, *_session.__all__,
    *_operations.__all__, *_transactions.__all__, *_quotas.__all__,
    "ConsumerProtocolAssignment", "ConsumerProtocolSubscription", "decode_assignment",
    "decode_subscription", "encode_assignment", "encode_subscription",
    "DEFAULT_MAX_FRAME_SIZE", "FrameReader", "MalformedRequestError", "RequestHeader",
    "UnsupportedRequestError", "decode_request", "decode_response", "encode_request",
    "encode_response", "encode_response_parts", "response_header_version", "split_frame",
    "Message", "Struct", "API_VERSIONS", "REQUESTS", "RESPONSES", "ApiKey", "lookup",
    "request_class", "response_class",
]
