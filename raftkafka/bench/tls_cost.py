"""The cost of TLS: records/s and broker CPU per record over SSL vs PLAINTEXT, same node, same run.

    python -m raftkafka.bench.tls_cost [--num-records 200000] [--record-size 100] [--rounds 2]

Starts one combined node (a child process) serving Kafka clients on a PLAINTEXT and an SSL
listener at once (throwaway certificates, `ssl.client.auth=none` as Kafka's default), then
for each round and protocol: librdkafka produces `--num-records` records (acks=1, one
partition) and reads them back; the node's CPU time (user+system from /proc) over each
step, divided by its records, is the broker CPU per record. Prints one table.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import replace

import trio

from raftkafka.bench import load_librdkafka
from raftkafka.bench.processes import cpu_seconds
from raftkafka.bench.raft_quorum import free_ports
from raftkafka.client import Admin, NewTopic
from raftkafka.cli.common import format_table
from raftkafka.cli.dev_certs import CertificateAuthority
from raftkafka.cli.dev import node_layout, prepare_node, voters_of
from raftkafka.cli.format_storage import random_uuid_text
from storage.env import RealEnv

HOST = "127.0.0.1"


def _start_node(folder: str) -> tuple[subprocess.Popen, int, int]:
    plain, controller, tls = free_ports(3)
    ca = CertificateAuthority()
    ca_path = ca.write_truststore(os.path.join(folder, "ca.pem"))
    node = ca.issue(os.path.join(folder, "node.pem"), "node-1")
    layout = node_layout(1, 1, plain, os.path.join(folder, "node-1"), {
        "listeners": f"PLAINTEXT://{HOST}:{plain},CONTROLLER://{HOST}:{controller},SSL://{HOST}:{tls}",
        "controller.quorum.voters": f"1@{HOST}:{controller}",
        "ssl.keystore.location": node.keystore, "ssl.truststore.location": ca_path,
    })
    layout = replace(layout, controller_port=controller)
    prepare_node(layout, voters_of([layout]), random_uuid_text(RealEnv()))
    log = open(os.path.join(folder, "node.log"), "wb")
    proc = subprocess.Popen([sys.executable, "-m", "raftkafka", "node", "--config", layout.config_path],
                            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while b"serving Kafka clients" not in open(os.path.join(folder, "node.log"), "rb").read():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("the node did not start; see " + os.path.join(folder, "node.log"))
        time.sleep(0.1)
    return proc, plain, tls


async def _create(bootstrap: str, topic: str) -> None:
    async with Admin(RealEnv(), bootstrap) as admin:
        await admin.create_topics([NewTopic(topic, 1, 1)])
        await trio.sleep(1.0)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m raftkafka.bench.tls_cost", description=__doc__.split("\n")[0])
    p.add_argument("--num-records", type=int, default=200_000)
    p.add_argument("--record-size", type=int, default=100)
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="tls-cost-") as folder:
        proc, plain, tls = _start_node(folder)
        try:
            ca = os.path.join(folder, "ca.pem")
            modes = {"PLAINTEXT": (f"{HOST}:{plain}", {}),
                     "SSL": (f"{HOST}:{tls}", {"security.protocol": "SSL", "ssl.ca.location": ca})}
            for round_ in range(1, args.rounds + 1):
                for mode, (bootstrap, props) in modes.items():
                    topic = f"tls-cost-{mode.lower()}-{round_}"
                    trio.run(_create, f"{HOST}:{plain}", topic)
                    for kind in ("produce", "consume"):
                        before = cpu_seconds(proc.pid)
                        if kind == "produce":
                            result = load_librdkafka.produce(bootstrap, topic, args.num_records, args.record_size, -1,
                                                             {"acks": "1", **props}, None)
                        else:
                            result = load_librdkafka.consume(bootstrap, topic, args.num_records, 10.0, props,
                                                             None, None)
                        cpu = cpu_seconds(proc.pid) - before
                        rows.append([round_, mode, kind, result.records, f"{result.records_per_s:,.0f}",
                                     f"{result.mb_per_s:.1f}", f"{cpu:.2f}",
                                     f"{cpu * 1e6 / max(1, result.records):.2f}", result.errors])
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
    print(format_table(["round", "protocol", "workload", "records", "records/s", "MB/s", "broker CPU s",
                        "broker CPU us/record", "errors"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
