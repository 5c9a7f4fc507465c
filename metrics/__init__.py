"""What a node measures: metric primitives, the registry a node owns and the catalogue of every
metric it exports (metrics.registry), rendered in Prometheus' text format.

Below every layer and imports none of them (pure bookkeeping, no I/O): the broker takes its
instruments from the registry (broker.metrics), raftkafka.node registers the Raft, controller
and replica gauges and serves the registry over HTTP.
"""
