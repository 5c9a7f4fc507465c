"""Nothing hides a bug: an exception a node's catch-all logs, or an UNKNOWN_SERVER_ERROR
answer, is a violation with its stack in the trace; what an injected fault makes happen is not.
And coverage: the counters a run reports, with the log lines they count still in the code."""
from __future__ import annotations

import errno
import importlib
import inspect
import logging
from types import SimpleNamespace

import trio

from broker.handlers import HANDLERS, Handler
from simulations.coverage import KEYS, LOG_EVENTS, Coverage
from simulations.node_logs import expected_fault
from simulations.runner import SimOptions, run_simulation
from storage.log.log_dir_failure import KafkaStorageError
from wire.protocol import ApiKey


def _host(**kw):
    return SimpleNamespace(disk_fault=False, injected_errnos=set(), **kw)


def test_a_bug_is_unexpected_a_fault_is_not():
    host = _host()
    assert not expected_fault(ValueError("bug"), host)
    assert not expected_fault(KeyError("k"), None)
    assert expected_fault(trio.BrokenResourceError(), host)
    assert expected_fault(ConnectionResetError(errno.ECONNRESET, "reset"), None)
    assert expected_fault(OSError(errno.ENETDOWN, "host down"), host)
    # A disk error counts as the fault's only on a node the nemesis gave that error.
    assert not expected_fault(OSError(errno.EIO, "eio"), host)
    assert not expected_fault(KafkaStorageError("/data", OSError(errno.EIO, "eio")), host)
    host.injected_errnos.add(errno.EIO)
    assert expected_fault(OSError(errno.EIO, "eio"), host)
    assert expected_fault(KafkaStorageError("/data", OSError(errno.EIO, "eio")), host)
    # What the catch-all sees may wrap the fault's error.
    try:
        try:
            raise trio.ClosedResourceError()
        except trio.ClosedResourceError as e:
            raise RuntimeError("while answering") from e
    except RuntimeError as wrapped:
        assert expected_fault(wrapped, _host())


def test_an_exception_a_request_handler_swallows_is_a_violation_with_its_stack(monkeypatch):
    original = HANDLERS[ApiKey.METADATA]
    calls = []

    async def buggy(broker, header, request):
        calls.append(1)
        if len(calls) == 5:  # once: the broker answers UNKNOWN_SERVER_ERROR and carries on
            raise ZeroDivisionError("the injected bug")
        return await original.handle(broker, header, request)

    monkeypatch.setitem(HANDLERS, ApiKey.METADATA, Handler(buggy, original.error))
    result = run_simulation(SimOptions(seed=3, duration=2.0, faults="none", full_trace=True))
    found = [v for v in result["violations"] if v["invariant"] == "UnexpectedError"]
    assert len(found) == 1, result["violations"]
    assert "ZeroDivisionError: the injected bug" in found[0]["message"]
    assert "test_node_logs.py" in found[0]["message"]  # where it was raised
    lines = [line for line in result["trace"].lines if " unexpected_error " in line]
    assert len(lines) == 1 and "stack=" in lines[0] and "server.py" in lines[0], lines
    # The logging of the run went back to how it was.
    assert logging.getLogger().level == logging.WARNING and logging.root.manager.disable == 0


def test_a_clean_run_reports_every_coverage_counter():
    result = run_simulation(SimOptions(seed=1, duration=4.0, faults="crash", full_trace=True))
    assert result["violations"] == [], result["violations"]
    coverage = result["coverage"]
    assert set(KEYS) <= set(coverage)  # plus any other error code the clients were answered with
    for key in ("isr_shrink_committed", "isr_expand_committed", "raft_leadership_won", "topic_created",
                "coordinator_load", "controller_activation", "producer_id_block",
                "answered_not_enough_replicas"):  # polled from the brokers' request error counters
        assert coverage[key] > 0, (key, coverage)
    assert any(line.split()[3] == "coverage" for line in result["trace"].lines[-5:])


def test_every_counted_log_line_is_still_in_its_module():
    modules = {"broker.partition": "broker.partition", "broker.replica_fetcher": "broker.replica_fetcher",
               # the group coordinator logs as broker.group_driver through its shared base class
               "broker.group_driver": "broker.coordinator_driver", "raftkafka.raft.driver": "raft.driver",
               "raftkafka.metadata.controller": "metadata.controller.service",
               "raftkafka.metadata.follower": "metadata.metadata_follower"}
    assert set(modules) == set(LOG_EVENTS)
    for logger, events in LOG_EVENTS.items():
        source = inspect.getsource(importlib.import_module(modules[logger]))
        for template in events:
            assert repr(template)[1:-1] in source or template in source, (logger, template)


def test_committed_partition_changes_are_classified():
    from metadata.records import Partition, PartitionChange, encode_record
    import uuid

    tid = uuid.UUID(int=7)
    records = [
        Partition(0, tid, (1, 2, 3), (1, 2, 3), leader=1),
        PartitionChange(0, tid, isr=(1, 2)),  # shrink
        PartitionChange(0, tid, isr=(1,), eligible_leader_replicas=(2,)),  # shrink, ELR
        PartitionChange(0, tid, leader=-1, isr=()),  # the leader went: none
        PartitionChange(0, tid, leader=2, isr=(2,), eligible_leader_replicas=()),  # from the ELR
        PartitionChange(0, tid, leader=3, leader_recovery_state=1, isr=(3,)),  # unclean
        PartitionChange(0, tid, isr=(3, 1)),  # expand
        PartitionChange(0, tid, replicas=(1, 2, 3, 4), adding_replicas=(4,), removing_replicas=(3,)),
        # 4 caught up: the reassignment completes and 4 takes over from 3, which it removes
        PartitionChange(0, tid, leader=4, isr=(1, 4), replicas=(1, 2, 4), adding_replicas=(), removing_replicas=()),
    ]
    committed = {i: (1, b"\x01" + encode_record(r), False) for i, r in enumerate(records)}
    coverage = Coverage()
    coverage.committed_log(committed)
    c = coverage.counts
    assert (c["isr_shrink_committed"], c["isr_expand_committed"]) == (5, 4)
    assert (c["leader_none"], c["leader_election_elr"], c["leader_election_unclean"]) == (1, 1, 1)
    assert c["leader_election_clean"] == 1 and c["leader_epoch_bump"] == 4 and c["elr_change"] == 2


def test_an_abandoned_metadata_batch_is_not_counted():
    """A batch a dead controller left unfinished is dropped by every node: its ISR shrink never
    happened, so the election of the broker it removed is a clean one."""
    from metadata.records import Partition, PartitionChange, encode_record
    import uuid

    tid = uuid.UUID(int=7)
    entries = [
        (1, b"\x01" + encode_record(Partition(0, tid, (1, 2, 3), (1, 2, 3), leader=1))),
        (1, b"\x00" + encode_record(PartitionChange(0, tid, isr=(1, 3)))),  # the batch goes on...
        (2, b"\x01" + encode_record(PartitionChange(0, tid, leader=2))),  # ...but the next epoch begins
    ]
    coverage = Coverage()
    coverage.committed_log({i: (epoch, payload, False) for i, (epoch, payload) in enumerate(entries)})
    c = coverage.counts
    assert c["metadata_batch_abandoned"] == 1 and c["isr_shrink_committed"] == 0
    assert (c["leader_election_clean"], c["leader_election_unclean"]) == (1, 0)


def test_every_strike_is_a_coverage_counter():
    from simulations.moments import STRIKE_KINDS

    coverage = Coverage()
    coverage.strikes({"stale_isr": 2, "voter_link_reset": 1})
    assert {f"strike_{kind}" for kind in STRIKE_KINDS} <= set(KEYS)
    assert (coverage.counts["strike_stale_isr"], coverage.counts["strike_voter_link_reset"]) == (2, 1)
    assert coverage.counts["strike_isr_expand_hold"] == 0  # reported as a zero, so a blind spot shows
