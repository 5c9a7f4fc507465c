"""python -m raftkafka.bench.fuzz --bootstrap H:P [--controller H:P] [--cases N] [--seed S] ...

Exit status 1 when there is a finding (printed one per line, bytes saved with --save).
"""
from __future__ import annotations

import argparse
import sys

import trio

from raftkafka.bench.fuzz.runner import FuzzConfig, replay_corpus_files, run_fuzz


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host or "127.0.0.1", int(port)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m raftkafka.bench.fuzz", description=__doc__.splitlines()[0])
    p.add_argument("--bootstrap", required=True, type=_address, help="the node's Kafka listener")
    p.add_argument("--controller", type=_address, help="the node's controller listener (fuzzes internal RPCs too)")
    p.add_argument("--cases", type=int, default=3000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--start", type=int, default=0, help="index of the first case (to replay part of a run)")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--case-timeout", type=float, default=8.0)
    p.add_argument("--rpc-share", type=float, default=0.25, help="share of internal RPC cases (with --controller)")
    p.add_argument("--cluster-id", help="name the node's own cluster in RPC seeds (reaches deeper: the "
                   "messages then act on the quorum)")
    p.add_argument("--log", action="append", default=[], help="a node log file to watch for tracebacks")
    p.add_argument("--pid", action="append", type=int, default=[], help="a node process that must stay alive")
    p.add_argument("--corpus", help="replay the regression inputs of this directory first")
    p.add_argument("--save", help="write each finding's bytes here (kafka-*.bin / rpc-*.bin)")
    p.add_argument("-v", "--verbose", action="store_true", help="print findings as they come, progress every 1000 cases")
    args = p.parse_args(argv)
    config = FuzzConfig(bootstrap=args.bootstrap, controller=args.controller, cases=args.cases, seed=args.seed, start=args.start,
                        concurrency=args.concurrency, case_timeout=args.case_timeout, rpc_share=args.rpc_share,
                        logs=tuple(args.log), pids=tuple(args.pid),
                        corpus=replay_corpus_files(args.corpus) if args.corpus else (), save_dir=args.save, verbose=args.verbose)
    if args.cluster_id:
        config.cluster_id = args.cluster_id
    report = trio.run(run_fuzz, config)
    print(report.summary())
    return 1 if report.findings else 0


if __name__ == "__main__":
    sys.exit(main())
