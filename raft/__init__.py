"""KRaft-style Raft: a sans-IO quorum core (raft.core, with raft.log, raft.state and the
messages) driven by a trio driver (raft.driver, raft.transport).

The package imports none of them itself: importing one module (raft.config, say) loads only
what that module needs.
"""
