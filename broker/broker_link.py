"""A connection from this broker to another broker's Kafka listener: the replica fetcher's
and the transaction coordinator's (WriteTxnMarkers). Requests are strictly sequential.

    link = await open_link(env, (host, port), client_id=..., tls=..., sasl=..., timeout_s=30)
    response = await link.call(request, version, timeout_s)

Each request is bounded by `timer` (storage.deadline_reaper.Timer: one cancel scope for the
connection, held open by its owner) when one is given, else by env.fail_after. A SASL
login runs before any other request; `retire_at` is when to log in afresh (KIP-368).
"""
from __future__ import annotations

import trio

from storage.deadline_reaper import Timer
from wire.errors import DecodeError
from wire.protocol import FrameReader, decode_response, encode_request
from wire.security.kafka_sasl_login import sasl_login
from wire.security.sasl_common import SaslAuthenticationError
from wire.security.sasl_config import SaslCredentials

__all__ = ["BrokerLink", "open_link"]


class BrokerLink:
    def __init__(self, env, stream, client_id: str, timer: Timer | None = None):
        self.env = env
        self.stream = stream
        self.client_id = client_id
        self.timer = timer
        self.reader = FrameReader()
        self.correlation = 0
        self.retire_at = float("inf")  # shortly before its SASL session ends (KIP-368)

    async def call(self, request, version: int, timeout: float):
        if self.timer is None:
            with self.env.fail_after(timeout):
                return await self._call(request, version)
        self.timer.arm(timeout)
        try:
            return await self._call(request, version)
        finally:
            self.timer.disarm()

    async def _call(self, request, version: int):
        self.correlation += 1
        await self.stream.send_all(encode_request(request, version, self.correlation, self.client_id))
        while True:
            frame = self.reader.next_frame()
            if frame is not None:
                break
            data = await self.stream.receive_some(1 << 16)
            if not data:
                raise trio.BrokenResourceError("the other broker closed the connection")
            self.reader.feed(data)
        correlation, body = decode_response(frame, request.API_KEY, version)
        if correlation != self.correlation:
            raise DecodeError(f"response correlation {correlation} != {self.correlation}")
        return body

    async def aclose(self) -> None:
        await trio.aclose_forcefully(self.stream)


async def open_link(env, address: tuple[str, int], *, client_id: str, tls=None, sasl: SaslCredentials | None = None,
                    timeout_s: float, timer: Timer | None = None) -> BrokerLink:
    """Connect (and log in); OSError when the broker cannot be reached or refuses the login."""
    with env.fail_after(timeout_s):
        stream = await env.net.connect(*address, tls=tls)
    link = BrokerLink(env, stream, client_id, timer)
    if sasl is not None:
        try:
            lifetime_ms = await sasl_login(lambda request, version: link.call(request, version, timeout_s),
                                           sasl, env.rng)
        except SaslAuthenticationError as exc:
            await link.aclose()
            raise OSError(f"SASL login to {address[0]}:{address[1]} failed: {exc}") from None
        if lifetime_ms > 0:
            link.retire_at = env.now() + lifetime_ms / 1000 * 0.85
    return link
