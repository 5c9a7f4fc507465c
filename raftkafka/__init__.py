"""raftkafka's own code above the node layers, in three levels:

- raftkafka.client: the Kafka client library (imports only wire and the Env);
- raftkafka.node: one node's config and assembly, what `python -m raftkafka node` runs;
- raftkafka.cli and raftkafka.bench: the command line and the benchmarks, on top of everything.

tests/test_import_direction.py holds every package to that order.
"""
