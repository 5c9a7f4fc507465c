"""One node: its config, its assembly (storage → Raft → the controller and broker roles), its
metrics wiring and endpoint — what `python -m raftkafka node` runs.

Above broker/ and beside raftkafka.client; imports neither the CLI nor simulations. The package
imports nothing itself: a client command that reads `raftkafka.node.config` for its options does
not load the node's whole stack (import `run_node` and `ControllerNode` from
raftkafka.node.assembly).
"""
