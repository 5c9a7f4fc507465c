"""`python -m raftkafka format`: write meta.properties and the initial voter set (like kafka-storage format).

    python -m raftkafka format --cluster-id ID --node-id 1 --log-dir DIR \\
        --initial-voters 1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095
    python -m raftkafka format --cluster-id ID --config controller.properties --standalone
    python -m raftkafka format --random-uuid      # print a new cluster id
    ... --add-scram 'SCRAM-SHA-256=[name=admin,password=admin-secret]'   # seed a SCRAM user

The voters default to the config's controller.quorum.voters. A data dir that is
already formatted, or holds anything else, is refused (`--ignore-formatted`
accepts an existing format and exits 0).
"""
from __future__ import annotations

from functools import partial

import trio

from metadata.bootstrap_records import encode_bootstrap_records
from metadata.controller.scram import credential_record
from raftkafka.node.config import (
    ConfigError, add_config_arguments, convert_setting, load_config, parse_voters, settings_from_args,
)
from raftkafka.cli.scram_args import parse_scram_args
from storage.env import RealEnv
from storage.meta_properties import MetaProperties, VoterSpec, format_data_dir, is_valid_uuid, uuid_to_str

__all__ = ["add_parser", "run"]


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("format", help="format a data directory")
    add_config_arguments(p)
    p.add_argument("--cluster-id", help="the cluster id (22-character base64url uuid, see --random-uuid)")
    p.add_argument("--initial-voters", "--initial-controllers", dest="initial_voters",
                   help="the initial voter set: id@host:port[:directory_id],...")
    p.add_argument("--standalone", "-s", action="store_true",
                   help="this controller alone is the initial voter set (grow it with `quorum add-controller`)")
    p.add_argument("--directory-id", help="this directory's uuid (random by default)")
    p.add_argument("--ignore-formatted", action="store_true", help="succeed if already formatted")
    p.add_argument("--add-scram", "-S", action="append", default=[], metavar="'MECH=[name=U,password=P]'",
                   help="a SCRAM credential the new cluster starts with (repeatable), as kafka-storage format")
    p.add_argument("--random-uuid", action="store_true", help="print a random cluster id and exit")
    p.set_defaults(run=run)


def random_uuid_text(env) -> str:
    """A new cluster or directory id. Like Kafka's Uuid.randomUuid, never one that starts with
    '-', which a command line (`--controller-directory-id`, `--cluster-id`) would take for a flag."""
    while True:
        text = uuid_to_str(env.uuid())
        if not text.startswith("-"):
            return text


def standalone_voter(values: dict, node_id: int, directory_id: str) -> VoterSpec:
    """kafka-storage format --standalone: this controller, on its controller listener, is the one voter."""
    config = load_config(values)
    listener = config.controller_listener
    if "controller" not in config.roles or listener is None:
        raise ConfigError("--standalone formats a controller: set process.roles and a controller listener")
    adv = config.advertised(listener)
    return VoterSpec(node_id, adv.host, adv.port, directory_id)


def run(args) -> int:
    env = RealEnv()
    if args.random_uuid:
        print(random_uuid_text(env))
        return 0
    values = settings_from_args(args)
    if not args.cluster_id:
        raise ConfigError("--cluster-id is required (make one with --random-uuid)")
    if not is_valid_uuid(args.cluster_id):
        raise ConfigError(f"--cluster-id {args.cluster_id!r} is not a 22-character base64url uuid")
    node_id = convert_setting("node.id", values.get("node.id"))
    log_dir = convert_setting("log.dirs", values.get("log.dirs"))[0]
    if args.standalone:
        if args.initial_voters:
            raise ConfigError("give --standalone or --initial-controllers, not both")
        directory_id = args.directory_id or random_uuid_text(env)
        voters = [standalone_voter(values, node_id, directory_id)]
    else:
        voters_text = args.initial_voters or values.get("controller.quorum.voters") or ""
        setting = "--initial-voters" if args.initial_voters else "controller.quorum.voters"
        voters = parse_voters(str(voters_text), setting)
        if not voters:
            raise ConfigError("--initial-voters is required (or --standalone, or set controller.quorum.voters)")
        directory_id = args.directory_id or next(
            (v.directory_id for v in voters if v.node_id == node_id and v.directory_id), None
        ) or random_uuid_text(env)
    meta = MetaProperties(cluster_id=args.cluster_id, node_id=node_id, directory_id=directory_id)
    records = [credential_record(a.name, a.mechanism_id, a.iterations, a.salt, a.salted_password)
               for text in args.add_scram for a in parse_scram_args(text, name_required=True)]
    wrote = trio.run(partial(format_data_dir, env.fs, log_dir, meta, voters, ignore_formatted=args.ignore_formatted,
                             bootstrap_records=encode_bootstrap_records(records) if records else b""))
    if wrote:
        print(f"Formatted {log_dir} for cluster {args.cluster_id}, node {node_id}, "
              f"voters {','.join(str(v.node_id) for v in voters)}")
    else:
        print(f"{log_dir} is already formatted; left as is")
    return 0
