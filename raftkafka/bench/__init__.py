"""Micro-benchmarks, run with `python -m raftkafka.bench.<name>` (figures and commands in docs/benchmarks.md)."""
