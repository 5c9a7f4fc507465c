"""The metrics endpoint: a tiny HTTP/1.1 server answering `GET /metrics`.

    server = MetricsServer(env, registry)
    port = await nursery.start(server.serve, "0.0.0.0", config.metrics_port)

Only what a Prometheus scraper (or curl) needs: GET and HEAD of `/metrics`
(query strings ignored) get the registry rendered as text format 0.0.4;
other paths get 404, other methods 405. Connections are kept alive for
HTTP/1.1 unless the client says `Connection: close`. Anything malformed —
a bad request line, an oversized or slow head, a request with a body — gets
400 (or 431) and the connection is closed; no input reaches beyond its own
connection, so a bad scraper can never take the node down.

It runs over `env.net.serve`, so the simulation can scrape a simulated node.
"""
from __future__ import annotations

import logging

import trio

from metrics.registry import MetricsRegistry
from storage.env import Env

__all__ = ["MetricsServer", "CONTENT_TYPE", "parse_request_head", "BadRequest"]

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
MAX_HEAD_BYTES = 8 * 1024
HEAD_TIMEOUT_S = 10.0  # for the whole head of one request (slow-loris guard)
IDLE_TIMEOUT_S = 60.0  # between requests on a kept-alive connection
_CONNECTION_ERRORS = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            408: "Request Timeout", 431: "Request Header Fields Too Large"}


class BadRequest(Exception):
    def __init__(self, status: int, why: str):
        super().__init__(why)
        self.status = status


def parse_request_head(head: bytes) -> tuple[str, str, str, dict[str, str]]:
    """(method, path without query, version, lower-cased headers) of one request head.

    `head` is everything before the blank line. Raises BadRequest(400) on anything
    that is not a well-formed HTTP/1.0 or 1.1 request head.
    """
    try:
        text = head.decode("ascii")
    except UnicodeDecodeError:
        raise BadRequest(400, "request head is not ASCII") from None
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[0].isalpha() or not parts[0].isupper() or not parts[1]:
        raise BadRequest(400, f"bad request line {lines[0][:80]!r}")
    method, target, version = parts
    if version not in ("HTTP/1.0", "HTTP/1.1"):
        raise BadRequest(400, f"unsupported protocol {version[:20]!r}")
    if not target.startswith("/"):
        raise BadRequest(400, f"bad request target {target[:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip() or " " in name:
            raise BadRequest(400, f"bad header line {line[:80]!r}")
        headers[name.lower()] = value.strip()
    return method, target.split("?", 1)[0], version, headers


class MetricsServer:
    def __init__(self, env: Env, registry: MetricsRegistry):
        self.env = env
        self.registry = registry
        self.scrapes = 0  # successful GET /metrics answers
        self.bad_requests = 0

    async def serve(self, host: str, port: int, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Listen until cancelled; `task_status.started(bound_port)` once listening."""
        await self.env.net.serve(host, port, self.handle_connection, task_status=task_status)

    async def handle_connection(self, stream: trio.abc.Stream) -> None:
        try:
            await self._serve_requests(stream)
        except _CONNECTION_ERRORS:
            pass  # the scraper went away
        except Exception:  # a bug here must cost one connection, never the node
            log.exception("metrics connection failed")
        finally:
            with trio.CancelScope(shield=True):
                try:
                    await stream.aclose()
                except _CONNECTION_ERRORS:
                    pass

    async def _serve_requests(self, stream) -> None:
        buffer = bytearray()
        while True:
            try:
                head, buffer = await self._read_head(stream, buffer)
            except BadRequest as exc:
                self.bad_requests += 1
                log.info("metrics endpoint: %s", exc)
                if exc.status != 408:
                    await self._send(stream, exc.status, str(exc).encode() + b"\n", keep_alive=False)
                return
            if head is None:
                return  # clean end of stream between requests
            try:
                method, path, version, headers = parse_request_head(head)
                if headers.get("content-length", "0") != "0" or "transfer-encoding" in headers:
                    raise BadRequest(400, "a request body is not expected")
            except BadRequest as exc:
                self.bad_requests += 1
                log.info("metrics endpoint: %s", exc)
                await self._send(stream, exc.status, str(exc).encode() + b"\n", keep_alive=False)
                return
            connection = headers.get("connection", "").lower()
            keep_alive = connection != "close" if version == "HTTP/1.1" else connection == "keep-alive"
            status, body = self._answer(method, path)
            await self._send(stream, status, body, keep_alive=keep_alive, head_only=method == "HEAD")
            if not keep_alive:
                return

    def _answer(self, method: str, path: str) -> tuple[int, bytes]:
        if path != "/metrics":
            return 404, b"not found; metrics are at /metrics\n"
        if method not in ("GET", "HEAD"):
            return 405, b"only GET and HEAD\n"
        self.scrapes += 1
        return 200, self.registry.render().encode("utf-8")

    async def _read_head(self, stream, buffer: bytearray) -> tuple[bytes | None, bytearray]:
        """The next request head and the bytes after it; None at a clean end of stream."""
        timeout = HEAD_TIMEOUT_S if buffer else IDLE_TIMEOUT_S
        with self.env.move_on_after(timeout) as scope:
            while True:
                end = buffer.find(b"\r\n\r\n")
                if end >= 0:
                    if end > MAX_HEAD_BYTES:
                        raise BadRequest(431, "request head too large")
                    return bytes(buffer[:end]), buffer[end + 4:]
                if len(buffer) > MAX_HEAD_BYTES:
                    raise BadRequest(431, "request head too large")
                data = await stream.receive_some(4096)
                if not data:
                    if buffer:
                        raise BadRequest(400, "connection closed inside a request head")
                    return None, buffer
                if not buffer:
                    scope.deadline = self.env.now() + HEAD_TIMEOUT_S  # a request began
                buffer += data
        raise BadRequest(408, "timed out waiting for a request head")

    async def _send(self, stream, status: int, body: bytes, *, keep_alive: bool, head_only: bool = False) -> None:
        content_type = CONTENT_TYPE if status == 200 else "text/plain; charset=utf-8"
        head = (
            f"HTTP/1.1 {status} {_REASONS[status]}\r\n"
            f"Content-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\n"
            f"Connection: {'keep-alive' if keep_alive else 'close'}\r\n"
            "\r\n"
        ).encode("ascii")
        await stream.send_all(head if head_only else head + body)
