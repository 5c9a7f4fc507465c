"""What a node measures: metric primitives, the registry a node owns and the catalogue of every
metric it exports (metrics.registry), rendered in Prometheus' text format.

Below every layer and imports none of them (pure bookkeeping, no I/O): raft, metadata and
broker take instruments from the registry, raftkafka.node wires gauges and serves it.
"""
