"""raftkafka.node.metrics_http: real HTTP over loopback (RealEnv); bad requests cost only their connection."""
from __future__ import annotations

import urllib.request

import pytest
import trio

from metrics.registry import MetricsRegistry
from raftkafka.node.metrics_http import CONTENT_TYPE, BadRequest, MetricsServer, parse_request_head
from storage.env import RealEnv
from tests.test_metrics import parse_exposition, samples_of


def _registry() -> MetricsRegistry:
    r = MetricsRegistry()
    r.counter("raftkafka_broker_topic_bytes_in_total").labels("orders").inc(1234)
    r.gauge("raftkafka_raft_epoch").set_function(lambda: 7)
    return r


async def _start(nursery, registry=None) -> tuple[MetricsServer, int]:
    server = MetricsServer(RealEnv(), registry or _registry())
    port = await nursery.start(server.serve, "127.0.0.1", 0)
    return server, port


async def _exchange(port: int, data: bytes, *, half_close: bool = False) -> bytes:
    """Send raw bytes, read until the server closes (or 5 s pass)."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(data)
        if half_close:
            await stream.send_eof()
        out = bytearray()
        with trio.move_on_after(5):
            while chunk := await stream.receive_some(65536):
                out += chunk
        return bytes(out)


def _split_response(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {k.lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
    return status, headers, body


async def test_get_metrics_with_urllib_over_loopback():
    async with trio.open_nursery() as nursery:
        server, port = await _start(nursery)

        def fetch():
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
                return resp.status, resp.headers["Content-Type"], resp.read().decode()

        status, ctype, body = await trio.to_thread.run_sync(fetch)
        assert status == 200 and ctype == CONTENT_TYPE
        assert samples_of(body, "raftkafka_broker_topic_bytes_in_total") == {(("topic", "orders"),): 1234}
        assert samples_of(body, "raftkafka_raft_epoch") == {(): 7}
        assert server.scrapes == 1
        nursery.cancel_scope.cancel()


async def test_keep_alive_pipelined_requests_and_status_codes():
    async with trio.open_nursery() as nursery:
        _, port = await _start(nursery)
        raw = await _exchange(port, (
            b"GET /metrics?format=text HTTP/1.1\r\nHost: a\r\n\r\n"
            b"HEAD /metrics HTTP/1.1\r\nHost: a\r\n\r\n"
            b"GET /other HTTP/1.1\r\nHost: a\r\n\r\n"
            b"POST /metrics HTTP/1.1\r\nHost: a\r\n\r\n"
            b"GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n"))
        responses = raw.split(b"HTTP/1.1 ")[1:]
        codes = [int(r[:3]) for r in responses]
        assert codes == [200, 200, 404, 405, 200]
        # Every body is exactly Content-Length long, and HEAD has none.
        first = _split_response(b"HTTP/1.1 " + responses[0])
        assert len(first[2]) == int(first[1]["content-length"])
        parse_exposition(first[2].decode())
        head = _split_response(b"HTTP/1.1 " + responses[1])
        assert head[2] == b"" and int(head[1]["content-length"]) == len(first[2])
        assert _split_response(b"HTTP/1.1 " + responses[4])[1]["connection"] == "close"
        nursery.cancel_scope.cancel()


async def test_http_1_0_closes_after_one_answer():
    async with trio.open_nursery() as nursery:
        _, port = await _start(nursery)
        raw = await _exchange(port, b"GET /metrics HTTP/1.0\r\n\r\n")
        status, headers, body = _split_response(raw)
        assert status == 200 and headers["connection"] == "close" and len(body) == int(headers["content-length"])
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("bad,status", [
    (b"\x00\x01\x02garbage\r\n\r\n", 400),
    (b"GET\r\n\r\n", 400),
    (b"get /metrics HTTP/1.1\r\n\r\n", 400),
    (b"GET /metrics HTTP/2.0\r\n\r\n", 400),
    (b"GET metrics HTTP/1.1\r\n\r\n", 400),
    (b"GET /metrics HTTP/1.1\r\nno-colon-here\r\n\r\n", 400),
    (b"GET /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", 400),
    (b"GET /metrics HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    (b"GET /metrics HTTP/1.1\r\n\xff\xfe: x\r\n\r\n", 400),
    (b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 10_000 + b"\r\n\r\n", 431),
    (b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 10_000, 431),  # no end of head at all
])
async def test_bad_requests_get_an_error_and_a_closed_connection(bad, status):
    async with trio.open_nursery() as nursery:
        server, port = await _start(nursery)
        raw = await _exchange(port, bad)
        got, headers, _ = _split_response(raw)
        assert got == status and headers["connection"] == "close"
        assert server.bad_requests == 1
        # The server is still there for the next scraper.
        status2, _, body = _split_response(await _exchange(port, b"GET /metrics HTTP/1.0\r\n\r\n"))
        assert status2 == 200 and b"raftkafka_raft_epoch 7" in body
        nursery.cancel_scope.cancel()


async def test_truncated_head_and_silent_clients_do_not_hurt_the_server():
    async with trio.open_nursery() as nursery:
        server, port = await _start(nursery)
        raw = await _exchange(port, b"GET /metrics HTTP/1.1\r\nHost:", half_close=True)
        assert _split_response(raw)[0] == 400
        # Connect-and-close and an idle open connection, while a real scrape goes through.
        s = await trio.open_tcp_stream("127.0.0.1", port)
        await s.aclose()
        idle = await trio.open_tcp_stream("127.0.0.1", port)
        status, _, _ = _split_response(await _exchange(port, b"GET /metrics HTTP/1.0\r\n\r\n"))
        assert status == 200
        await idle.aclose()
        nursery.cancel_scope.cancel()


async def test_a_failing_gauge_does_not_fail_the_scrape():
    r = _registry()
    r.gauge("raftkafka_raft_leader_id").set_function(lambda: {}["missing"])
    async with trio.open_nursery() as nursery:
        _, port = await _start(nursery, r)
        status, _, body = _split_response(await _exchange(port, b"GET /metrics HTTP/1.0\r\n\r\n"))
        assert status == 200
        fams = parse_exposition(body.decode())
        assert fams["raftkafka_raft_leader_id"]["samples"] == []
        assert samples_of(body.decode(), "raftkafka_raft_epoch") == {(): 7}
        nursery.cancel_scope.cancel()


def test_parse_request_head():
    assert parse_request_head(b"GET /metrics?x=1 HTTP/1.1\r\nHost: h\r\nAccept:  text/plain ") == (
        "GET", "/metrics", "HTTP/1.1", {"host": "h", "accept": "text/plain"})
    for bad in (b"", b"GET / HTTP/1.1 extra", b"GET  / HTTP/1.1", b"GET / HTTP/1.1\r\n X: y"):
        with pytest.raises(BadRequest):
            parse_request_head(bad)
