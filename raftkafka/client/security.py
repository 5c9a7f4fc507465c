"""A client's security settings from Kafka client properties (librdkafka's and Java's names).

`security.protocol` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL); for TLS librdkafka's
`ssl.ca.location`, `ssl.certificate.location`, `ssl.key.location`, `ssl.key.password`, or
the Java client's PEM settings `ssl.truststore.location` / `ssl.keystore.location` (key and
chain in one file); `ssl.endpoint.identification.algorithm` (`https` by default: the
broker's certificate must name the host we dialled; `none` or empty turns that off).
On SASL_PLAINTEXT/SASL_SSL, `sasl.mechanism` with `sasl.username`/`sasl.password` (or a
`sasl.jaas.config` carrying username and password) become the `login` the connection runs
after the TLS handshake and ApiVersions (raftkafka.client.connection).
"""
from __future__ import annotations

import ssl
from dataclasses import dataclass

from storage.tls import TlsConfigError, TlsContext, tls_settings
from wire.security.connection_security import SECURITY_PROTOCOLS, uses_sasl, uses_tls
from wire.security.sasl_config import SaslCredentials, client_credentials

__all__ = ["ClientSecurity", "SECURITY_PROPERTIES", "PLAINTEXT_CLIENT"]

SECURITY_PROPERTIES = frozenset({
    "security.protocol", "ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.key.password",
    "ssl.endpoint.identification.algorithm", "ssl.truststore.location", "ssl.truststore.type",
    "ssl.keystore.location", "ssl.keystore.type", "ssl.enabled.protocols", "ssl.cipher.suites",
    "sasl.mechanism", "sasl.mechanisms", "sasl.username", "sasl.password", "sasl.jaas.config",
})


@dataclass(frozen=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    tls: TlsContext | None = None
    login: SaslCredentials | None = None  # on SASL_PLAINTEXT / SASL_SSL

    @classmethod
    def from_properties(cls, properties: dict[str, str]) -> "ClientSecurity":
        """ValueError (one line naming the property) for a bad value or unusable file."""
        protocol = properties.get("security.protocol", "PLAINTEXT").strip().upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise ValueError(f"security.protocol: {protocol!r} is not one of {', '.join(SECURITY_PROTOCOLS)}")
        sasl = {k: v for k, v in properties.items() if k.startswith("sasl.")}
        tls = None
        if uses_tls(protocol):
            tls = _client_tls(properties)
        elif any(k.startswith("ssl.") for k in properties):
            raise ValueError(f"ssl.* properties given but security.protocol is {protocol} (SSL or SASL_SSL?)")
        if sasl and not uses_sasl(protocol):
            raise ValueError(f"sasl.* properties given but security.protocol is {protocol}")
        login = client_credentials(sasl) if uses_sasl(protocol) else None
        return cls(protocol, tls, login)


PLAINTEXT_CLIENT = ClientSecurity()


def _client_tls(p: dict[str, str]) -> TlsContext:
    cert, key = p.get("ssl.certificate.location"), p.get("ssl.key.location")
    if bool(cert) != bool(key) and not p.get("ssl.keystore.location"):
        raise ValueError("ssl.certificate.location and ssl.key.location go together")

    def get(name: str, default: str | None = None) -> str | None:
        if name == "ssl.truststore.location":  # librdkafka's name first
            return p.get("ssl.ca.location") or p.get(name) or default
        return p.get(name, default)

    try:
        ctx = TlsContext(tls_settings(get), server_side=False)
        if cert and key and not p.get("ssl.keystore.location"):
            # librdkafka's certificate and key in separate files.
            ctx.context.load_cert_chain(cert, key, password=p.get("ssl.key.password"))
    except TlsConfigError as e:
        text = str(e)
        if p.get("ssl.ca.location"):  # name the setting as the user spelled it
            text = text.replace("ssl.truststore.location", "ssl.ca.location")
        raise ValueError(text) from None
    except (ssl.SSLError, OSError) as e:
        raise ValueError(f"ssl.certificate.location/ssl.key.location: cannot load ({e})") from None
    return ctx
