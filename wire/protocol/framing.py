"""Frames and headers: int32 size prefix, request header v1/v2, response header v0/v1.

Header rules (KIP-482, KIP-511):
- request header v2 (v1 + tagged fields) iff the request version is flexible,
  else v1; client_id is an int16-length nullable string in both;
- response header v1 (+ tagged fields) iff the response version is flexible,
  else v0 — except ApiVersions responses, which always use v0 so a client can
  parse the answer before it knows what the broker supports.
"""
from __future__ import annotations

import math
import struct
from collections import deque

from wire.errors import DecodeError, UnsupportedVersionError
from wire.protocol import primitives as P
from wire.protocol.message import Message, as_memoryview
from wire.protocol.registry import REQUESTS, RESPONSES

__all__ = [
    "RequestHeader",
    "FrameReader",
    "split_frame",
    "decode_request",
    "encode_request",
    "encode_response",
    "encode_response_parts",
    "decode_response",
    "response_header_version",
    "UnsupportedRequestError",
    "MalformedRequestError",
    "DEFAULT_MAX_FRAME_SIZE",
]

API_VERSIONS_KEY = 18
_METADATA_KEY = 3
_ALTER_USER_SCRAM_CREDENTIALS_KEY = 51
DEFAULT_MAX_FRAME_SIZE = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes
_SIZE = struct.Struct(">i")
_HEAD = struct.Struct(">hhi")  # api_key, api_version, correlation_id
_CORRELATION = struct.Struct(">i")


class RequestHeader:
    __slots__ = ("api_key", "api_version", "correlation_id", "client_id", "unknown_tags", "item_count")

    def __init__(self, api_key: int, api_version: int, correlation_id: int,
                 client_id: str | None = None, unknown_tags=None):
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.unknown_tags = unknown_tags
        self.item_count = 0  # array elements in the body, counted by decode_request

    def __eq__(self, other) -> bool:
        if not isinstance(other, RequestHeader):
            return NotImplemented
        return (self.api_key, self.api_version, self.correlation_id, self.client_id) == \
            (other.api_key, other.api_version, other.correlation_id, other.client_id)

    __hash__ = None

    def __repr__(self) -> str:
        return (f"RequestHeader(api_key={self.api_key}, api_version={self.api_version}, "
                f"correlation_id={self.correlation_id}, client_id={self.client_id!r})")


class UnsupportedRequestError(UnsupportedVersionError):
    """Unknown api key or version; `header` holds what could be read (for the reply)."""

    def __init__(self, header: RequestHeader):
        super().__init__(f"unsupported request api_key={header.api_key} version={header.api_version}",
                         api_key=header.api_key, version=header.api_version)
        self.header = header


class MalformedRequestError(DecodeError):
    """The header parsed but the rest did not; `header` lets the broker log who sent it."""

    def __init__(self, message: str, header: RequestHeader):
        super().__init__(message)
        self.header = header


# --------------------------------------------------------------------------- #
# frames
# --------------------------------------------------------------------------- #


def split_frame(buf, pos: int = 0, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE):
    """(frame view, next position) if a whole frame starts at `pos`, else None."""
    if len(buf) - pos < 4:
        return None
    (size,) = _SIZE.unpack_from(buf, pos)
    if size < 0 or size > max_frame_size:
        raise DecodeError(f"frame size {size} outside [0, {max_frame_size}]")
    end = pos + 4 + size
    if end > len(buf):
        return None
    return as_memoryview(buf)[pos + 4:end], end


class FrameReader:
    """Incremental frame splitter: feed it received bytes, take whole frames out.

    Frames come out as `bytes` they own, so records sliced from them stay
    valid after the reader moves on. Received chunks are kept as they came and
    each frame is joined from them once: a frame of megabytes (a Produce
    request, a Fetch answer) is copied once, not grown in a buffer and sliced
    out again. A bad size prefix raises `DecodeError` (the connection is
    unusable after that: framing is lost).
    """

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE):
        self.max_frame_size = max_frame_size
        self._chunks: deque[bytes] = deque()  # received, in order; the first from _head_at on
        self._head_at = 0
        self._buffered = 0  # bytes not yet taken
        self._need: int | None = None  # size of the frame being assembled, once known

    @property
    def buffered(self) -> int:
        """Bytes received of frames not yet taken out, the size prefix of a pending one included:
        so a server tells a connection with a request on its way in (timed by the request read
        timeout) from an idle one."""
        return self._buffered + (4 if self._need is not None else 0)

    def feed(self, data) -> None:
        if data:
            self._chunks.append(data if isinstance(data, bytes) else bytes(data))
            self._buffered += len(data)

    def pending_size(self) -> int | None:
        """The size of the frame at the head of the buffer once its prefix is in (None
        before); DecodeError if that size is negative or over the limit."""
        if self._need is None:
            if self._buffered < 4:
                return None
            (size,) = _SIZE.unpack(self._take(4))
            if size < 0 or size > self.max_frame_size:
                raise DecodeError(f"frame size {size} outside [0, {self.max_frame_size}]")
            self._need = size
        return self._need

    def next_frame(self) -> bytes | None:
        if self.pending_size() is None or self._buffered < self._need:
            return None
        frame = self._take(self._need)
        self._need = None
        return frame

    def _take(self, n: int) -> bytes:
        """The next `n` buffered bytes (there are that many), copied once."""
        if n == 0:
            return b""
        chunks, at = self._chunks, self._head_at
        self._buffered -= n
        head = chunks[0]
        if len(head) - at > n:  # the frames of small requests: inside the first chunk
            self._head_at = at + n
            return head[at:at + n]
        parts = [memoryview(head)[at:]]
        left = n - (len(head) - at)
        chunks.popleft()
        while left:
            chunk = chunks[0]
            if len(chunk) > left:
                parts.append(memoryview(chunk)[:left])
                self._head_at = left
                return b"".join(parts)
            parts.append(chunk)
            left -= len(chunk)
            chunks.popleft()
        self._head_at = 0
        return b"".join(parts)

    def __iter__(self):
        while (frame := self.next_frame()) is not None:
            yield frame


# --------------------------------------------------------------------------- #
# requests
# --------------------------------------------------------------------------- #


def decode_request(frame, *, max_items: int | None = None) -> tuple[RequestHeader, Message]:
    """Parse a request frame (without its size prefix) into (header, body).

    Raises `UnsupportedRequestError` for unknown api keys/versions (its header
    carries the correlation id, so ApiVersions can still be answered) and
    `DecodeError` for anything malformed, or holding more than `max_items` array
    elements in all (decoding stops there, so its cost is bounded by that too).
    """
    buf = as_memoryview(frame)
    if len(buf) < 8:
        raise DecodeError(f"request frame of {len(buf)} bytes is shorter than a header")
    api_key, api_version, correlation_id = _HEAD.unpack_from(buf, 0)
    header = RequestHeader(api_key, api_version, correlation_id)
    cls = REQUESTS.get(api_key)
    if cls is None or not cls.supports(api_version):
        try:  # best effort, for logs: header v1 and v2 both start with client_id
            header.client_id, _ = P.read_nullable_string(buf, 8)
        except (DecodeError, struct.error, ValueError):
            pass
        raise UnsupportedRequestError(header)
    try:
        header.client_id, pos = P.read_nullable_string(buf, 8)
        if api_version in cls._flexible_versions:
            header.unknown_tags, pos = P.read_empty_tagged_fields(buf, pos)
    except DecodeError as exc:
        raise MalformedRequestError(f"request header: {exc}", header) from None
    except (struct.error, ValueError) as exc:
        raise MalformedRequestError(f"request header: {exc}", header) from None
    try:
        P.ITEM_BUDGET.reset(math.inf if max_items is None else max_items)
        body, pos = cls.decode_from(buf, pos, api_version)
        header.item_count = P.ITEM_BUDGET.taken
    except DecodeError as exc:
        raise MalformedRequestError(str(exc), header) from None
    finally:
        P.ITEM_BUDGET.reset(math.inf)
    if pos != len(buf) and not _tolerates_trailing_bytes(api_key, api_version, buf[pos:]):
        raise MalformedRequestError(f"{cls.__name__} v{api_version}: {len(buf) - pos} trailing bytes", header)
    return header, body


def _tolerates_trailing_bytes(api_key: int, version: int, trailing: memoryview) -> bool:
    """Kafka ignores bytes after a whole request; we refuse them, except where a client in
    wide use sends them: librdkafka writes a null topic array in Metadata v9+ as a 4-byte
    placeholder holding a 1-byte varint (librdkafka issue #5049), so an all-topics request
    carries 3 extra bytes that Kafka's parser never reads; and it ends AlterUserScramCredentials
    with a second empty tag section (one zero byte)."""
    if api_key == _METADATA_KEY:
        return version >= 9
    return api_key == _ALTER_USER_SCRAM_CREDENTIALS_KEY and trailing == b"\x00"


def encode_request(body: Message, version: int, correlation_id: int, client_id: str | None = None,
                   *, unknown_tags=None) -> bytes:
    """A whole request frame, size prefix included."""
    out: list = [b"", _HEAD.pack(body.API_KEY, version, correlation_id)]
    P.write_nullable_string(out, client_id)
    if body.is_flexible(version):
        P.write_tagged_fields(out, [], unknown_tags)
    body.encode_into(out, version)
    return _finish(out)


# --------------------------------------------------------------------------- #
# responses
# --------------------------------------------------------------------------- #


def response_header_version(api_key: int, version: int) -> int:
    if api_key == API_VERSIONS_KEY:
        return 0
    cls = RESPONSES.get(api_key)
    return 1 if cls is not None and version in cls.FLEXIBLE else 0


def encode_response_parts(header: RequestHeader | int, body: Message, version: int | None = None) -> list:
    """The response frame as a list of chunks (size prefix first), for vectored writes.

    `header` is the request's header (or just its correlation id, then
    `version` is required); `version` overrides the request's version, which
    the ApiVersions fallback (answer v0 to any version) needs.
    """
    if isinstance(header, RequestHeader):
        if header.api_key != body.API_KEY:
            raise ValueError(f"{type(body).__name__} cannot answer a request with api key {header.api_key}")
        correlation_id = header.correlation_id
        if version is None:
            version = header.api_version
    else:
        correlation_id = header
        if version is None:
            raise TypeError("version is required when only a correlation id is given")
    out: list = [b"", _CORRELATION.pack(correlation_id)]
    if response_header_version(body.API_KEY, version) == 1:
        out.append(b"\x00")  # no tagged fields in the response header
    body.encode_into(out, version)
    out[0] = _SIZE.pack(sum(map(len, out)))
    return out


def encode_response(header: RequestHeader | int, body: Message, version: int | None = None) -> bytes:
    """The whole response frame (size prefix included) as one bytes object."""
    return b"".join(encode_response_parts(header, body, version))


def decode_response(frame, api_key: int, version: int) -> tuple[int, Message]:
    """Parse a response frame (without size prefix): (correlation_id, body)."""
    buf = as_memoryview(frame)
    cls = RESPONSES.get(api_key)
    if cls is None or version not in cls.VERSIONS:
        raise UnsupportedVersionError(f"unsupported response api_key={api_key} v{version}",
                                      api_key=api_key, version=version)
    if len(buf) < 4:
        raise DecodeError("response frame shorter than its header")
    (correlation_id,) = _CORRELATION.unpack_from(buf, 0)
    pos = 4
    if response_header_version(api_key, version) == 1:
        _, pos = P.read_empty_tagged_fields(buf, pos)
    body, pos = cls.decode_from(buf, pos, version)
    if pos != len(buf):
        raise DecodeError(f"{cls.__name__} v{version}: {len(buf) - pos} trailing bytes")
    return correlation_id, body


def _finish(out: list) -> bytes:
    out[0] = _SIZE.pack(sum(map(len, out)))
    return b"".join(out)
