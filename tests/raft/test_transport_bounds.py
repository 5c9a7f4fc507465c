"""The controller listener's transport: a connection speaks for one node, idle connections close."""
import trio

from raft import codec
from raft.messages import FetchRequest
from raft.transport import Transport
from storage.env import RealEnv
from wire.connection_limits import ConnectionLimits
from wire.rpc import FrameDecoder, encode_frame

CLUSTER = "c1"


async def _serve(nursery, limits=ConnectionLimits()):
    send, receive = trio.open_memory_channel(100)
    transport = Transport(RealEnv(seed=1), node_id=1, cluster_id=CLUSTER, peers={}, inbox=send, limits=limits)
    port = await nursery.start(transport.run, "127.0.0.1", 0)
    return transport, port, receive


async def _next_frame(stream, decoder):
    while (frame := decoder.next_frame()) is None:
        data = await stream.receive_some(65536)
        if not data:
            return None
        decoder.feed(data)
    return frame


async def test_a_connection_that_named_one_node_cannot_speak_for_another(nursery):
    _, port, inbox = await _serve(nursery)
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    await stream.send_all(encode_frame(FetchRequest(CLUSTER, 5, 0, 0, 0, 0, 0), 1)
                          + encode_frame(FetchRequest(CLUSTER, 6, 0, 0, 0, 0, 0), 2))
    reply = await _next_frame(stream, FrameDecoder())
    assert isinstance(reply.message, codec.ErrorResponse) and reply.correlation_id == 2
    src, msg = inbox.receive_nowait()
    assert src == 5 and msg.replica_id == 5
    assert inbox.statistics().current_buffer_used == 0


async def test_idle_connections_are_closed(nursery):
    transport, port, _ = await _serve(nursery, ConnectionLimits(idle_timeout_s=0.2, max_connections=1))
    first = await trio.open_tcp_stream("127.0.0.1", port)
    second = await trio.open_tcp_stream("127.0.0.1", port)
    with trio.fail_after(5):
        assert await second.receive_some(10) == b""  # over max.connections: closed at once
        assert await first.receive_some(10) == b""  # idle: closed
    assert transport.quotas.refused == 1
