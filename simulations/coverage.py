"""Coverage you can read: how often each interesting state or transition happened in a run.

A checker that never sees the bad interleaving proves nothing; these counters show which
interleavings a run (and a fuzz run, summed) did reach, so a blind spot shows as a zero.
Nothing here is in node code: the counts come from what the nodes already keep and say.

- The committed metadata log (every entry some node applied, `RaftChecker.committed`),
  replayed at the end of the run as the nodes apply it, in whole batches (a batch a dead
  controller left unfinished is dropped by every node, and counted as abandoned): ISR
  expansions and shrinks committed, leader epoch bumps, unclean and ELR elections, ELR
  changes, brokers fenced and unfenced, producer-id blocks.
- Log lines of a few node loggers that mark a transition (`LOG_EVENTS`, delivered by
  simulations.node_logs.NodeLogWatch): ISR changes proposed, refused and unconfirmed, follower
  truncations, coordinator loads and unloads, Raft snapshots installed and written, metadata
  snapshots loaded, controller activations, session fencings, Raft leaderships won.
- Broker state polled every `POLL_EVERY` s (`poll`): producer-state rebuilds, log cleaning
  passes, log-start moves by retention or DeleteRecords.
- Errors the clients were answered with (the History), fenced and not-leader ones included:
  what reached the workload after our client's retries (`client_error_*`).
- Fenced and not-leader answers as the brokers gave them, polled from each broker's request
  error counter (Kafka's ErrorsPerSec), replica fetches and retried requests included, and as
  the controllers answered the brokers' RPCs (NOT_CONTROLLER, STALE_BROKER_EPOCH), polled
  from each controller's (`answered_*`): the fencing that clients and brokers handled themselves.
- The strikes simulations.moments made (`strike_<moment>`), so a moment a run never reached
  shows as a zero too.
- The faults the nemesis applied are reported beside these (`faults`), not among them.

`KEYS` lists every counter a cluster run reports, zeros included.
"""
from __future__ import annotations

import re

import trio

from raft.entry import Entry
from raft.quorum_state import Role
from metadata.log_format import BatchAssembler, CommittedBatch
from metadata.records import NO_LEADER_CHANGE
from simulations.moments import STRIKE_KINDS
from wire.error_codes import ErrorCode

__all__ = ["Coverage", "LOG_EVENTS", "INFO_LOGGERS", "KEYS", "RAFT_KEYS", "merge"]

POLL_EVERY = 0.5

# logger -> {format string: counter}. tests/simulations/test_coverage.py checks each string
# still appears in its module, so a reworded line cannot silently turn a counter into a zero.
LOG_EVENTS: dict[str, dict[str, str]] = {
    "broker.partition": {
        "%s-%d: shrinking ISR %s, out of sync %s (leo %d, hw %d)": "isr_shrink_proposed",
        "%s-%d: expanding ISR %s with %d": "isr_expand_proposed",
        "%s-%d: ISR change %s refused: %s": "isr_change_refused",
        "%s-%d: ISR change %s not confirmed: %s; waiting for metadata": "isr_change_unconfirmed",
    },
    "broker.replica_fetcher": {
        "%s-%d: truncating to %d (leo %d, hw %d) for leader %d epoch %d": "follower_truncation",
        "%s-%d: behind the leader's log start %d; starting there": "follower_restart_at_log_start",
        "%s-%d: the leader cannot vouch for our records below its log start %d; starting there":
            "follower_restart_at_log_start",
    },
    "broker.group_driver": {
        "coordinator for %s-%d (epoch %d): %d records replayed": "coordinator_load",
        "no longer coordinator for %s-%d": "coordinator_unload",
    },
    "raftkafka.raft.driver": {
        "installed snapshot %s (%d bytes) from the leader": "raft_snapshot_install",
        "snapshot %s written (%d bytes)": "raft_snapshot_written",
        "raft: %s in epoch %d, leader %s, log end %d, HW %d": "raft_role_change",
    },
    "raftkafka.metadata.controller": {
        "active controller in epoch %d from offset %d (%d brokers, %d topics)": "controller_activation",
        "fencing broker %d: %s": "broker_session_fencing",
    },
    "raftkafka.metadata.follower": {
        "metadata loaded from snapshot %s (image offset %d)": "metadata_snapshot_load",
    },
}
INFO_LOGGERS = tuple(LOG_EVENTS)
_BY_TEMPLATE = {(logger, template): key for logger, events in LOG_EVENTS.items()
                for template, key in events.items()}

FENCED_ERRORS = ("FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH", "NOT_LEADER_OR_FOLLOWER", "NOT_COORDINATOR",
                 "COORDINATOR_LOAD_IN_PROGRESS", "NOT_CONTROLLER", "STALE_BROKER_EPOCH", "NOT_ENOUGH_REPLICAS",
                 "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "OUT_OF_ORDER_SEQUENCE_NUMBER", "INVALID_PRODUCER_EPOCH",
                 "PRODUCER_FENCED", "ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID", "REBALANCE_IN_PROGRESS")

KEYS = tuple(sorted({
    *(key for events in LOG_EVENTS.values() for key in events.values()),
    "raft_leadership_won",
    "isr_expand_committed", "isr_shrink_committed", "leader_epoch_bump", "leader_election_clean",
    "leader_election_unclean", "leader_election_elr", "leader_none", "elr_change", "broker_fenced",
    "broker_unfenced", "producer_id_block", "topic_created", "topic_deleted", "metadata_batch_abandoned",
    "producer_state_rebuild", "log_cleaning", "retention_delete",
    *(f"strike_{kind}" for kind in STRIKE_KINDS),
    *(f"client_error_{name.lower()}" for name in FENCED_ERRORS),
    *(f"answered_{name.lower()}" for name in FENCED_ERRORS),
}))
# What the Raft workload (the controller quorum alone) can reach.
RAFT_KEYS = ("raft_leadership_won", "raft_role_change", "raft_snapshot_install", "raft_snapshot_written")
_ERROR_NAME = re.compile(r"\b[A-Z][A-Z_]{4,}\b")
_ERROR_NAMES = frozenset(c.name for c in ErrorCode)


def merge(total: dict[str, int], counts: dict[str, int]) -> None:
    for key, n in counts.items():
        total[key] = total.get(key, 0) + n


class Coverage:
    def __init__(self, keys: tuple[str, ...] = KEYS):
        self.counts: dict[str, int] = dict.fromkeys(keys, 0)
        self._polled: dict[tuple, int] = {}  # (node, incarnation, what[, tp]) -> last value seen

    def report(self, trace) -> dict[str, int]:
        """The counters, also written to the trace as one `coverage` event."""
        counts = dict(sorted(self.counts.items()))
        trace.record("sim", "coverage", **counts)
        return counts

    def add(self, key: str, n: int = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + n

    def strikes(self, counts: dict[str, int]) -> None:
        """What simulations.moments struck (Moments.counts)."""
        for kind, n in sorted(counts.items()):
            self.add(f"strike_{kind}", n)

    # -------------------------------------------------------------- log lines
    def log_line(self, record) -> None:
        key = _BY_TEMPLATE.get((record.name, record.msg))
        if key is None:
            return
        self.add(key)
        if key == "raft_role_change" and record.args and record.args[0] is Role.LEADER:
            self.add("raft_leadership_won")

    # ------------------------------------------------------------ broker state
    async def poll_loop(self, cluster) -> None:
        while True:
            await trio.sleep(POLL_EVERY)
            self.poll(cluster)

    def poll(self, cluster) -> None:
        for node_id in cluster.broker_ids:
            host = cluster.hosts[node_id]
            kafka = host.kafka()
            if kafka is None:
                continue
            incarnation = (node_id, host.incarnation)
            self._grow(incarnation + ("rebuilds",), kafka.producer_states.rebuilds, "producer_state_rebuild")
            self._grow_answers(incarnation + ("answered",), kafka.metrics.errors)
            manager = kafka.log_manager
            for tp, offset in list(manager._cleaner_offsets.items()):
                self._grow(incarnation + ("cleaned", tp), offset, "log_cleaning", count_steps=True)
            for tp, plog in manager.all_logs():
                self._grow(incarnation + ("start", tp), plog.log_start_offset, "retention_delete", count_steps=True)
        for node_id in cluster.voters:
            host = cluster.hosts[node_id]
            role = host.controller_role()
            if role is None or role.requests is None:
                continue
            self._grow_answers((node_id, host.incarnation, "controller_answered"), role.requests.errors)

    def _grow_answers(self, key: tuple, errors) -> None:
        """The fenced answers an error counter ({(request, error name): n}) added since the last poll."""
        for (request, error), n in errors.values().items():
            if error in FENCED_ERRORS:
                self._grow(key + (request, error), n, f"answered_{error.lower()}", first=0)

    def _grow(self, key: tuple, value: int, counter: str, *, count_steps: bool = False,
              first: int | None = None) -> None:
        """Count how far (or, with count_steps, how often) `value` grew since the last poll;
        `first`: what it was before the first poll (None: the first poll sets the baseline)."""
        last = self._polled.get(key, first)
        self._polled[key] = value
        if last is not None and value > last:
            self.add(counter, 1 if count_steps else value - last)

    # ------------------------------------------------------- committed metadata
    def committed_log(self, committed: dict[int, tuple[int, bytes, bool]]) -> None:
        # Through the nodes' own BatchAssembler: no node applies the records of an abandoned batch.
        assembler = BatchAssembler()
        partitions: dict[tuple, dict] = {}
        entries = (Entry(offset, *committed[offset]) for offset in sorted(committed))
        for item in assembler.feed(entries):
            if isinstance(item, CommittedBatch):
                for record in item.records:
                    self._record(record, partitions)
        self.add("metadata_batch_abandoned", assembler.dropped_batches)

    def _record(self, record, partitions: dict) -> None:
        kind = type(record).__name__
        if kind == "Topic":
            self.add("topic_created")
        elif kind == "RemoveTopic":
            self.add("topic_deleted")
        elif kind == "ProducerIds":
            self.add("producer_id_block")
        elif kind == "BrokerRegistrationChange" and record.fenced is not None:
            self.add("broker_fenced" if record.fenced else "broker_unfenced")
        elif kind == "Partition":
            partitions[(record.topic_id, record.partition_id)] = {
                "isr": tuple(record.isr), "elr": tuple(record.eligible_leader_replicas), "leader": record.leader}
        elif kind == "PartitionChange":
            state = partitions.setdefault((record.topic_id, record.partition_id),
                                          {"isr": (), "elr": (), "leader": -1})
            self._change(record, state)

    def _change(self, change, state: dict) -> None:
        if change.isr is not None:
            before, after = set(state["isr"]), set(change.isr)
            if after - before:
                self.add("isr_expand_committed")
            if before - after:
                self.add("isr_shrink_committed")
        if change.leader != NO_LEADER_CHANGE:
            self.add("leader_epoch_bump")
            if change.leader < 0:
                self.add("leader_none")
            elif change.leader_recovery_state == 1:
                self.add("leader_election_unclean")
            elif change.leader in state["isr"] or change.leader == state["leader"] or _joins_with_isr(change, state):
                self.add("leader_election_clean")
            elif change.leader in state["elr"]:
                self.add("leader_election_elr")
            else:
                self.add("leader_election_unclean")
            state["leader"] = change.leader
        if change.eligible_leader_replicas is not None:
            if tuple(change.eligible_leader_replicas) != state["elr"]:
                self.add("elr_change")
            state["elr"] = tuple(change.eligible_leader_replicas)
        if change.isr is not None:
            state["isr"] = tuple(change.isr)

    # --------------------------------------------------------------- clients
    def client_errors(self, ops) -> list[str]:
        """Count the error codes the clients were answered with; returns the descriptions of
        the operations answered UNKNOWN_SERVER_ERROR (each a finding)."""
        unknown = []
        for op in ops:
            if not op.error:
                continue
            for name in set(_ERROR_NAME.findall(op.error)) & _ERROR_NAMES:
                self.add(f"client_error_{name.lower()}")
                if name == "UNKNOWN_SERVER_ERROR" and not op.error.startswith("ClientClosedError"):
                    unknown.append(f"{op.process} {op.f}: {op.error}")
        return unknown


def _joins_with_isr(change, state: dict) -> bool:
    """The leader enters the ISR in this very change beside members of the ISR before it: a
    reassignment completing on the AlterPartition that added its caught-up replica, which then
    takes over from a leader the reassignment removes. (An unclean or ELR election makes its
    leader the whole ISR.)"""
    return change.isr is not None and change.leader in change.isr and bool(set(change.isr) & set(state["isr"]))
