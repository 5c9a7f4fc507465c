"""`python -m raftkafka quorum`: the metadata quorum's state, like kafka-metadata-quorum.

    python -m raftkafka quorum --bootstrap-server 127.0.0.1:9092 describe --status|--replication
    python -m raftkafka quorum describe --bootstrap-controller 127.0.0.1:9093 [--json]
    python -m raftkafka quorum --bootstrap-server 127.0.0.1:9092 add-controller|remove-controller ...
      (controller membership, KIP-853: raftkafka/cli/quorum_voters.py)

With `--bootstrap-server` a broker is asked (DescribeQuorum on the Kafka port, which it
answers from the Raft leader) and the output is kafka-metadata-quorum's: `--status` the
ClusterId/LeaderId/.../CurrentObservers lines, `--replication` one row per voter and
observer (NodeId DirectoryId LogEndOffset Lag LastFetchTimestamp LastCaughtUpTimestamp
Status). With `--bootstrap-controller` (before or after `describe`) the controllers are asked
directly: `--status` / `--replication` print the same (without the voters' endpoints, which
the controllers do not report), else the leader, its epoch, the high watermark and, for every
voter and observer, its log end offset and lag (leader's end offset minus its own). With
`--json`, one object:
{"leader_id", "leader_epoch", "high_watermark", "voters": [{"id", "directory_id", "log_end_offset", "lag",
"last_fetch_age_ms"}], "observers": [...]}.
"""
from __future__ import annotations

import json

import trio

from raft.messages import DescribeQuorumRequest, DescribeQuorumResponse
from raft.node_client import ConnectionLost, open_client
from raftkafka.cli import quorum_voters
from raftkafka.node.config import ConfigError
from storage.env import RealEnv
from wire.error_codes import ErrorCode

__all__ = ["add_parser", "run", "describe", "summarize", "QuorumCommandError"]


class QuorumCommandError(Exception):
    """An expected failure (unreachable controller, no leader): one line for the user."""


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("quorum", help="describe the metadata quorum (kafka-metadata-quorum)")
    p.add_argument("--bootstrap-server", dest="bootstrap_server", metavar="HOST:PORT",
                   help="a broker's listener: DescribeQuorum over the Kafka protocol")
    p.add_argument("--bootstrap-controller", "--bootstrap-controllers", dest="bootstrap_controller",
                   metavar="HOST:PORT", help="a controller's listener (comma-separated list allowed)")
    p.add_argument("--command-config", dest="top_command_config", metavar="FILE",
                   help="client properties (security.protocol, sasl.*, ssl.*)")
    sub = p.add_subparsers(dest="quorum_command", required=True)
    d = sub.add_parser("describe", help="leader, epoch, high watermark and replication lag")
    d.add_argument("--bootstrap-controller", "--bootstrap-controllers", dest="bootstrap", metavar="HOST:PORT",
                   help="a controller's listener (comma-separated list allowed)")
    d.add_argument("--bootstrap-server", dest="describe_bootstrap_server", metavar="HOST:PORT",
                   help="a broker's listener (as before `describe`)")
    d.add_argument("--command-config", dest="command_config", metavar="FILE",
                   help="client properties (security.protocol, ssl.ca.location, ssl.certificate.location, "
                        "sasl.mechanism, sasl.username, sasl.password, ...)")
    d.add_argument("--json", action="store_true", help="print one JSON object (--bootstrap-controller)")
    d.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for a leader (default 10)")
    d.add_argument("--status", action="store_true", help="the quorum's leader, epoch, lag and members")
    d.add_argument("--replication", action="store_true", help="one row per voter and observer")
    quorum_voters.add_parsers(sub)
    p.set_defaults(run=run)


def _addresses(text: str) -> list[tuple[str, int]]:
    out = []
    for item in [s.strip() for s in text.split(",") if s.strip()]:
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ConfigError(f"--bootstrap-controller: {item!r} is not HOST:PORT")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ConfigError("--bootstrap-controller: no address given")
    return out


async def describe(addresses: list[tuple[str, int]], timeout: float, security=None) -> DescribeQuorumResponse:
    """Ask the controllers until one answers with a leader's view, or time out; `security`
    (raftkafka.client.security.ClientSecurity) gives the TLS context and SASL login."""
    tls, login = (security.tls, security.login) if security is not None else (None, None)
    env = RealEnv()
    last_problem = "no answer"
    with trio.move_on_after(timeout):
        while True:
            for host, port in addresses:
                try:
                    async with open_client(env, host, port, connect_timeout=2.0, tls=tls, login=login) as client:
                        reply = await client.call(DescribeQuorumRequest(""), timeout=5.0)
                except (OSError, ConnectionLost, trio.TooSlowError) as e:
                    last_problem = f"cannot reach {host}:{port}: {e or type(e).__name__}"
                    continue
                if isinstance(reply, DescribeQuorumResponse) and reply.error == ErrorCode.NONE:
                    return reply
                last_problem = f"{host}:{port} answered {ErrorCode.of(getattr(reply, 'error', -1)).name}"
            await trio.sleep(0.2)
    raise QuorumCommandError(f"could not describe the quorum within {timeout:g}s ({last_problem})")


def _controller_security(args):
    """TLS and SASL for a controller listener, from --command-config."""
    from raftkafka.cli.common import read_properties
    from raftkafka.client.security import ClientSecurity

    try:
        security = ClientSecurity.from_properties(read_properties(args.command_config))
    except ValueError as e:
        raise QuorumCommandError(f"--command-config: {e}") from None
    return security


def summarize(reply: DescribeQuorumResponse) -> dict:
    leader_end = next((v.log_end_offset for v in reply.voters if v.replica_id == reply.leader_id), -1)

    def row(r) -> dict:
        lag = leader_end - r.log_end_offset if r.log_end_offset >= 0 and leader_end >= 0 else None
        return {"id": r.replica_id, "directory_id": r.directory_id, "log_end_offset": r.log_end_offset, "lag": lag,
                "last_fetch_age_ms": r.last_fetch_age_ms}

    return {
        "leader_id": reply.leader_id,
        "leader_epoch": reply.epoch,
        "high_watermark": reply.high_watermark,
        "voters": [row(r) for r in sorted(reply.voters, key=lambda r: r.replica_id)],
        "observers": [row(r) for r in sorted(reply.observers, key=lambda r: r.replica_id)],
    }


def render(summary: dict) -> str:
    lags = [v["lag"] for v in summary["voters"] if v["lag"] is not None]
    lines = [
        f"LeaderId:               {summary['leader_id']}",
        f"LeaderEpoch:            {summary['leader_epoch']}",
        f"HighWatermark:          {summary['high_watermark']}",
        f"MaxFollowerLag:         {max(lags) if lags else 'unknown'}",
        f"CurrentVoters:          [{','.join(str(v['id']) for v in summary['voters'])}]",
        f"CurrentObservers:       [{','.join(str(v['id']) for v in summary['observers'])}]",
        "",
        f"{'NodeId':<8}{'LogEndOffset':<14}{'Lag':<8}{'LastFetchAgeMs':<16}Status",
    ]
    for kind, rows in (("Voter", summary["voters"]), ("Observer", summary["observers"])):
        for r in rows:
            status = "Leader" if r["id"] == summary["leader_id"] else kind
            lag = "?" if r["lag"] is None else r["lag"]
            age = "-" if r["last_fetch_age_ms"] < 0 else r["last_fetch_age_ms"]
            lines.append(f"{r['id']:<8}{r['log_end_offset']:<14}{lag!s:<8}{age!s:<16}{status}")
    return "\n".join(lines)


def run(args) -> int:
    args.command_config = args.command_config or args.top_command_config
    if args.quorum_command != "describe":
        return args.quorum_run(args)
    args.bootstrap_server = args.bootstrap_server or args.describe_bootstrap_server
    if args.bootstrap_server:
        if args.bootstrap or args.bootstrap_controller:
            raise QuorumCommandError("give --bootstrap-server or --bootstrap-controller, not both")
        if args.status == args.replication:
            raise QuorumCommandError("describe needs exactly one of --status or --replication")
        from raftkafka.cli.quorum_kafka import describe_over_kafka

        return describe_over_kafka(args)
    bootstrap = args.bootstrap or args.bootstrap_controller
    if not bootstrap:
        raise QuorumCommandError("give --bootstrap-server (a broker) or --bootstrap-controller (a controller)")
    addresses = _addresses(bootstrap)
    reply = trio.run(describe, addresses, args.timeout, _controller_security(args))
    if args.status or args.replication:  # kafka-metadata-quorum's output, as over a broker
        from raftkafka.cli.quorum_kafka import print_kafka_format

        return print_kafka_format(args, reply)
    summary = summarize(reply)
    print(json.dumps(summary, sort_keys=True) if args.json else render(summary))
    return 0
