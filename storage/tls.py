"""TLS contexts from Kafka's ssl.* settings, reloaded when their files change.

Kafka's PEM settings: `ssl.keystore.type=PEM` with `ssl.keystore.location` a PEM file
holding the private key (encrypted with `ssl.key.password`, or not) and the certificate
chain; `ssl.truststore.location` (a PEM bundle of CA certificates) or the same bundle
inline in `ssl.truststore.certificates`. `ssl.client.auth` (none, requested, required) on
servers; `ssl.endpoint.identification.algorithm` (`https`, Kafka's default, checks the
server's name; empty turns it off) on clients. Only TLS 1.2 and 1.3 are ever enabled:
`ssl.enabled.protocols` may narrow that, `ssl.cipher.suites` narrows TLS 1.2's ciphers
(Python cannot restrict TLS 1.3's).

A `TlsContext` is what the Env's network takes (`net.serve(..., tls=)`, `net.connect(...,
tls=)`): its `context` is the current `ssl.SSLContext`, rebuilt by `watch` when the
keystore or truststore content changes, so new connections use new certificates without
a restart while open ones keep theirs. The files are read through the Env for the watch;
the ssl module loads the keystore by path (it takes no bytes).
"""
from __future__ import annotations

import hashlib
import logging
import ssl
from dataclasses import dataclass
from typing import Callable

__all__ = ["TlsSettings", "TlsContext", "TlsConfigError", "tls_settings"]

log = logging.getLogger("raftkafka.tls")

_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


class TlsConfigError(ValueError):
    """A TLS setting or file that cannot be used; str(e) is one line naming the setting."""


@dataclass(frozen=True)
class TlsSettings:
    keystore_location: str | None = None
    key_password: str | None = None
    truststore_location: str | None = None
    truststore_certificates: str | None = None  # inline PEM
    client_auth: str = "none"  # servers: none | requested | required
    enabled_protocols: tuple[str, ...] = ("TLSv1.2", "TLSv1.3")
    cipher_suites: str | None = None
    endpoint_identification: bool = True  # clients: check the server's name against its certificate
    handshake_timeout: float = 10.0
    reload_interval: float = 5.0


def tls_settings(get: Callable[[str, str | None], str | None], *, client_auth: str | None = None) -> TlsSettings:
    """Settings from a lookup of Kafka names (a node listener's or a client's properties)."""
    for kind in ("ssl.keystore.type", "ssl.truststore.type"):
        if (get(kind, "PEM") or "PEM").upper() != "PEM":
            raise TlsConfigError(f"{kind}: only PEM is supported")
    if get("ssl.keystore.certificate.chain", None) or get("ssl.keystore.key", None):
        raise TlsConfigError("ssl.keystore.certificate.chain/ssl.keystore.key: inline keystores are not "
                             "supported; put the key and chain in a PEM file named by ssl.keystore.location")
    auth = (client_auth or get("ssl.client.auth", "none") or "none").strip().lower()
    if auth not in ("none", "requested", "required"):
        raise TlsConfigError(f"ssl.client.auth: {auth!r} is not none, requested or required")
    protocols = tuple(p.strip() for p in (get("ssl.enabled.protocols", "") or "TLSv1.2,TLSv1.3").split(",")
                      if p.strip())
    bad = [p for p in protocols if p not in _PROTOCOLS]
    if bad or not protocols:
        raise TlsConfigError(f"ssl.enabled.protocols: {','.join(bad) or 'empty'} not allowed (TLSv1.2, TLSv1.3)")
    try:
        handshake = int(get("ssl.handshake.timeout.ms", "10000") or 10000) / 1000
        reload_interval = int(get("ssl.reload.check.interval.ms", "5000") or 5000) / 1000
    except ValueError as e:
        raise TlsConfigError(f"ssl.handshake.timeout.ms / ssl.reload.check.interval.ms: {e}") from None
    return TlsSettings(
        keystore_location=get("ssl.keystore.location", None) or None,
        key_password=get("ssl.key.password", None) or None,
        truststore_location=get("ssl.truststore.location", None) or None,
        truststore_certificates=get("ssl.truststore.certificates", None) or None,
        client_auth=auth,
        enabled_protocols=protocols,
        cipher_suites=get("ssl.cipher.suites", None) or None,
        endpoint_identification=(get("ssl.endpoint.identification.algorithm", "https") or "").lower() == "https",
        handshake_timeout=handshake,
        reload_interval=reload_interval,
    )


def build_context(settings: TlsSettings, *, server_side: bool) -> ssl.SSLContext:
    """An SSLContext for one side; TlsConfigError naming the setting when a file is unusable."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER if server_side else ssl.PROTOCOL_TLS_CLIENT)
    versions = sorted(_PROTOCOLS[p] for p in settings.enabled_protocols)
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    if settings.cipher_suites:
        try:
            ctx.set_ciphers(":".join(c.strip() for c in settings.cipher_suites.split(",")))
        except ssl.SSLError:
            raise TlsConfigError(f"ssl.cipher.suites: none of {settings.cipher_suites!r} is available") from None
    if settings.keystore_location:
        try:
            ctx.load_cert_chain(settings.keystore_location, password=settings.key_password)
        except FileNotFoundError:
            raise TlsConfigError(f"ssl.keystore.location: {settings.keystore_location} does not exist") from None
        except (ssl.SSLError, OSError) as e:
            raise TlsConfigError(f"ssl.keystore.location: cannot load key and certificate from "
                                 f"{settings.keystore_location} ({_reason(e)}; is ssl.key.password right?)") from None
    elif server_side:
        raise TlsConfigError("ssl.keystore.location: a TLS listener needs a certificate")
    try:
        if settings.truststore_location:
            ctx.load_verify_locations(cafile=settings.truststore_location)
        if settings.truststore_certificates:
            ctx.load_verify_locations(cadata=settings.truststore_certificates)
    except (ssl.SSLError, OSError) as e:
        raise TlsConfigError(f"ssl.truststore.location: cannot load CA certificates ({_reason(e)})") from None
    has_ca = bool(settings.truststore_location or settings.truststore_certificates)
    if server_side:
        ctx.verify_mode = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                           "required": ssl.CERT_REQUIRED}[settings.client_auth]
        if ctx.verify_mode != ssl.CERT_NONE and not has_ca:
            raise TlsConfigError("ssl.truststore.location: ssl.client.auth needs the CA that signs client certificates")
    else:
        if not has_ca:
            ctx.load_default_certs()
        ctx.check_hostname = settings.endpoint_identification
    return ctx


def _reason(e: Exception) -> str:
    return getattr(e, "reason", None) or getattr(e, "strerror", None) or str(e)


class TlsContext:
    """The current SSLContext for a listener (server side) or for outbound connections."""

    def __init__(self, settings: TlsSettings, *, server_side: bool):
        self.settings = settings
        self.server_side = server_side
        self.context = build_context(settings, server_side=server_side)
        self.handshake_timeout = settings.handshake_timeout
        self.reloads = 0
        self._fingerprint: bytes | None = None

    def _files(self) -> list[str]:
        return [p for p in (self.settings.keystore_location, self.settings.truststore_location) if p]

    def _read_fingerprint(self, fs) -> bytes:
        digest = hashlib.sha256()
        for path in self._files():
            try:
                f = fs.open(path)
            except OSError:
                digest.update(b"\0missing")
                continue
            try:
                digest.update(f.read(0, f.size()))
            finally:
                f.close()
        return digest.digest()

    def check_reload(self, fs) -> bool:
        """Rebuild the context if a file's content changed; keep the old one if the new
        files do not load (a half-written file is retried at the next check)."""
        fingerprint = self._read_fingerprint(fs)
        if self._fingerprint is None or fingerprint == self._fingerprint:
            self._fingerprint = fingerprint
            return False
        try:
            self.context = build_context(self.settings, server_side=self.server_side)
        except TlsConfigError as e:
            log.warning("TLS files changed but do not load; keeping the previous certificates: %s", e)
            return False
        self._fingerprint = fingerprint
        self.reloads += 1
        log.info("TLS certificates reloaded from %s", ", ".join(self._files()))
        return True

    async def watch(self, env) -> None:
        """Check the files every `ssl.reload.check.interval.ms`, forever."""
        self.check_reload(env.fs)
        while True:
            await env.sleep(self.settings.reload_interval)
            self.check_reload(env.fs)
