"""Responses: on a socket, bytes chunks plus file slices sent with File.send_to (sendfile on
RealEnv); on a stream without a file descriptor, the whole frame in one write."""
import os

import pytest
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
        data = self.data[offset:offset + count]
        await stream.send_all(data)
        return len(data)


class RecordingStream:
    """A send stream without a socket that records each write."""

    def __init__(self):
        self.writes = []

    async def send_all(self, data):
        self.writes.append(bytes(data))


async def test_without_a_socket_the_slices_are_copied_through_send_to_and_the_frame_is_one_write():
    file = SendOnlyFile(b"0123456789")
    stream = RecordingStream()
    parts = [b"head", b"er", RecordsSlice(FetchData(file, 2, 5, 0)), b"mid", RecordsSlice(FetchData(file, 0, 1, 0))]
    await send_parts(stream, parts)
    assert stream.writes == [b"header23456mid0"]
    # send_to, not read(): a simulated disk's faults on the way out still apply.
    assert file.sends == [(2, 5), (0, 1)]


async def test_a_slice_cut_short_by_truncation_breaks_the_connection_instead_of_a_short_frame():
    file = SendOnlyFile(b"0123")
    stream = RecordingStream()
    with pytest.raises(trio.BrokenResourceError):
        await send_parts(stream, [b"head", RecordsSlice(FetchData(file, 0, 10, 0))])
    assert stream.writes == []


async def test_memory_streams_get_the_same_bytes():
    file = SendOnlyFile(b"0123456789")
    send, receive = trio.testing.memory_stream_pair()
    await send_parts(send, [b"a", RecordsSlice(FetchData(file, 1, 3, 0)), b"z"])
    await send.send_eof()
    got = b""
    while chunk := await receive.receive_some(100):
        got += chunk
    assert got == b"a123z"


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
