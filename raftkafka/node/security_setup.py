"""The node's listeners' security, built from its config (one ListenerSecurity per listener).

A TLS listener gets a server context from its `ssl.*` settings (a `listener.name.<l>.`
prefix wins, as in Kafka) and a client context from the same settings for this node's own
connections to that listener on its peers (controller RPC and Raft on the controller
listener, replica fetches on the inter-broker listener), presenting the same certificate.
On a TLS controller listener the client certificate is required: it is how a peer proves
it is a cluster member (`super.users`, or any certificate the truststore's CA signed).
A SASL listener also carries its SASL server settings (mechanisms, PLAIN users, sessions).
A setting or file that cannot be used is a ConfigError (one line), never a plaintext port.
"""
from __future__ import annotations

from raftkafka.node.config import ConfigError, Listener, NodeConfig, listener_sasl
from storage.listener_security import ListenerSecurity
from storage.tls import TlsConfigError, TlsContext, tls_settings
from wire.security.connection_security import uses_tls
from wire.security.principal_mapping import PrincipalMapper

__all__ = ["listener_security", "all_listener_security"]


def listener_security(config: NodeConfig, listener: Listener, *, serve: bool = True) -> ListenerSecurity:
    def get(name: str, default: str | None = None) -> str | None:
        return config.listener_setting(listener.name, name, default)

    try:
        mapper = PrincipalMapper(get("ssl.principal.mapping.rules", "DEFAULT") or "DEFAULT")
    except ValueError as e:
        raise ConfigError(str(e)) from None
    server_tls = client_tls = None
    if uses_tls(listener.security_protocol):
        controller = listener.name in config.controller_listener_names
        forced = "required" if controller and listener.security_protocol == "SSL" else None
        try:
            if serve:
                server_tls = TlsContext(tls_settings(get, client_auth=forced), server_side=True)
            client_tls = TlsContext(tls_settings(get), server_side=False)
        except TlsConfigError as e:
            raise ConfigError(f"listener {listener.name}: {e}") from None
    return ListenerSecurity(listener.name, listener.security_protocol, server_tls, client_tls, mapper,
                            config.super_users, listener_sasl(config, listener) if serve else None)


def all_listener_security(config: NodeConfig) -> dict[str, ListenerSecurity]:
    """Every listener's, by name (built once: each holds its reloading TLS contexts); plus,
    on a node without a controller listener, the client side of the one it reaches
    controllers on."""
    out = {listener.name: listener_security(config, listener) for listener in config.listeners}
    controller = config.controller_connect_listener
    if controller.name not in out:
        if uses_tls(controller.security_protocol) and not config.listener_setting(controller.name,
                                                                                 "ssl.keystore.location"):
            raise ConfigError(f"controller.listener.names: {controller.name} is {controller.security_protocol}: "
                              f"this node needs ssl.keystore.location to prove it is a member")
        out[controller.name] = listener_security(config, controller, serve=False)
    return out
