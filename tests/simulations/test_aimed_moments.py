"""Moments a run names (SimOptions.moments) instead of drawing them: the aimed strikes of the
mutation catalogue (simulations.moments.AIMED_KINDS) do what they are for, on the real nodes."""
from __future__ import annotations

from simulations.runner import SimOptions, run_simulation
from tests.simulations.catalogue import KAFKA_SESSION_RUN, ONE_ENTRY_PER_FETCH, by_name


def test_an_unknown_moment_is_refused():
    result = run_simulation(SimOptions(seed=0, duration=1.0, moments=("isr_expand", "no_such_moment")))
    assert [v["invariant"] for v in result["violations"]] == ["HarnessError"]
    assert "unknown moment 'no_such_moment'" in result["violations"][0]["message"]


def test_named_moments_are_the_only_ones_struck():
    result = run_simulation(SimOptions(seed=3, duration=10.0, moments=("isr_expand",)))
    assert result["moments"]["kinds"] == ["isr_expand"]
    assert set(result["moments"]["strikes"]) <= {"isr_expand", "isr_expand_hold", "isr_expand_bounce"}


def test_controller_restart_makes_the_restarted_leader_lead_again_until_it_is_cut_off():
    result = run_simulation(SimOptions(seed=1, duration=20.0, faults="none", moments=("controller_restart",),
                                       node_settings=KAFKA_SESSION_RUN["node_settings"]))
    assert not result["violations"]
    events = result["schedule"]["events"]
    killed = next(e for e in events if e["kind"] == "kill")
    # The other two voters are cut off from each other while it is down.
    assert sorted((e["src"], e["dst"]) for e in events if e["kind"] == "oneway" and e["at"] == killed["at"]) == \
        sorted([("n1", "n2"), ("n2", "n1")])
    # voter_link_reset strikes it only once it has led again for a broker session less the
    # voters' 2 s fetch timeout; then a successor is elected.
    reset = next(e for e in events if e["kind"] == "reset")
    assert reset["b"] == f"n{killed['node']}"
    assert reset["at"] - killed["at"] >= 9.0 - 2.0
    assert result["moments"]["strikes"]["voter_link_reset_successor"] == 1


def test_a_deposed_leader_is_fenced_and_follows_its_successor_without_losing_an_acknowledged_write():
    result = run_simulation(SimOptions(seed=1, duration=10.0, faults="none", moments=("deposed_leader",)))
    assert not result["violations"]
    cuts = [e for e in result["schedule"]["events"] if e["kind"] == "oneway"]
    assert {e["src"] for e in cuts if e["dst"] in ("n1", "n2", "n3")} == {"n4"}  # a broker, from every voter
    assert all(e["seconds"] > 3.0 for e in cuts)  # longer than the runs' broker session
    coverage = result["coverage"]
    assert result["moments"]["strikes"]["deposed_leader"] >= 1
    assert coverage["broker_session_fencing"] >= 1 and coverage["follower_truncation"] >= 1


def test_replica_removal_cuts_the_removed_follower_off_from_the_controllers_within_its_session():
    result = run_simulation(SimOptions(seed=2, duration=10.0, faults="none", moments=("replica_removal",)))
    assert not result["violations"]
    assert result["moments"]["strikes"]["replica_removal"] >= 1
    cuts = [e for e in result["schedule"]["events"] if e["kind"] == "oneway"]
    voters = {"n1", "n2", "n3"}
    followers = {e["src"] for e in cuts if e["dst"] in voters}
    assert followers and not followers & voters  # brokers, cut off from every voter both ways
    assert all(1.5 <= e["seconds"] <= 2.3 for e in cuts)  # within the runs' 3 s broker session
    # Without the bug a follower cut off before its removal committed cannot be counted in sync
    # again until it has learnt of it: the strike's second half never comes.
    assert "replica_removal_readded" not in result["moments"]["strikes"]


def test_replica_removal_shows_a_removed_follower_counted_in_sync_on_its_old_log(monkeypatch):
    mutation = by_name("replica_removal_keeps_leader_epoch")
    mutation.apply(monkeypatch)
    result = run_simulation(SimOptions(**mutation.sim_options(10)))
    assert result["moments"]["strikes"]["replica_removal_readded"] == 1
    assert "committed-record-lost" in {v["invariant"] for v in result["violations"]}


def test_figure_8_brings_back_the_old_leader_and_kills_it_as_it_applies_its_old_tail():
    result = run_simulation(SimOptions(seed=0, duration=20.0, faults="none", workload="raft", moments=("figure_8",),
                                       node_settings=ONE_ENTRY_PER_FETCH))
    assert not result["violations"]
    assert result["moments"]["strikes"] == {"figure_8": 1, "figure_8_commit": 1}
    events = result["schedule"]["events"]
    kill = next(e for e in events if e["kind"] == "kill")
    # The old leader was cut off from both other voters first, then killed as it applied.
    first_cut = [e for e in events if e["kind"] == "oneway"][:4]
    assert {e["src"] for e in first_cut} | {e["dst"] for e in first_cut} == {"n1", "n2", "n3"}
    assert all(f"n{kill['node']}" in (e["src"], e["dst"]) for e in first_cut)


def test_figure_8_shows_an_older_epoch_committed_by_counting_its_replicas(monkeypatch):
    mutation = by_name("commit_entries_of_earlier_epoch")
    mutation.apply(monkeypatch)
    result = run_simulation(SimOptions(**mutation.sim_options(26)))
    assert result["moments"]["strikes"]["figure_8_commit"] == 1
    violation = next(v for v in result["violations"] if v["invariant"] == "ConsistentCommittedData")
    assert "first committed in epoch 1" in violation["message"]


def test_log_start_divergence_lets_the_old_leader_lead_after_its_successor_moved_its_log_start():
    result = run_simulation(SimOptions(seed=0, duration=20.0, faults="none", moments=("log_start_divergence",)))
    assert not result["violations"]
    assert result["moments"]["strikes"] == {"log_start_divergence": 1, "log_start_divergence_joined": 1}
    events = result["schedule"]["events"]
    first = [e for e in events if e["kind"] == "oneway"][:10]
    old = first[0]["src"]
    # The old leader cut off from the three voters and the two other brokers, both ways.
    assert {(e["src"], e["dst"]) for e in first} == {
        pair for other in {"n1", "n2", "n3", "n4", "n5", "n6"} - {old} for pair in ((old, other), (other, old))}
    # Its successor and the other follower die together once it was counted in sync.
    kills = [e for e in events if e["kind"] == "kill"]
    assert len(kills) == 2 and old not in {f"n{e['node']}" for e in kills}
    # With the rule the old leader dropped what it held below its successor's log start.
    assert result["coverage"]["follower_restart_at_log_start"] >= 1


def test_log_start_divergence_shows_records_kept_below_the_leader_log_start(monkeypatch):
    mutation = by_name("follower_keeps_records_below_leader_log_start")
    mutation.apply(monkeypatch)
    result = run_simulation(SimOptions(**mutation.sim_options(2)))
    assert result["moments"]["strikes"]["log_start_divergence_joined"] == 1
    assert "committed-record-lost" in {v["invariant"] for v in result["violations"]}


STOP_TOGETHER = dict(duration=10.0, brokers=0, faults="none", moments=("stop_together",))


def test_stop_together_stops_every_combined_node_and_each_controlled_shutdown_completes():
    result = run_simulation(SimOptions(seed=1, **STOP_TOGETHER))
    assert result["moments"]["strikes"] == {"stop_together": 1}
    assert result["violations"] == []
    assert result["workload"]["ops"]["send_ok"] > 0
    # The nemesis restarts them only once the last is down, all three at once.
    [strike, *restarts] = result["schedule"]["events"]
    assert strike["kind"] == "stop_together" and sorted(e["node"] for e in restarts) == [1, 2, 3]
    assert len({e["at"] for e in restarts}) == 1 and restarts[0]["at"] >= strike["at"] + strike["restart_after"]


def test_stop_together_shows_a_controller_that_leaves_before_the_others_shutdowns(monkeypatch):
    by_name("controller_leaves_before_peer_shutdowns").apply(monkeypatch)
    result = run_simulation(SimOptions(seed=1, **STOP_TOGETHER))
    stalled = [v for v in result["violations"] if v["invariant"] == "ControlledShutdownStalled"]
    assert len(stalled) == 1 and "stopped with every other node" in stalled[0]["message"], result["violations"]


def test_a_stop_together_failure_replays_from_its_fault_schedule(monkeypatch):
    """The strike is a nemesis fault: it is in the schedule, and a replay (which runs no moments)
    stops the nodes together again and checks their controlled shutdowns again."""
    import json

    from simulations.fault_schedule import FaultSchedule

    by_name("controller_leaves_before_peer_shutdowns").apply(monkeypatch)
    result = run_simulation(SimOptions(seed=1, **STOP_TOGETHER))
    assert "ControlledShutdownStalled" in {v["invariant"] for v in result["violations"]}
    schedule = FaultSchedule.from_dict(json.loads(json.dumps(result["schedule"])))
    [strike] = [e for e in schedule.events if e["kind"] == "stop_together"]
    assert strike["nodes"] == [1, 2, 3] and 0.5 <= strike["restart_after"] <= 2.0
    again = run_simulation(SimOptions.replaying(schedule))
    assert again["moments"] == {}  # the schedule struck, not a moment of the replay's own
    assert [v["invariant"] for v in again["violations"]].count("ControlledShutdownStalled") == 1, again["violations"]
    monkeypatch.undo()
    assert run_simulation(SimOptions.replaying(schedule))["violations"] == []
