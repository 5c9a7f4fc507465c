"""The client-speed targets of docs/client-speed.md in one run, side by side with librdkafka.

    python -m raftkafka.bench.speed_table [--records 500000] [--lines 2000000]
                                          [--bootstrap-server H:P]   # default: starts its own node

Starts one node (`python -m raftkafka`, a fresh data directory, free ports below the
ephemeral range) unless given a bootstrap server, and runs each target as the user would, a
command per row in its own process: `bench produce` and `bench consume` with librdkafka
and with our client (100-byte records, one partition; librdkafka produces before and after
ours, and ours is compared with the mean of its two rates), then the console producer on a file
of 100-byte lines and the console consumer to /dev/null. It prints the table in Markdown:
records/s of each, the CPU each process spent per record (user + sys from the kernel,
less the command's start, measured by running `bench --help`), the node's CPU per record
(from /proc), and the machine's load average, since the figures move with it.

Wall-clock rates depend on what else the machine runs; CPU per record hardly does. The
whole run takes 1-3 minutes.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from raftkafka.bench.processes import cpu_seconds, ports_free
from raftkafka.bench.raft_quorum import free_ports

__all__ = ["main"]

_RECORD_SIZE = 100
_TARGET_RATIO = 0.5  # ours >= 50 % of librdkafka's records/s
_CONSOLE_TARGET = 300_000  # lines/s


@dataclass
class Run:
    """One command: its rate and the CPU of its process and of the node."""
    rate: float  # records (lines) per second
    cpu_s: float  # user + sys of the command, less its start
    node_cpu_s: float
    count: int

    def cpu_us(self) -> float:
        return self.cpu_s / self.count * 1e6

    def node_us(self) -> float:
        return self.node_cpu_s / self.count * 1e6


class Bench:
    def __init__(self, bootstrap: str, node_pid: int | None, workdir: str):
        self.bootstrap = bootstrap
        self.node_pid = node_pid
        self.workdir = workdir
        self.start_cpu_s = 0.0

    def node_cpu(self) -> float:
        if self.node_pid is None:
            return 0.0
        return cpu_seconds(self.node_pid)

    def run(self, args: list[str], stdin=None, stdout=subprocess.PIPE) -> tuple[str, float, float, float]:
        """Run `python -m raftkafka ARGS`: (its stdout, wall seconds, CPU seconds, node CPU seconds).
        The process is reaped here (wait4) for its own rusage."""
        node_before, started = self.node_cpu(), time.perf_counter()
        process = subprocess.Popen([sys.executable, "-m", "raftkafka", *args], stdin=stdin, stdout=stdout,
                                   stderr=subprocess.PIPE)
        out = process.stdout.read().decode() if stdout is subprocess.PIPE else ""
        err = process.stderr.read().decode()
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - started
        if process.returncode != 0:
            raise RuntimeError(f"`raftkafka {' '.join(args)}` failed: {err.strip()[-500:]}")
        return out, wall, usage.ru_utime + usage.ru_stime, self.node_cpu() - node_before

    def measure_start(self) -> None:
        """The CPU of a command's start (imports, the parser): subtracted from every run."""
        self.start_cpu_s = self.run(["bench", "--help"])[2]

    def topic(self, name: str) -> str:
        name = f"{name}-{os.getpid()}"  # fresh on a cluster given by --bootstrap-server too
        self.run(["topics", "--bootstrap-server", self.bootstrap, "--create", "--topic", name,
                  "--partitions", "1"])
        return name

    def bench(self, workload: str, client: str, topic: str, count: int, props: list[str] = ()) -> Run:
        args = ["bench", workload, "--client", client, "--topic", topic, "--bootstrap-server", self.bootstrap,
                "--json", "--reporting-interval", "0"]
        if workload == "produce":
            args += ["--num-records", str(count), "--record-size", str(_RECORD_SIZE)]
            if props:
                args += ["--producer-props", *props]
        else:
            args += ["--messages", str(count)]
            if props:
                args += ["--consumer-props", *props]
        out, _, cpu, node = self.run(args)
        result = json.loads(out.strip().splitlines()[-1])
        return Run(result["records_per_s"], max(0.0, cpu - self.start_cpu_s), node, result["records"])

    def console(self, args: list[str], count: int, stdin_path: str | None = None) -> Run:
        """A console command; its rate counts the whole command, start included."""
        with open(stdin_path or os.devnull, "rb") as stdin, open(os.devnull, "wb") as sink:
            _, wall, cpu, node = self.run(args, stdin=stdin, stdout=sink)
        return Run(count / wall, max(0.0, cpu - self.start_cpu_s), node, count)


def _count(value: float) -> str:
    return f"{value:,.0f}".replace(",", " ")


def _rate(run: Run) -> str:
    return f"{_count(run.rate)}/s; {run.cpu_us():.2f} µs CPU, node {run.node_us():.2f} µs per record"


def _met(ok: bool) -> str:
    return "yes" if ok else "no"


def table(bench: Bench, records: int, lines: int) -> str:
    b = bench.bootstrap
    theirs_topic, ours_topic, big_topic = bench.topic("speed-librdkafka"), bench.topic("speed-ours"), \
        bench.topic("speed-ours-1mb")
    rows = []
    theirs = bench.bench("produce", "librdkafka", theirs_topic, records * 2)
    ours = bench.bench("produce", "ours", ours_topic, records)
    ours_big = bench.bench("produce", "ours", big_topic, records, ["batch.size=1000000"])
    theirs_again = bench.bench("produce", "librdkafka", theirs_topic, records * 2)
    reference = (theirs.rate + theirs_again.rate) / 2  # librdkafka's runs bracket ours
    for label, run in (("defaults", ours), ("ours with batch.size=1000000 (librdkafka's default)", ours_big)):
        ratio = run.rate / reference
        rows.append((f"`bench produce --client ours`, {label}", _rate(run),
                     f"{_rate(theirs)}; again {_count(theirs_again.rate)}/s",
                     f"{ratio:.0%}", _met(ratio >= _TARGET_RATIO)))
    # Not a target: the same settings on both sides. Ours is idempotent by default, as Kafka's
    # Java producer; librdkafka's idempotent producer keeps one request of a partition in flight.
    theirs_idempotent = bench.bench("produce", "librdkafka", bench.topic("speed-librdkafka-idempotent"), records,
                                    ["batch.size=16384", "enable.idempotence=true"])
    rows.append(("same settings on both sides, not a target: idempotent, batch.size 16 384 (ours: defaults; "
                 "librdkafka: `enable.idempotence=true batch.size=16384`)", f"{_count(ours.rate)}/s (above)",
                 _rate(theirs_idempotent), f"{ours.rate / theirs_idempotent.rate:.0%}", "-"))
    theirs_read = bench.bench("consume", "librdkafka", theirs_topic, records * 2)
    ours_read = bench.bench("consume", "ours", theirs_topic, records * 2)
    ratio = ours_read.rate / theirs_read.rate
    rows.append(("`bench consume --client ours`, defaults", _rate(ours_read), _rate(theirs_read),
                 f"{ratio:.0%}", _met(ratio >= _TARGET_RATIO)))

    path = os.path.join(bench.workdir, "lines.txt")
    with open(path, "wb") as f:
        f.writelines(b"%08d%s\n" % (i, b"x" * (_RECORD_SIZE - 8)) for i in range(lines))
    lines_topic = bench.topic("speed-lines")
    produced = bench.console(["produce", "--bootstrap-server", b, "--topic", lines_topic], lines, path)
    consumed = bench.console(["consume", "--bootstrap-server", b, "--topic", lines_topic, "--from-beginning",
                              "--max-messages", str(lines)], lines)
    for label, run in (("console `produce < lines.txt`", produced),
                       ("console `consume --max-messages N > /dev/null`", consumed)):
        rows.append((f"{label}, {_count(lines)} lines, whole command", _rate(run), "-",
                     "-", _met(run.rate >= _CONSOLE_TARGET)))
    header = ("| target | ours | librdkafka, same run | ratio | met? |\n"
              "|---|---|---|---|---|\n")
    return header + "".join(f"| {' | '.join(row)} |\n" for row in rows)


class _Node:
    """`python -m raftkafka` on free ports with a fresh data directory, for the run."""

    def __init__(self, workdir: str):
        while True:
            port = free_ports(1)[0]
            if port + 1 < 32768 and ports_free([port + 1]):
                break
        self.port = port
        self.log = open(os.path.join(workdir, "node.log"), "wb")
        self.process = subprocess.Popen([sys.executable, "-m", "raftkafka", "--base-port", str(port),
                                         "--data-dir", os.path.join(workdir, "node")],
                                        stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"the node did not start (see {self.log.name})") from None
                time.sleep(0.2)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m raftkafka.bench.speed_table", description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=500_000,
                        help="records per run of our client (librdkafka's produce runs send twice as many)")
    parser.add_argument("--lines", type=int, default=2_000_000, help="lines for the console tools")
    parser.add_argument("--bootstrap-server", help="use this cluster instead of starting a node "
                                                   "(the node CPU column is then 0)")
    args = parser.parse_args(argv)
    if args.records < 1 or args.lines < 1:
        parser.error("--records and --lines must be at least 1")
    workdir = tempfile.mkdtemp(prefix="speed-table-")
    node = None
    try:
        if args.bootstrap_server:
            bench = Bench(args.bootstrap_server, None, workdir)
        else:
            node = _Node(workdir)
            bench = Bench(f"127.0.0.1:{node.port}", node.process.pid, workdir)
        bench.measure_start()
        started, load = time.perf_counter(), os.getloadavg()
        text = table(bench, args.records, args.lines)
        load_after = os.getloadavg()
        print(text, end="")
        print(f"\nLoad average {load[0]:.1f} before, {load_after[0]:.1f} after; {time.perf_counter() - started:.0f} s; "
              f"CPU per record less the command's start ({bench.start_cpu_s:.2f} s); "
              f"{_RECORD_SIZE}-byte records, one partition, one node.")
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    finally:
        if node is not None:
            node.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
