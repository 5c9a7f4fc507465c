"""`dev --security MODE`: a throwaway CA, node certificates and an admin user for a local cluster.

MODE `ssl`: every listener speaks TLS. Client ports are `SSL://` listeners requiring a client
certificate (mTLS); the controller listener is TLS too and inter-broker replication runs
over the SSL listener. Certificates map to principals by their CN
(`ssl.principal.mapping.rules=RULE:^CN=([^,]+).*$/$1/,DEFAULT`): nodes are `User:node-<i>`,
the admin `User:admin`, and `super.users` names exactly those, so only they may speak
Raft, controller RPCs and replica fetches. `<data-dir>/client.properties` holds the admin's
client properties (Kafka/librdkafka names) for any client or `--command-config`.
SASL modes come with the SASL mechanisms.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from raftkafka.node.config import ConfigError

__all__ = ["SECURITY_MODES", "DevSecurity", "prepare_security"]

SECURITY_MODES = ("plaintext", "ssl", "sasl_plaintext", "sasl_ssl")
MAPPING_RULES = "RULE:^CN=([^,]+).*$/$1/,DEFAULT"


@dataclass(frozen=True)
class DevSecurity:
    node_settings: dict[int, dict]  # node id → settings added to its node.toml
    client_properties: dict[str, str]  # what client.properties holds
    client_properties_path: str


def prepare_security(mode: str, data_dir: str, node_ids: list[int], host: str) -> DevSecurity | None:
    """Certificates under `<data-dir>/security/` (made once, kept on restart) and the settings."""
    if mode == "plaintext":
        return None
    if mode != "ssl":
        raise ConfigError(f"--security {mode}: SASL is not built yet; use --security ssl")
    from raftkafka.cli.dev_certs import CertificateAuthority

    data_dir = os.path.abspath(data_dir)
    folder = os.path.join(data_dir, "security")
    ca_path = os.path.join(folder, "ca.pem")
    admin_path = os.path.join(folder, "admin.pem")
    paths = {i: os.path.join(folder, f"node-{i}.pem") for i in node_ids}
    if not all(os.path.exists(p) for p in [ca_path, admin_path, *paths.values()]):
        ca = CertificateAuthority()
        ca.write_truststore(ca_path)
        ca.write_key(os.path.join(folder, "ca-key.pem"))  # to issue more (CertificateAuthority.load)
        for node_id, path in paths.items():
            ca.issue(path, f"node-{node_id}", hosts=("localhost", host))
        ca.issue(admin_path, "admin", hosts=("localhost", host))
    super_users = ";".join([f"User:node-{i}" for i in node_ids] + ["User:admin"])
    node_settings = {}
    for node_id, path in paths.items():
        node_settings[node_id] = {
            "listener.security.protocol.map": "SSL:SSL,CONTROLLER:SSL",
            "inter.broker.listener.name": "SSL",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": path,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": ca_path,
            "ssl.client.auth": "required",
            "ssl.principal.mapping.rules": MAPPING_RULES,
            "super.users": super_users,
        }
    admin_base = admin_path[:-4]
    properties = {
        "security.protocol": "SSL",
        "ssl.ca.location": ca_path,
        "ssl.certificate.location": admin_base + ".crt",
        "ssl.key.location": admin_base + ".key",
    }
    properties_path = os.path.join(data_dir, "client.properties")
    os.makedirs(data_dir, exist_ok=True)
    with open(properties_path + ".tmp", "w") as f:
        f.write("# Client properties for the dev cluster (Kafka/librdkafka names): pass with --command-config\n")
        f.writelines(f"{k}={v}\n" for k, v in properties.items())
    os.replace(properties_path + ".tmp", properties_path)
    return DevSecurity(node_settings, properties, properties_path)
