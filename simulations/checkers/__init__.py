"""Invariant checkers run during and after a simulation."""
from simulations.checkers.raft import RaftChecker, Violation

__all__ = ["RaftChecker", "Violation"]
