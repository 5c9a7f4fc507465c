"""TLS pieces without a cluster: principal mapping, the member rule, listener config, PEM
contexts, the real Env's TLS (handshake deadline, refused certificates, reload on change)."""
from __future__ import annotations

import datetime
import os
import shutil

import pytest
import trio

from raftkafka.client.security import ClientSecurity
from raftkafka.node.config import ConfigError, load_config
from raftkafka.cli.dev_certs import CertificateAuthority
from raftkafka.node.security_setup import all_listener_security
from storage.env import RealEnv, RealFileSystem
from storage.listener_security import ListenerSecurity
from storage.tls import TlsConfigError, TlsContext, TlsSettings
from wire.security.connection_security import ConnectionSecurity, is_member
from wire.security.principal import ANONYMOUS, KafkaPrincipal, parse_principals
from wire.security.principal_mapping import NoMatchingRule, PrincipalMapper, subject_from_peercert


# ------------------------------------------------------------------ principals and mapping

def test_mapping_rules_as_kafka():
    mapper = PrincipalMapper("RULE:^CN=(.*?),OU=(.*?)$/$1@$2/L, RULE:^CN=([^,]*)$/$1/U,DEFAULT")
    assert mapper.name_for("CN=Alice,OU=Eng") == "alice@eng"
    assert mapper.name_for("CN=bob") == "BOB"
    assert mapper.name_for("O=acme,C=DE") == "O=acme,C=DE"  # DEFAULT: the subject itself
    only_cn = PrincipalMapper(r"RULE:^CN=([^,]+),.*$/node\/$1/")
    assert only_cn.name_for("CN=n1,O=x") == "node/n1"
    with pytest.raises(NoMatchingRule):
        only_cn.name_for("O=x")
    assert PrincipalMapper("").name_for("CN=x") == "CN=x"
    with pytest.raises(ValueError):
        PrincipalMapper("RULE:^CN=(.*$/$1/")  # a bad regex is a config error


def test_subject_is_rfc2253_most_specific_first():
    cert = {"subject": ((("countryName", "DE"),), (("organizationName", "Acme, Inc"),), (("commonName", "n1"),))}
    assert subject_from_peercert(cert) == r"CN=n1,O=Acme\, Inc,C=DE"
    assert subject_from_peercert(None) is None and subject_from_peercert({}) is None


def test_member_rule():
    supers = parse_principals("User:CN=node-1,OU=k;User:admin")
    assert KafkaPrincipal("User", "CN=node-1,OU=k") in supers and str(KafkaPrincipal("User", "a")) == "User:a"
    tls_admin = ConnectionSecurity.accepted("C", "SSL", principal=KafkaPrincipal("User", "admin"), tls_subject="CN=admin")
    tls_other = ConnectionSecurity.accepted("C", "SSL", principal=KafkaPrincipal("User", "x"), tls_subject="CN=x")
    no_cert = ConnectionSecurity.accepted("C", "SSL")
    plain = ConnectionSecurity.accepted("C", "PLAINTEXT")
    sasl = ConnectionSecurity.accepted("C", "SASL_SSL")
    assert is_member(tls_admin, supers) and not is_member(tls_other, supers) and not is_member(plain, supers)
    assert is_member(tls_other, frozenset()) and not is_member(no_cert, frozenset())  # any verified certificate
    assert is_member(plain, frozenset())  # an unsecured cluster admits everyone, as Kafka
    assert not is_member(sasl, frozenset())  # not logged in yet
    sasl.authenticate(KafkaPrincipal("User", "admin"))
    assert is_member(sasl, supers) and sasl.principal != ANONYMOUS


# ------------------------------------------------------------------ node config

BASE = {"node.id": 1, "process.roles": "broker,controller", "log.dirs": "/tmp/x",
        "controller.quorum.voters": "1@127.0.0.1:9093"}


def test_listener_protocols_from_the_map():
    config = load_config({**BASE, "listeners": "PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.1:9094,"
                                               "CONTROLLER://127.0.0.1:9093",
                          "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SSL,CONTROLLER:SSL",
                          "inter.broker.listener.name": "internal",
                          "ssl.keystore.location": "/k.pem",
                          "listener.name.internal.ssl.client.auth": "required"})
    assert [(l.name, l.security_protocol) for l in config.listeners] == [
        ("PLAINTEXT", "PLAINTEXT"), ("INTERNAL", "SSL"), ("CONTROLLER", "SSL")]
    assert [l.name for l in config.client_listeners] == ["PLAINTEXT", "INTERNAL"]
    assert config.inter_broker_listener.name == "INTERNAL"
    assert config.listener_setting("INTERNAL", "ssl.client.auth") == "required"
    assert config.listener_setting("CONTROLLER", "ssl.client.auth", "none") == "none"


@pytest.mark.parametrize("settings, message", [
    ({"listeners": "SSL://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"}, "SSL is SSL but has no certificate"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
      "listener.security.protocol.map": "CONTROLLER:SSL"}, "PLAINTEXT has no security protocol"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
      "listener.security.protocol.map": "PLAINTEXT:TLS,CONTROLLER:PLAINTEXT"}, "is not NAME:PROTOCOL"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
      "inter.broker.listener.name": "SSL"}, "inter.broker.listener.name: SSL is not a client listener"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
      "super.users": "admin"}, "super.users"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
      "ssl.keystore.locaton": "/k.pem"}, "unknown setting"),
])
def test_bad_security_config_is_one_line(settings, message):
    with pytest.raises(ConfigError) as e:
        load_config({**BASE, **settings})
    assert message in str(e.value) and "\n" not in str(e.value)


# ------------------------------------------------------------------ certificates

@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    folder = tmp_path_factory.mktemp("pki")
    ca = CertificateAuthority()
    other = CertificateAuthority("other CA")
    now = datetime.datetime.now(datetime.timezone.utc)
    return {
        "dir": folder,
        "ca": ca.write_truststore(str(folder / "ca.pem")),
        "ca_obj": ca,
        "server": ca.issue(str(folder / "server.pem"), "server", org_unit="eng", password="secret"),
        "client": ca.issue(str(folder / "client.pem"), "alice", org_unit="eng"),
        "expired": ca.issue(str(folder / "expired.pem"), "old", valid_from=now - datetime.timedelta(days=10),
                            valid_days=1),
        "foreign": other.issue(str(folder / "foreign.pem"), "alice", org_unit="eng"),
    }


def server_tls(pki, **kw) -> TlsContext:
    return TlsContext(TlsSettings(keystore_location=kw.pop("keystore", pki["server"].keystore), key_password="secret",
                                  truststore_location=pki["ca"], client_auth="required", **kw), server_side=True)


def client_tls(pki, issued=None) -> TlsContext:
    return TlsContext(TlsSettings(keystore_location=issued.keystore if issued else None,
                                  truststore_location=pki["ca"]), server_side=False)


def test_unusable_tls_settings_name_the_setting(pki):
    with pytest.raises(TlsConfigError, match="ssl.key.password"):
        TlsContext(TlsSettings(keystore_location=pki["server"].keystore, key_password="wrong"), server_side=True)
    with pytest.raises(TlsConfigError, match="ssl.keystore.location: /nope.pem does not exist"):
        TlsContext(TlsSettings(keystore_location="/nope.pem"), server_side=True)
    with pytest.raises(TlsConfigError, match="ssl.truststore.location"):
        TlsContext(TlsSettings(keystore_location=pki["client"].keystore, client_auth="required"), server_side=True)
    with pytest.raises(ValueError, match="ssl.enabled.protocols"):
        load_config_and_security({"ssl.enabled.protocols": "TLSv1.1"}, pki)
    with pytest.raises(ValueError, match="security.protocol"):
        ClientSecurity.from_properties({"security.protocol": "TLS"})
    with pytest.raises(ValueError, match="ssl.*security.protocol is PLAINTEXT"):
        ClientSecurity.from_properties({"ssl.ca.location": pki["ca"]})


def load_config_and_security(extra, pki):
    config = load_config({**BASE, "listeners": "SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
                          "listener.security.protocol.map": "SSL:SSL,CONTROLLER:SSL", "ssl.truststore.location": pki["ca"],
                          "ssl.keystore.location": pki["client"].keystore, **extra})
    try:
        return all_listener_security(config)
    except ConfigError as e:
        raise ValueError(str(e)) from None


def test_only_tls12_and_up(pki):
    ctx = server_tls(pki).context
    import ssl

    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2
    assert load_config_and_security({}, pki)["CONTROLLER"].server_tls.context.verify_mode == ssl.CERT_REQUIRED


async def serve_and_connect(server: TlsContext, client: TlsContext | None, *, raw: bool = False):
    """(the ConnectionSecurity the server saw or None, what the client got or its error)."""
    env = RealEnv()
    listener = ListenerSecurity("SSL", "SSL", server, None, PrincipalMapper("RULE:^CN=([^,]*),.*$/$1/"))
    seen = []

    async def handler(stream):
        seen.append(listener.accept(stream))
        await stream.send_all(b"hello")

    async with trio.open_nursery() as nursery:
        port = await nursery.start(lambda task_status: env.net.serve("127.0.0.1", 0, handler, tls=server,
                                                                     task_status=task_status))
        try:
            if raw:
                stream = await trio.open_tcp_stream("127.0.0.1", port)  # and then say nothing
            else:
                stream = await env.net.connect("127.0.0.1", port, tls=client)
            with trio.fail_after(5):
                got = await stream.receive_some(10)
            await stream.aclose()
        except (OSError, trio.BrokenResourceError) as e:
            got = e
        nursery.cancel_scope.cancel()
    return (seen[0] if seen else None), got


async def test_mtls_principal_from_the_certificate(pki):
    seen, got = await serve_and_connect(server_tls(pki), client_tls(pki, pki["client"]))
    assert got == b"hello"
    assert seen.principal == KafkaPrincipal("User", "alice") and seen.tls_subject == "CN=alice,OU=eng"


@pytest.mark.parametrize("who", ["foreign", "expired", None])
async def test_refused_client_certificates(pki, who, caplog):
    seen, got = await serve_and_connect(server_tls(pki), client_tls(pki, pki[who] if who else None))
    assert seen is None and got != b"hello"  # the handler never ran
    assert "TLS handshake from 127.0.0.1 failed" in caplog.text


async def test_server_certificate_must_be_trusted(pki):
    untrusted = TlsContext(TlsSettings(truststore_location=pki["foreign"].certificate), server_side=False)
    seen, got = await serve_and_connect(server_tls(pki), untrusted)
    assert isinstance(got, OSError) and "TLS handshake with 127.0.0.1" in str(got)


async def test_a_silent_handshake_is_cut_at_the_deadline(pki):
    start = trio.current_time()
    seen, got = await serve_and_connect(server_tls(pki, handshake_timeout=0.3), None, raw=True)
    assert seen is None and got == b"" and trio.current_time() - start < 3


async def test_certificates_reload_when_their_files_change(pki, tmp_path):
    keystore = str(tmp_path / "live.pem")
    shutil.copy(pki["server"].keystore, keystore)
    server = server_tls(pki, keystore=keystore)
    fs = RealFileSystem()
    assert not server.check_reload(fs)  # the first look records the content
    first = server.context

    def server_subject() -> str:
        async def go():
            env = RealEnv()
            async with trio.open_nursery() as nursery:
                port = await nursery.start(lambda task_status: env.net.serve(
                    "127.0.0.1", 0, lambda s: s.send_all(b"x"), tls=server, task_status=task_status))
                stream = await env.net.connect("127.0.0.1", port, tls=client_tls(pki, pki["client"]))
                cert = stream.getpeercert()
                await stream.aclose()
                nursery.cancel_scope.cancel()
            return subject_from_peercert(cert)
        return go

    assert await server_subject()() == "CN=server,OU=eng"
    with open(keystore, "w") as f:
        f.write("half-written")
    assert not server.check_reload(fs) and server.context is first  # unusable: the old one stays
    pki["ca_obj"].issue(keystore, "server-renewed", password="secret")
    assert server.check_reload(fs) and server.reloads == 1
    assert await server_subject()() == "CN=server-renewed"
    assert not server.check_reload(fs)
    os.remove(keystore)


def test_broker_only_node_reaches_tls_controllers_with_its_certificate(pki):
    config = load_config({"node.id": 4, "process.roles": "broker", "log.dirs": "/tmp/x",
                          "controller.quorum.voters": "1@127.0.0.1:9093",
                          "listeners": "SSL://127.0.0.1:0", "listener.security.protocol.map": "SSL:SSL,CONTROLLER:SSL",
                          "ssl.keystore.location": pki["client"].keystore, "ssl.truststore.location": pki["ca"]})
    security = all_listener_security(config)
    controller = security["CONTROLLER"]
    assert controller.protocol == "SSL" and controller.server_tls is None and controller.client_tls is not None
    assert config.controller_connect_listener.name == "CONTROLLER"


def test_broker_only_node_logs_in_to_sasl_controllers():
    from raftkafka.node.config import controller_login
    from wire.security.sasl_config import SaslCredentials

    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="node" password="pw";'
    settings = {"node.id": 4, "process.roles": "broker", "log.dirs": "/tmp/x",
                "controller.quorum.voters": "1@127.0.0.1:9093", "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas.replace(";", ' user_node="pw";')}
    with pytest.raises(ConfigError, match="listener.name.controller.plain.sasl.jaas.config: needs username"):
        load_config(settings)  # no login for the controllers' listener: a startup error, not a refused node
    config = load_config({**settings, "listener.name.controller.plain.sasl.jaas.config": jaas})
    assert controller_login(config) == SaslCredentials("PLAIN", "node", "pw")


def test_dev_security_modes_make_usable_settings(tmp_path):
    from raftkafka.cli.dev import node_layout
    from raftkafka.cli.dev_security import prepare_security

    assert prepare_security("plaintext", str(tmp_path), [1], "127.0.0.1") is None
    made = prepare_security("ssl", str(tmp_path / "ssl"), [1, 2], "127.0.0.1")
    assert made.client_properties["security.protocol"] == "SSL"
    assert open(made.client_properties_path).read().count("ssl.") == 3
    assert made.node_settings[2]["super.users"] == "User:node-1;User:node-2;User:admin"
    for mode in ("sasl_plaintext", "sasl_ssl"):
        made = prepare_security(mode, str(tmp_path / mode), [1, 2], "127.0.0.1")
        layout = node_layout(1, 2, 20000, str(tmp_path / mode / "node-1"), made.node_settings[1], mode.upper())
        config = load_config(layout.settings)
        listeners = all_listener_security(config)
        assert {l.sasl is not None for l in listeners.values()} == {True}
        assert listeners["CONTROLLER"].sasl.mechanisms == ("PLAIN",)
        client = ClientSecurity.from_properties(made.client_properties)
        assert client.protocol == mode.upper() and (client.tls is not None) == (mode == "sasl_ssl")
        assert client.login.username == "admin" and listeners["CONTROLLER"].sasl.plain_users["admin"] == \
            client.login.password
        assert made.bootstrap_records  # the admin's SCRAM credential
        again = prepare_security(mode, str(tmp_path / mode), [1, 2], "127.0.0.1")
        assert again.client_properties == made.client_properties  # passwords kept on restart


async def test_kafka_requests_before_sasl_login_close_the_connection():
    from broker.connection_context import set_current_security
    from broker.request_errors import CLOSE
    from broker.server import KafkaServer
    from wire.connection_limits import ConnectionLimits
    from wire.protocol import MetadataRequest, decode_request, encode_request

    class Broker:  # only what the admission check (and the server's constructor) reads
        env = None

        class config:
            super_users = frozenset()
            connection_limits = ConnectionLimits()
            listener_name = "SASL_SSL"

            @staticmethod
            def served_listeners():
                return ["SASL_SSL"]

    server = KafkaServer(Broker())
    frame = encode_request(MetadataRequest(topics=None), 1, 1, "c")[4:]
    header, request = decode_request(frame)
    set_current_security(ConnectionSecurity.accepted("SASL_SSL", "SASL_SSL"))
    assert await server.respond(frame) is CLOSE
    set_current_security(ConnectionSecurity.accepted("SSL", "SSL", tls_subject=None))
    assert server._admitted(header, request)


async def test_one_controller_connection_speaks_for_one_node():
    """A member's connection that names node 2 cannot go on to speak for node 3 (Raft or controller RPC)."""
    from metadata.controller.rpc import BrokerHeartbeatRequest
    from raft.codec import ErrorResponse
    from raft.messages import VoteRequest
    from raft.transport import Transport
    from wire.rpc import FrameDecoder, encode_frame

    inbox_send, inbox_recv = trio.open_memory_channel(10)
    handled = []

    async def client_handler(request):
        handled.append(request)
        return None

    transport = Transport(RealEnv(), node_id=1, cluster_id="c", peers={}, inbox=inbox_send,
                          client_handler=client_handler)
    async with trio.open_nursery() as nursery:
        port = await nursery.start(transport.run, "127.0.0.1", 0)
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        await stream.send_all(encode_frame(VoteRequest("c", 5, 2, 0, 0), 1)
                              + encode_frame(VoteRequest("c", 6, 3, 0, 0), 2)
                              + encode_frame(BrokerHeartbeatRequest("c", 3, 1, 0, want_fence=True), 3))
        decoder, answers = FrameDecoder(), []
        with trio.fail_after(5):
            while len(answers) < 2:
                decoder.feed(await stream.receive_some(65536))
                answers += list(decoder)
        src, first = inbox_recv.receive_nowait()
        assert (src, first.candidate_id) == (2, 2)
        with pytest.raises(trio.WouldBlock):
            inbox_recv.receive_nowait()
        assert [a.correlation_id for a in answers] == [2, 3] and all(isinstance(a.message, ErrorResponse) for a in answers)
        assert handled == []
        await stream.aclose()
        nursery.cancel_scope.cancel()
