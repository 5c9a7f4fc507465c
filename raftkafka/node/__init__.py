"""One node: its config, its assembly (storage → Raft → the controller and broker roles), its
metrics wiring and endpoint — what `python -m raftkafka node` runs.

Above broker/ and beside raftkafka.client; imports neither the CLI nor simulations.
"""
from raftkafka.node.assembly import ControllerNode, run_node
from raftkafka.node.config import ConfigError, NodeConfig, load_config

__all__ = ["ControllerNode", "run_node", "ConfigError", "NodeConfig", "load_config"]
