"""TLS in the simulation: the handshake's decision is modelled, so the inter-node member gate
runs there as on real sockets (same certificates, same verdicts), and a seed still replays."""
from __future__ import annotations

import pytest
import trio

from raftkafka.cli.dev_certs import CertificateAuthority
from raft.messages import VoteRequest
from raft.transport import Transport
from simulations.determinism import run_deterministic
from simulations.tls_model import TlsRefused
from storage.env import RealFileSystem, TrioDeadlines
from storage.listener_security import ListenerSecurity
from storage.tls import TlsContext, TlsSettings
from tests.simulations.test_network import make_net
from wire.rpc import encode_frame
from wire.security.principal import KafkaPrincipal
from wire.security.principal_mapping import PrincipalMapper


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sim-pki")
    ca = CertificateAuthority()
    hosts = ("n1", "n2", "n3")
    return {
        "ca": ca.write_truststore(str(folder / "ca.pem")),
        **{name: ca.issue(str(folder / f"{name}.pem"), name, hosts=hosts) for name in ("node-1", "node-2", "intruder")},
        "foreign": CertificateAuthority("other").issue(str(folder / "foreign.pem"), "node-2", hosts=hosts),
    }


def contexts(pki, name):
    settings = TlsSettings(keystore_location=pki[name].keystore if name else None, truststore_location=pki["ca"],
                           client_auth="required")
    server = TlsContext(settings, server_side=True) if name else None
    return server, TlsContext(settings, server_side=False)


class _Env(TrioDeadlines):
    """What the transport uses of an Env: the host's network, its clock (request read
    deadlines), and files and sleep for the certificate watch (the certificate files are real files written by the fixture)."""

    def __init__(self, net):
        self.net, self.fs = net, RealFileSystem()

    async def sleep(self, seconds: float) -> None:
        await trio.sleep(seconds)

    def now(self) -> float:
        return trio.current_time()

def scenario(pki):
    """node-1 serves the controller listener on n1; node-2 (a member), an intruder with the
    cluster CA's certificate, a foreign CA's certificate and a plaintext client try it."""
    async def body():
        net = make_net("n1", "n2", "n3")
        server_tls, _ = contexts(pki, "node-1")
        security = ListenerSecurity("CONTROLLER", "SSL", server_tls, None, PrincipalMapper("RULE:^CN=([^,]*).*$/$1/"),
                                    frozenset({KafkaPrincipal("User", "node-2")}))
        inbox_send, inbox_recv = trio.open_memory_channel(10)
        transport = Transport(_Env(net.view("n1")), node_id=1, cluster_id="c", peers={}, inbox=inbox_send,
                              security=security)
        outcomes = {}
        async with trio.open_nursery() as nursery:
            port = await nursery.start(transport.run, "n1", 0)
            vote = encode_frame(VoteRequest("c", 9, 2, 0, 0), 1)
            for who, host in (("node-2", "n2"), ("intruder", "n3"), ("foreign", "n3"), (None, "n3")):
                try:
                    stream = await net.view(host).connect("n1", port, tls=contexts(pki, who)[1] if who else None)
                except TlsRefused:
                    outcomes[who] = "tls refused"
                    continue
                try:
                    await stream.send_all(vote)
                    await trio.sleep(0.5)
                except trio.BrokenResourceError:  # the gate closed it before our frame got there
                    pass
                outcomes[who] = "delivered" if inbox_recv.statistics().current_buffer_used else "closed"
                while inbox_recv.statistics().current_buffer_used:
                    inbox_recv.receive_nowait()
                await trio.aclose_forcefully(stream)
            nursery.cancel_scope.cancel()
        return outcomes, transport.refused, net.trace.hash

    return body


def test_the_member_gate_in_the_simulation(pki):
    outcomes, refused, trace_hash = run_deterministic(scenario(pki), seed=5)
    assert outcomes == {"node-2": "delivered", "intruder": "closed", "foreign": "tls refused", None: "tls refused"}
    assert refused == 1
    assert run_deterministic(scenario(pki), seed=5)[2] == trace_hash  # a seed replays, TLS or not
