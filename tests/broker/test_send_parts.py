"""Responses go out as bytes chunks plus file slices sent with File.send_to (sendfile on RealEnv)."""
import os

import trio
import trio.testing

from broker.records_slice import RecordsSlice
from broker.server import send_parts
from storage.env import RealEnv
from storage.log import FetchData


class SendOnlyFile:
    """A file whose bytes may only leave through send_to."""

    def __init__(self, data: bytes):
        self.data = data
        self.sends = []

    def read(self, offset, size):
        raise AssertionError("record bytes must not be read into Python on the fetch path")

    async def send_to(self, stream, offset, count):
        self.sends.append((offset, count))
        await stream.send_all(self.data[offset:offset + count])
        return count


async def test_slices_are_sent_with_send_to_between_the_byte_chunks():
    file = SendOnlyFile(b"0123456789")
    send, receive = trio.testing.memory_stream_pair()
    parts = [b"head", b"er", RecordsSlice(FetchData(file, 2, 5, 0)), b"mid", RecordsSlice(FetchData(file, 0, 1, 0))]
    await send_parts(send, parts)
    await send.send_eof()
    got = b""
    while chunk := await receive.receive_some(100):
        got += chunk
    assert got == b"header23456mid0"
    assert file.sends == [(2, 5), (0, 1)]


async def test_real_files_go_through_sendfile_on_tcp(tmp_path):
    env = RealEnv(seed=1)
    path = str(tmp_path / "segment.log")
    f = env.fs.open(path, create=True)
    f.append(os.urandom(4096))
    payload = f.read(100, 3000)
    received = []

    async def server(stream):
        await send_parts(stream, [b"<", RecordsSlice(FetchData(f, 100, 3000, 0)), b">"])
        await stream.aclose()

    async with trio.open_nursery() as nursery:
        port = await nursery.start(env.net.serve, "127.0.0.1", 0, server)
        client = await env.net.connect("127.0.0.1", port)
        with trio.fail_after(10):
            while chunk := await client.receive_some(65536):
                received.append(chunk)
        nursery.cancel_scope.cancel()
    f.close()
    assert b"".join(received) == b"<" + payload + b">"
