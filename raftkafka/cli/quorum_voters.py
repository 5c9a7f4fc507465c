"""`quorum --bootstrap-server H:P add-controller|remove-controller`: KIP-853 controller membership,
as kafka-metadata-quorum.

    python -m raftkafka quorum --bootstrap-server 127.0.0.1:9092 \\
        --command-config node4.properties add-controller
    python -m raftkafka quorum --bootstrap-server 127.0.0.1:9092 \\
        remove-controller --controller-id 1 --controller-directory-id <22-char directory id>

add-controller adds the controller whose node config `--command-config` names (as Kafka: its
node.id, the directory id in its metadata log dir's meta.properties, its controller listener,
advertised if advertised.listeners names it). That controller must be running and caught up
as an observer; the quorum refuses (REQUEST_TIMED_OUT) until it is, or while another change
is uncommitted. Both answer once the change is committed.
"""
from __future__ import annotations

from raftkafka.cli.common import CommandError, bootstrap_of, client_kwargs, open_admin, run_client, wait_reachable
from raftkafka.client.admin import Admin
from raftkafka.client.security import SECURITY_PROPERTIES
from raftkafka.client.operations import add_raft_voter, remove_raft_voter
from raftkafka.node.config import ConfigError, load_config, read_config_file
from storage.env import RealEnv
from storage.meta_properties import DataDirError, is_valid_uuid, read_meta_properties

__all__ = ["add_parsers", "run_add", "run_remove"]


def add_parsers(sub) -> None:
    a = sub.add_parser("add-controller", help="add the controller that --command-config describes to the quorum")
    a.add_argument("--command-config", dest="command_config", metavar="FILE",
                   help="the new controller's node config (node.id, metadata log dir, controller listener)")
    a.set_defaults(quorum_run=run_add)
    r = sub.add_parser("remove-controller", help="remove a controller from the quorum")
    r.add_argument("--controller-id", dest="controller_id", type=int, required=True, help="its node id")
    r.add_argument("--controller-directory-id", dest="controller_directory_id", required=True,
                   help="its metadata log directory id (meta.properties directory.id)")
    r.add_argument("--command-config", dest="command_config", metavar="FILE",
                   help="client properties (security.protocol, sasl.*, ssl.*)")
    r.set_defaults(quorum_run=run_remove)


def _bootstrap(args) -> str:
    if not args.bootstrap_server:
        raise CommandError(f"{args.quorum_command} needs --bootstrap-server (a broker's listener)")
    return args.bootstrap_server


def new_controller(path: str, settings: dict) -> tuple[int, str, list[tuple[str, str, int]]]:
    """(node id, directory id, [(listener, host, port)]) of the controller a node config describes."""
    config = load_config(settings)
    listener = config.controller_listener
    if "controller" not in config.roles or listener is None:
        raise ConfigError(f"{path}: not a controller (process.roles and a controller listener)")
    try:
        meta = read_meta_properties(RealEnv().fs, config.metadata_log_dir)
    except DataDirError as e:
        raise CommandError(f"{path}: {e}") from None
    if not meta.directory_id:
        raise CommandError(f"{config.metadata_log_dir}: meta.properties has no directory.id")
    adv = config.advertised(listener)
    return config.node_id, meta.directory_id, [(adv.name, adv.host, adv.port)]


def run_add(args) -> int:
    if not args.command_config:
        raise CommandError("add-controller needs --command-config: the new controller's node config")
    settings = read_config_file(args.command_config)
    node_id, directory_id, listeners = new_controller(args.command_config, settings)
    bootstrap = bootstrap_of(_ClientArgs(_bootstrap(args)))
    # Kafka reads the admin client's security from the same file: its client settings only.
    client = {k: str(v) for k, v in settings.items() if k in SECURITY_PROPERTIES}

    async def main(_) -> int:
        async with Admin(RealEnv(), bootstrap, **client_kwargs(Admin, client, "admin")) as admin:
            await wait_reachable(admin.cluster, bootstrap)
            await add_raft_voter(admin.cluster, node_id, directory_id, listeners)
        print(f"Added controller {node_id} with directory id {directory_id} and endpoints: "
              + ", ".join(f"{n}://{h}:{p}" for n, h, p in listeners))
        return 0

    return run_client(main, args)


def run_remove(args) -> int:
    args.bootstrap = _bootstrap(args)
    if not is_valid_uuid(args.controller_directory_id):
        raise CommandError(f"--controller-directory-id {args.controller_directory_id!r} is not a directory id "
                           "(22 base64url characters)")

    async def main(_) -> int:
        async with open_admin(args) as admin:
            await remove_raft_voter(admin.cluster, args.controller_id, args.controller_directory_id)
        print(f"Removed controller {args.controller_id} with directory id {args.controller_directory_id}")
        return 0

    return run_client(main, args)


class _ClientArgs:
    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap
