"""`dev --security MODE`: a throwaway CA, node certificates and an admin user for a local cluster.

MODE `ssl`: every listener speaks TLS. Client ports are `SSL://` listeners requiring a client
certificate (mTLS); the controller listener is TLS too and inter-broker replication runs
over the SSL listener. Certificates map to principals by their CN
(`ssl.principal.mapping.rules=RULE:^CN=([^,]+).*$/$1/,DEFAULT`): nodes are `User:node-<i>`,
the admin `User:admin`, and `super.users` names exactly those, so only they may speak
Raft, controller RPCs and replica fetches. `<data-dir>/client.properties` holds the admin's
client properties (Kafka/librdkafka names) for any client or `--command-config`.

MODES `sasl_plaintext` and `sasl_ssl`: every listener (client and controller) is SASL, over
TLS for `sasl_ssl` (server certificates from the throwaway CA; clients need only the CA).
The nodes log in to each other as `User:node` with PLAIN (the listeners' JAAS users, as
KRaft controllers need). The admin `User:admin` is a PLAIN user of both listeners (so
client.properties serves clients and `quorum describe` alike) and, with the same password,
a SCRAM-SHA-256 user seeded into the metadata when the nodes are formatted (as `format
--add-scram`). Client listeners offer PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, so users
added later with `configs --entity-type users` log in too. `super.users` is User:node and User:admin. Passwords are generated once
(`<data-dir>/security/*.password`) and kept on restart.

Every secured mode turns the StandardAuthorizer on with `allow.everyone.if.no.acl.found=false`:
the nodes and the admin (super.users) may do everything, any other principal nothing until
`acls --add` grants it.
"""
from __future__ import annotations

import os
import secrets
from dataclasses import dataclass

from metadata.authorizer import STANDARD_AUTHORIZER
from raftkafka.node.config import ConfigError

__all__ = ["SECURITY_MODES", "DevSecurity", "prepare_security"]

SECURITY_MODES = ("plaintext", "ssl", "sasl_plaintext", "sasl_ssl")
MAPPING_RULES = "RULE:^CN=([^,]+).*$/$1/,DEFAULT"
# Every secured mode is deny-by-default, as a real secured cluster: only super.users (the nodes
# and the admin) may do anything until ACLs grant more (`acls --add`).
AUTHORIZER_SETTINGS = {"authorizer.class.name": STANDARD_AUTHORIZER, "allow.everyone.if.no.acl.found": "false"}


@dataclass(frozen=True)
class DevSecurity:
    node_settings: dict[int, dict]  # node id → settings added to its node.toml
    client_properties: dict[str, str]  # what client.properties holds
    client_properties_path: str
    bootstrap_records: bytes = b""  # metadata written with the first active controller (SCRAM users)


def prepare_security(mode: str, data_dir: str, node_ids: list[int], host: str) -> DevSecurity | None:
    """Certificates under `<data-dir>/security/` (made once, kept on restart) and the settings."""
    if mode == "plaintext":
        return None
    if mode not in SECURITY_MODES:
        raise ConfigError(f"--security {mode}: choose one of {', '.join(SECURITY_MODES)}")
    data_dir = os.path.abspath(data_dir)
    folder = os.path.join(data_dir, "security")
    if mode.startswith("sasl"):
        return _sasl(mode.upper(), data_dir, folder, node_ids, host)
    ca_path, paths, admin_path = _certificates(folder, node_ids, host, with_admin=True)
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
            **AUTHORIZER_SETTINGS,
        }
    admin_base = admin_path[:-4]
    properties = {
        "security.protocol": "SSL",
        "ssl.ca.location": ca_path,
        "ssl.certificate.location": admin_base + ".crt",
        "ssl.key.location": admin_base + ".key",
    }
    return DevSecurity(node_settings, properties, _write_properties(data_dir, properties))


def _certificates(folder: str, node_ids: list[int], host: str, *, with_admin: bool):
    """(CA truststore, node id → node keystore, admin keystore or None), made once."""
    from raftkafka.cli.dev_certs import CertificateAuthority

    ca_path = os.path.join(folder, "ca.pem")
    admin_path = os.path.join(folder, "admin.pem") if with_admin else None
    paths = {i: os.path.join(folder, f"node-{i}.pem") for i in node_ids}
    if not all(os.path.exists(p) for p in [ca_path, *paths.values()] + ([admin_path] if admin_path else [])):
        ca = CertificateAuthority()
        ca.write_truststore(ca_path)
        ca.write_key(os.path.join(folder, "ca-key.pem"))  # to issue more (CertificateAuthority.load)
        for node_id, path in paths.items():
            ca.issue(path, f"node-{node_id}", hosts=("localhost", host))
        if admin_path:
            ca.issue(admin_path, "admin", hosts=("localhost", host))
    return ca_path, paths, admin_path


def _password(folder: str, user: str) -> str:
    """The dev cluster's password for `user`: generated the first time, then read back."""
    path = os.path.join(folder, f"{user}.password")
    if not os.path.exists(path):
        os.makedirs(folder, exist_ok=True)
        with open(path + ".tmp", "w") as f:
            f.write(secrets.token_urlsafe(18) + "\n")
        os.replace(path + ".tmp", path)
    with open(path) as f:
        return f.read().strip()


def _sasl(protocol: str, data_dir: str, folder: str, node_ids: list[int], host: str) -> DevSecurity:
    from metadata.bootstrap_records import encode_bootstrap_records
    from metadata.controller.scram import credential_record
    from raftkafka.cli.scram_args import parse_scram_args

    node_password, admin_password = _password(folder, "node"), _password(folder, "admin")
    jaas = (f'org.apache.kafka.common.security.plain.PlainLoginModule required username="node" '
            f'password="{node_password}" user_node="{node_password}" user_admin="{admin_password}";')
    common = {
        "listener.security.protocol.map": f"{protocol}:{protocol},CONTROLLER:{protocol}",
        "inter.broker.listener.name": protocol,
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.mechanism.controller.protocol": "PLAIN",
        f"listener.name.{protocol.lower()}.plain.sasl.jaas.config": jaas,
        "listener.name.controller.plain.sasl.jaas.config": jaas,
        "super.users": "User:node;User:admin",
        **AUTHORIZER_SETTINGS,
    }
    properties = {"security.protocol": protocol, "sasl.mechanism": "PLAIN",
                  "sasl.username": "admin", "sasl.password": admin_password}
    node_settings = {i: dict(common) for i in node_ids}
    if protocol == "SASL_SSL":
        ca_path, paths, _ = _certificates(folder, node_ids, host, with_admin=False)
        for node_id, path in paths.items():
            node_settings[node_id].update({
                "ssl.keystore.type": "PEM", "ssl.keystore.location": path,
                "ssl.truststore.type": "PEM", "ssl.truststore.location": ca_path,
            })
        properties["ssl.ca.location"] = ca_path
    admin = parse_scram_args(f"SCRAM-SHA-256=[name=admin,password={admin_password}]", name_required=True)[0]
    records = [credential_record(admin.name, admin.mechanism_id, admin.iterations, admin.salt,
                                 admin.salted_password)]
    return DevSecurity(node_settings, properties, _write_properties(data_dir, properties),
                       encode_bootstrap_records(records))


def _write_properties(data_dir: str, properties: dict[str, str]) -> str:
    properties_path = os.path.join(data_dir, "client.properties")
    os.makedirs(data_dir, exist_ok=True)
    with open(properties_path + ".tmp", "w") as f:
        f.write("# Client properties for the dev cluster (Kafka/librdkafka names): pass with --command-config\n")
        f.writelines(f"{k}={v}\n" for k, v in properties.items())
    os.replace(properties_path + ".tmp", properties_path)
    return properties_path
