"""Deterministic simulation: the real node code on simulated time, network and disks, under faults.

Public surface:

    run_simulation(SimOptions(seed=7, duration=30.0, faults="all")) -> dict
        one run: seed, hash, faults, violations, sim_seconds, wall_seconds, ...
    run_deterministic(async_fn, *args, seed=...)   a trio run that is a pure function of the seed
    NondeterminismError                            raised by the sandbox inside a run
    SimNetwork / LinkProfile                       simulated hosts and stream connections
    SimEnv                                         the Env one node incarnation sees
    Trace                                          event log + rolling SHA-256 trace hash

Modules: determinism (trio scheduling + sandbox), network, env, trace, cluster
(controller quorum on SimEnvs), nemesis (fault schedule), storage_faults and replay
(where corruption lands, which requests are replayed), checkers/, workloads/, runner
(phases), node_logs (a node's logged unexpected error is a violation), coverage (what a run
reached), repro (reproduction files, --repro, --shrink). Nothing outside this package imports it, except the CLI's
`simulate` command, lazily.
"""
from simulations.determinism import NondeterminismError, run_deterministic
from simulations.env import SimEnv
from simulations.network import LinkProfile, SimNetwork
from simulations.runner import SimOptions, run_simulation
from simulations.trace import Trace

__all__ = [
    "LinkProfile",
    "NondeterminismError",
    "SimEnv",
    "SimNetwork",
    "SimOptions",
    "Trace",
    "run_deterministic",
    "run_simulation",
]
