"""TLS in the simulated network: the real authentication decision, without encryption.

A simulated connection between a TLS client and a TLS listener runs the real TLS handshake
between the two `ssl.SSLContext`s in memory (two `ssl.MemoryBIO` pairs, pumped here), so
certificate checks, client authentication and host name checks decide exactly as over a
real socket, and the server side learns the client's certificate. None of those bytes
travel the simulated network, and the application bytes that follow are not encrypted:
the network trace (byte counts, timings) stays what a plaintext run's would be, and a seed
replays the same run. The outcome depends only on the certificates and the contexts.
"""
from __future__ import annotations

import ssl

__all__ = ["TlsRefused", "model_handshake"]


class TlsRefused(ConnectionError):
    """The modelled handshake failed; str(e) says why (as the real one would)."""


def model_handshake(client: ssl.SSLContext | None, server: ssl.SSLContext | None,
                    server_hostname: str) -> dict | None:
    """The client certificate the server sees (`getpeercert()` form; None if none was sent),
    or TlsRefused. Plaintext on both sides is no handshake at all (None)."""
    if client is None and server is None:
        return None
    if client is None or server is None:
        raise TlsRefused("TLS on one side only: " + ("the listener" if server is not None else "the client")
                         + " speaks TLS")
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    c = client.wrap_bio(c_in, c_out, server_side=False, server_hostname=server_hostname)
    s = server.wrap_bio(s_in, s_out, server_side=True)
    done = {c: False, s: False}
    for _ in range(20):  # a TLS 1.2/1.3 handshake takes a handful of flights
        for side in (c, s):
            if not done[side]:
                try:
                    side.do_handshake()
                    done[side] = True
                except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                    pass
                except ssl.SSLError as e:
                    raise TlsRefused(getattr(e, "verify_message", None) or e.reason or str(e)) from None
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            break
    else:
        raise TlsRefused("the handshake did not complete")
    # TLS 1.3: the server checks the client's certificate after the client thinks it is done;
    # a refusal reaches the client as an alert on its first read.
    try:
        c.read(1)
    except ssl.SSLWantReadError:
        pass
    except ssl.SSLError as e:
        raise TlsRefused(getattr(e, "verify_message", None) or e.reason or str(e)) from None
    return s.getpeercert() or None
