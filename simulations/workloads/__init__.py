"""Client workloads that drive a simulated cluster through its real client RPCs."""
from simulations.workloads.raft_append import AppendWorkload

__all__ = ["AppendWorkload"]
