"""`python -m raftkafka dev --nodes 3`: a local cluster of combined nodes in child processes.

    python -m raftkafka dev --nodes 3 [--base-port 9092] [--data-dir ./raftkafka-data]

Ports are predictable: node i (from 1) serves Kafka clients on P+2(i-1) and controllers
on P+2(i-1)+1, so node 1 is 9092/9093 as in Kafka's quickstart. Each node's data lives
in D/node-i/ with its `node.toml` (absolute paths), so a node that was killed comes back
with `python -m raftkafka node --config D/node-i/node.toml`; its log goes to
D/node-i/node.log and its pid in D/node-i/pid. Directories are formatted on first use and reused afterwards.

The command prints one line per node (id, pid, both addresses), then `ready` once the
quorum has a leader and every broker is registered and unfenced. Ctrl-C or SIGTERM
stops every child with SIGTERM (their controlled shutdown), then SIGKILL after a grace
period. A child that dies is reported; the others keep running.

`node_layout`/`prepare_node` are shared with the bare command (raftkafka.cli.default).
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from functools import partial

import trio

from raftkafka.client.security import ClientSecurity
from raftkafka.cli.dev_security import SECURITY_MODES, prepare_security
from raftkafka.cli.format_storage import random_uuid_text
from raftkafka.node.config import ConfigError, controller_login, load_config
from storage.env import RealEnv
from storage.meta_properties import (
    META_PROPERTIES, MetaProperties, VoterSpec, format_data_dir, read_meta_properties,
)

__all__ = ["add_parser", "run", "NodeLayout", "node_layout", "prepare_node", "write_node_toml", "wait_ready",
           "spawn_node", "voters_of"]

HOST = "127.0.0.1"
STOP_GRACE_S = 30.0  # SIGTERM → SIGKILL


@dataclass(frozen=True)
class NodeLayout:
    node_id: int
    client_port: int
    controller_port: int
    data_dir: str  # absolute
    settings: dict  # Kafka-named settings for node.toml

    @property
    def config_path(self) -> str:
        return os.path.join(self.data_dir, "node.toml")


def node_layout(node_id: int, nodes: int, base_port: int, data_dir: str, extra: dict | None = None,
                client_listener: str = "PLAINTEXT") -> NodeLayout:
    """Node `node_id` of `nodes` combined nodes on loopback with predictable ports."""
    def ports(i: int) -> tuple[int, int]:
        return base_port + 2 * (i - 1), base_port + 2 * (i - 1) + 1

    client, controller = ports(node_id)
    if not (0 < base_port and base_port + 2 * nodes - 1 < 65536):
        raise ConfigError(f"--base-port {base_port}: ports {base_port}..{base_port + 2 * nodes - 1} are not all valid")
    voters = ",".join(f"{i}@{HOST}:{ports(i)[1]}" for i in range(1, nodes + 1))
    data_dir = os.path.abspath(data_dir)
    settings = {
        "node.id": node_id,
        "process.roles": "broker,controller",
        "log.dirs": data_dir,
        "listeners": f"{client_listener}://{HOST}:{client},CONTROLLER://{HOST}:{controller}",
        "controller.listener.names": "CONTROLLER",
        "controller.quorum.voters": voters,
        **(extra or {}),
    }
    if nodes == 1:
        # As Kafka's quickstart server.properties: internal topics fit a single node.
        settings.setdefault("offsets.topic.replication.factor", 1)
        settings.setdefault("transaction.state.log.replication.factor", 1)
    return NodeLayout(node_id, client, controller, data_dir, settings)


def write_node_toml(layout: NodeLayout) -> None:
    lines = [f"# raftkafka node {layout.node_id}: written by `python -m raftkafka dev`; start it with",
             f"#   python -m raftkafka node --config {layout.config_path}"]
    for name, value in layout.settings.items():
        rendered = str(value) if isinstance(value, int) and not isinstance(value, bool) else _toml_string(value)
        lines.append(f"{_toml_string(name)} = {rendered}")
    tmp = layout.config_path + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, layout.config_path)


def _toml_string(value) -> str:
    text = str(value).lower() if isinstance(value, bool) else str(value)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def existing_cluster_id(layouts: list[NodeLayout]) -> str | None:
    env = RealEnv()
    for layout in layouts:
        if os.path.exists(os.path.join(layout.data_dir, META_PROPERTIES)):
            return read_meta_properties(env.fs, layout.data_dir).cluster_id
    return None


def prepare_node(layout: NodeLayout, voters: list[VoterSpec], cluster_id: str, bootstrap_records: bytes = b"") -> bool:
    """Format the node's data dir unless it already is (True if formatted now); write node.toml."""
    env = RealEnv()
    formatted = False
    if not os.path.exists(os.path.join(layout.data_dir, META_PROPERTIES)):
        meta = MetaProperties(cluster_id=cluster_id, node_id=layout.node_id, directory_id=random_uuid_text(env))
        formatted = trio.run(partial(format_data_dir, env.fs, layout.data_dir, meta, voters,
                                     bootstrap_records=bootstrap_records))
    write_node_toml(layout)
    return formatted


def voters_of(layouts: list[NodeLayout]) -> list[VoterSpec]:
    return [VoterSpec(l.node_id, HOST, l.controller_port) for l in layouts]


def check_ports_free(layouts: list[NodeLayout], flag: str = "--base-port") -> None:
    for layout in layouts:
        for port in (layout.client_port, layout.controller_port):
            with socket.socket() as s:
                # As the node's listener does: TIME_WAIT leftovers of a previous run are no conflict.
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    s.bind((HOST, port))
                except OSError:
                    raise ConfigError(f"port {port} on {HOST} is in use (pick other ports with {flag})") from None


async def wait_ready(controller_ports: dict[int, int], cluster_id: str, brokers: list[int], *,
                     still_running=lambda: True, poll_s: float = 0.2, tls=None, login=None) -> None:
    """Until the quorum has an active controller and every broker is registered and unfenced.
    `tls`/`login`: the nodes' own TLS context and SASL login when the controller listener uses them."""
    # Here, not at the top: every command's parser imports this module (for `dev` and the bare command).
    from metadata.controller.client import ControllerClient, ControllerConnection, ControllerUnavailableError

    conn = ControllerConnection(RealEnv(), {i: (HOST, p) for i, p in controller_ports.items()}, cluster_id=cluster_id,
                                tls=tls, login=login)
    client = ControllerClient(conn)
    async with trio.open_nursery() as nursery:
        await nursery.start(conn.run)
        while still_running():
            try:
                view = await client.describe_cluster(timeout_s=5)
                unfenced = sorted(b.broker_id for b in view.brokers if not b.fenced)
                if unfenced == sorted(brokers):
                    break
            except ControllerUnavailableError:
                pass
            await trio.sleep(poll_s)
        nursery.cancel_scope.cancel()


# ---------------------------------------------------------------------------- the command


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("dev", help="run a local multi-node cluster in child processes")
    p.add_argument("--nodes", type=int, default=3, help="number of combined nodes (default 3)")
    p.add_argument("--base-port", type=int, default=9092, help="node i serves P+2(i-1) and P+2(i-1)+1")
    p.add_argument("--data-dir", default="raftkafka-data", help="holds node-i/ per node (default ./raftkafka-data)")
    p.add_argument("--set", metavar="NAME=VALUE", action="append", default=[],
                   help="a setting for every node (repeatable), e.g. --set num.partitions=3")
    p.add_argument("--security", choices=SECURITY_MODES, default="plaintext", type=str.lower,
                   help="client and inter-node security: ssl makes a throwaway CA, node and admin certificates; "
                        "sasl_plaintext/sasl_ssl an admin SCRAM user and a node login (sasl_ssl: TLS too); "
                        "all write <data-dir>/client.properties (default plaintext)")
    p.set_defaults(run=run)


def _extra_settings(items: list[str]) -> dict:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"--set {item!r}: expected NAME=VALUE")
        out[name.strip()] = value.strip()
    return out


def run(args) -> int:
    if not 1 <= args.nodes <= 9:
        raise ConfigError(f"--nodes {args.nodes}: choose 1 to 9")
    extra = _extra_settings(args.set)
    ids = list(range(1, args.nodes + 1))
    security = prepare_security(getattr(args, "security", "plaintext"), args.data_dir, ids, HOST)
    listener = "PLAINTEXT" if security is None else args.security.upper()
    layouts = [node_layout(i, args.nodes, args.base_port, os.path.join(args.data_dir, f"node-{i}"),
                           {**(security.node_settings[i] if security else {}), **extra}, listener) for i in ids]

    for layout in layouts:
        load_config(layout.settings)  # a bad --set stops here, naming the setting
    check_ports_free(layouts)
    cluster_id = existing_cluster_id(layouts) or random_uuid_text(RealEnv())
    voters = voters_of(layouts)
    for layout in layouts:
        prepare_node(layout, voters, cluster_id, security.bootstrap_records if security else b"")
    tls = None
    if security is not None:
        print(f"client properties: {security.client_properties_path}", flush=True)
        tls = ClientSecurity.from_properties(security.client_properties).tls
    return trio.run(_supervise, layouts, cluster_id, tls)


def spawn_node(layout: NodeLayout, *, preexec_fn=None) -> subprocess.Popen:
    """`python -m raftkafka node` for the layout, its output appended to D/node-i/node.log."""
    log = open(os.path.join(layout.data_dir, "node.log"), "ab")
    try:
        proc = subprocess.Popen([sys.executable, "-m", "raftkafka", "node", "--config", layout.config_path],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                preexec_fn=preexec_fn)
    finally:
        log.close()
    # D/node-i/pid lets scripts (and the README's quickstart) signal one node: kill -9 "$(cat ...)".
    with open(os.path.join(layout.data_dir, "pid"), "w") as f:
        f.write(f"{proc.pid}\n")
    return proc


async def _supervise(layouts: list[NodeLayout], cluster_id: str, tls=None) -> int:
    procs: dict[int, subprocess.Popen] = {}
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        try:
            for layout in layouts:
                proc = procs[layout.node_id] = spawn_node(layout)
                print(f"node {layout.node_id}  pid {proc.pid}  kafka {HOST}:{layout.client_port}  "
                      f"controller {HOST}:{layout.controller_port}  data {layout.data_dir}", flush=True)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_announce_ready, layouts, cluster_id, procs, tls)
                nursery.start_soon(_watch_children, procs)
                async for signum in signals:
                    print(f"{signal.Signals(signum).name}: stopping {len(procs)} nodes", flush=True)
                    nursery.cancel_scope.cancel()
                    break
        finally:
            with trio.CancelScope(shield=True):
                await _stop_all(procs)
    print("stopped", flush=True)
    return 0


async def _announce_ready(layouts, cluster_id, procs, tls=None) -> None:
    with trio.move_on_after(120) as scope:
        await wait_ready({l.node_id: l.controller_port for l in layouts}, cluster_id,
                         [l.node_id for l in layouts], still_running=lambda: bool(procs), tls=tls,
                         login=controller_login(load_config(layouts[0].settings)))
    if scope.cancelled_caught:
        print("not ready after 120 s; see the node.log files", flush=True)
        return
    bootstrap = ",".join(f"{HOST}:{l.client_port}" for l in layouts)
    print(f"ready  bootstrap.servers={bootstrap}", flush=True)


async def _watch_children(procs: dict[int, subprocess.Popen]) -> None:
    reported: set[int] = set()
    while True:
        for node_id, proc in sorted(procs.items()):
            code = proc.poll()
            if code is not None and node_id not in reported:
                reported.add(node_id)
                print(f"node {node_id} (pid {proc.pid}) exited with code {code}", flush=True)
        await trio.sleep(0.5)


async def _stop_all(procs: dict[int, subprocess.Popen]) -> None:
    for proc in procs.values():
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = trio.current_time() + STOP_GRACE_S
    while any(p.poll() is None for p in procs.values()) and trio.current_time() < deadline:
        await trio.sleep(0.05)
    for proc in procs.values():
        if proc.poll() is None:
            proc.kill()
            proc.wait()
