"""Throwaway certificates for `dev --security` and tests: a CA, and keys signed by it.

Made with the `cryptography` library (install the `security` extra): never for production,
where certificates come from the organisation's CA. Each `Issued` is written as Kafka's
PEM keystore (private key + certificate chain in one file); the CA as a PEM truststore.
"""
from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass

__all__ = ["CertificateAuthority", "Issued", "require_cryptography"]


def require_cryptography():
    try:
        import cryptography  # noqa: F401
    except ImportError:
        raise SystemExit("TLS certificates for dev/tests need the 'cryptography' package: "
                         "pip install 'raftkafka[security]'") from None


@dataclass(frozen=True)
class Issued:
    keystore: str  # PEM: private key, then certificate, then the CA certificate
    subject: str  # RFC 2253, as the broker sees it
    certificate: str  # the same certificate chain alone, and the key alone (librdkafka's two files)
    key: str


class CertificateAuthority:
    """A new CA (or, with `load`, one written before by `write`)."""

    def __init__(self, name: str = "raftkafka dev CA", *, valid_days: int = 30, _loaded=None):
        require_cryptography()
        if _loaded is not None:
            self._key, self.cert = _loaded
            self.name = self.cert.subject
            return
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        self._key = ec.generate_private_key(ec.SECP256R1())
        self.name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.timezone.utc)
        self.cert = (
            x509.CertificateBuilder().subject_name(self.name).issuer_name(self.name)
            .public_key(self._key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=valid_days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .sign(self._key, hashes.SHA256())
        )

    def ca_pem(self) -> bytes:
        from cryptography.hazmat.primitives import serialization

        return self.cert.public_bytes(serialization.Encoding.PEM)

    def write_truststore(self, path: str) -> str:
        _write(path, self.ca_pem())
        return path

    def write_key(self, path: str) -> str:
        """The CA's private key (unencrypted, mode 0600): lets `load` issue more certificates."""
        from cryptography.hazmat.primitives import serialization

        _write(path, self._key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                             serialization.NoEncryption()))
        return path

    @classmethod
    def load(cls, cert_path: str, key_path: str) -> "CertificateAuthority":
        require_cryptography()
        from cryptography import x509
        from cryptography.hazmat.primitives import serialization

        with open(cert_path, "rb") as f:
            cert = x509.load_pem_x509_certificate(f.read())
        with open(key_path, "rb") as f:
            key = serialization.load_pem_private_key(f.read(), password=None)
        return cls(_loaded=(key, cert))

    def issue(self, path: str, common_name: str, *, org_unit: str | None = None,
              hosts: tuple[str, ...] = ("localhost", "127.0.0.1"), password: str | None = None,
              valid_from: datetime.datetime | None = None, valid_days: int = 30) -> Issued:
        """A key and certificate for `common_name` (server and client use), valid for `hosts`,
        written to `path` as a PEM keystore (the key encrypted when `password` is given)."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        key = ec.generate_private_key(ec.SECP256R1())
        attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
        if org_unit:
            attrs.insert(0, x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, org_unit))
        subject = x509.Name(attrs)
        start = valid_from or datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)
        names = []
        for host in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        cert = (
            x509.CertificateBuilder().subject_name(subject).issuer_name(self.name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(start + datetime.timedelta(days=valid_days))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .sign(self._key, hashes.SHA256())
        )
        encryption = (serialization.BestAvailableEncryption(password.encode()) if password
                      else serialization.NoEncryption())
        key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
        chain = cert.public_bytes(serialization.Encoding.PEM) + self.ca_pem()
        base = path[:-4] if path.endswith(".pem") else path
        _write(path, key_pem + chain)
        _write(base + ".crt", chain)
        _write(base + ".key", key_pem)
        return Issued(path, subject.rfc4514_string(), base + ".crt", base + ".key")


def _write(path: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
