"""Micro-benchmarks, run with `python -m raftkafka.bench.<name>` (figures go in the README)."""
