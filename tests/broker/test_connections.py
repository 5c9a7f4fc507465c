"""Bad input on a connection: only that connection closes; the broker keeps serving."""
import random
import socket
import struct

import trio

from tests.broker import builders as B
from tests.broker.harness import RawClient, running_cluster
from wire.protocol import ApiVersionsRequest, ApiVersionsResponse, SaslHandshakeRequest, decode_response, encode_request


async def test_unsupported_api_versions_version_gets_a_v0_answer():
    async with running_cluster() as c:
        client = await RawClient.connect(c.brokers[0].port)
        frame = bytearray(encode_request(ApiVersionsRequest(), 0, 77, "x"))
        struct.pack_into(">h", frame, 6, 9)  # claim ApiVersions v9
        await client.send_raw(bytes(frame))
        cid, body = decode_response(await client.read_frame(), 18, 0)
        assert cid == 77 and body.error_code == 35 and any(k.api_key == 18 for k in body.api_keys)
        # The client retries with a version we speak, on the same connection.
        assert (await client.call(ApiVersionsRequest(client_software_name="x", client_software_version="1"),
                                  3)).error_code == 0


async def test_unknown_key_unsupported_version_and_unimplemented_api_close_the_connection():
    async with running_cluster() as c:
        port = c.brokers[0].port
        bad_frames = []
        frame = bytearray(encode_request(B.metadata("t"), 5, 1, "x"))
        struct.pack_into(">h", frame, 4, 999)  # unknown api key
        bad_frames.append(bytes(frame))
        struct.pack_into(">hh", frame, 4, 3, 42)  # Metadata v42
        bad_frames.append(bytes(frame))
        for data in bad_frames:
            client = await RawClient.connect(port)
            await client.send_raw(data)
            assert await client.is_closed()
        assert c.brokers[0].server.closed_for_bad_input == 2
        # SASL on a PLAINTEXT listener: Kafka's answer, and the connection stays usable
        client = await RawClient.connect(port)
        assert (await client.call(SaslHandshakeRequest(mechanism="PLAIN"), 1)).error_code == 34  # ILLEGAL_SASL_STATE
        assert (await client.call(ApiVersionsRequest(), 0)).error_code == 0


async def test_malformed_frames_close_only_their_connection():
    async with running_cluster() as c:
        port = c.brokers[0].port
        healthy = await RawClient.connect(port)
        await healthy.call(B.create_topic("t", 1), 4)
        cases = [
            struct.pack(">i", -5) + b"xxxx",  # negative size
            struct.pack(">i", 200 * 1024 * 1024),  # over socket.request.max.bytes
            struct.pack(">i", 3) + b"\x00\x03\x00",  # shorter than a header
            encode_request(B.metadata("t"), 5, 1, "x")[:-2] + b"",  # body cut short (size fixed below)
        ]
        truncated = bytearray(cases[3])
        struct.pack_into(">i", truncated, 0, len(truncated) - 4)
        cases[3] = bytes(truncated)
        for data in cases:
            client = await RawClient.connect(port)
            await client.send_raw(data)
            assert await client.is_closed(), data[:16]
        # The first connection never noticed.
        assert B.one_partition(await healthy.call(B.produce("t", 0, B.batch(1)), 8)).error_code == 0


async def test_requests_before_a_bad_frame_are_still_answered_in_order():
    async with running_cluster() as c:
        client = await RawClient.connect(c.brokers[0].port)
        good = encode_request(ApiVersionsRequest(), 0, 5, "x") + encode_request(ApiVersionsRequest(), 0, 6, "x")
        await client.send_raw(good + struct.pack(">i", -1))
        ids = [decode_response(await client.read_frame(), 18, 0)[0] for _ in range(2)]
        assert ids == [5, 6]
        assert await client.is_closed()


async def test_pipelined_requests_are_answered_in_request_order():
    async with running_cluster() as c:
        client = await RawClient.connect(c.brokers[0].port)
        await client.call(B.create_topic("t", 1), 4)
        # A long-poll fetch first: the metadata request behind it must wait its turn.
        await client.send(B.fetch([("t", 0, 0)], max_wait_ms=300, min_bytes=1), 11, correlation_id=100)
        await client.send(B.metadata("t"), 5, correlation_id=101)
        await client.send(ApiVersionsRequest(), 0, correlation_id=102)
        order = []
        for key, version in ((1, 11), (3, 5), (18, 0)):
            cid, _ = decode_response(await client.read_frame(), key, version)
            order.append(cid)
        assert order == [100, 101, 102]


async def test_random_garbage_never_kills_the_broker():
    rng = random.Random(1234)
    async with running_cluster() as c:
        port = c.brokers[0].port
        healthy = await RawClient.connect(port)
        await healthy.call(B.create_topic("t", 1), 4)
        valid = [encode_request(B.produce("t", 0, B.batch(2)), 8, 1, "x"),
                 encode_request(B.fetch([("t", 0, 0)]), 11, 1, "x"),
                 encode_request(B.metadata("t"), 5, 1, "x")]
        for i in range(150):
            base = bytearray(rng.choice(valid))
            if i % 3 == 0:
                data = bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 64)))
            else:
                for _ in range(rng.randrange(1, 6)):  # flip bytes after the size prefix
                    pos = rng.randrange(4, len(base))
                    base[pos] = rng.getrandbits(8)
                data = bytes(base)
            client = await RawClient.connect(port)
            await client.send_raw(data)
            with trio.move_on_after(0.2):  # answered or closed or waiting for more bytes: all fine
                await client.read_frame(timeout=1)
            await client.aclose()
        versions = await healthy.call(ApiVersionsRequest(), 0)
        assert isinstance(versions, ApiVersionsResponse) and versions.error_code == 0
        assert B.one_partition(await healthy.call(B.produce("t", 0, B.batch(1)), 8)).error_code in (0,)


async def test_a_client_vanishing_mid_response_does_not_disturb_the_broker():
    async with running_cluster() as c:
        port = c.brokers[0].port
        healthy = await RawClient.connect(port)
        await healthy.call(B.create_topic("t", 1), 4)
        for _ in range(4):
            await healthy.call(B.produce("t", 0, B.batch(50, value_size=20_000)), 8)
        for _ in range(5):
            rude = await RawClient.connect(port)
            request = encode_request(B.fetch([("t", 0, 0)], max_bytes=50 << 20), 11, 1, "x")
            await rude.send_raw(request * 30)  # ~120 MB of answers that nobody will read
            rude.stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST
            await rude.aclose()
        await trio.sleep(0.2)
        assert B.one_partition(await healthy.call(B.fetch([("t", 0, 0)]), 11)).high_watermark == 200
        fresh = await RawClient.connect(port)
        assert (await fresh.call(ApiVersionsRequest(), 0)).error_code == 0


async def test_a_client_closing_under_a_parked_fetch_ends_its_handler_once_the_fetch_answers():
    """As in Kafka (its muted channel), the close is noticed when the answer cannot be
    written: by the fetch's deadline, not later, and the purgatory is left clean."""
    async with running_cluster() as c:
        broker = c.brokers[0]
        client = await RawClient.connect(broker.port)
        await client.call(B.create_topic("t", 1), 4)
        await client.send(B.fetch([("t", 0, 0)], max_wait_ms=300, min_bytes=1), 11)
        with trio.fail_after(10):
            while broker.purgatory.waiting == 0:
                await trio.sleep(0.01)
        assert broker.server.connections == 1
        await client.aclose()
        with trio.fail_after(10):
            while broker.server.connections:
                await trio.sleep(0.01)
        assert broker.purgatory.waiting == 0


async def test_many_pipelined_requests_are_all_answered_in_order():
    """No read-ahead queue: requests past any queue depth wait in the socket, none is lost."""
    async with running_cluster() as c:
        client = await RawClient.connect(c.brokers[0].port)
        await client.send_raw(b"".join(encode_request(ApiVersionsRequest(), 0, cid, "x") for cid in range(100)))
        ids = [decode_response(await client.read_frame(), 18, 0)[0] for _ in range(100)]
        assert ids == list(range(100))


async def test_an_error_escaping_a_connection_handler_closes_only_that_connection():
    """The listener's last line: an exception out of one connection's setup (here a handler
    wrapper that raises, as a bug would) closes that connection, never the listener."""
    async with running_cluster() as c:
        server = c.brokers[0].server
        serve = server.handle_connection
        broken = True

        async def flaky(stream, security=None, sasl=None):
            if broken:
                raise RuntimeError("a bug in connection setup")
            await serve(stream, security, sasl)

        server.handle_connection = flaky
        client = await RawClient.connect(c.brokers[0].port)
        assert await client.is_closed()
        broken = False
        client = await RawClient.connect(c.brokers[0].port)
        assert (await client.call(ApiVersionsRequest(), 0)).error_code == 0
