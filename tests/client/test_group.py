import trio

from raftkafka.client.assignors import range_assign, roundrobin_assign
from raftkafka.client.consumer import Consumer
from raftkafka.client.producer import Producer
from tests.client.memnet import MemEnv
from tests.client.mini_broker import MiniCluster
from wire.error_codes import ErrorCode
from wire.protocol import ApiKey, HeartbeatResponse


def test_range_assignor_gives_extra_partitions_to_first_members():
    plan = range_assign({"b": ["t"], "a": ["t", "u"]}, {"t": 5, "u": 2})
    assert plan == {"a": {"t": [0, 1, 2], "u": [0, 1]}, "b": {"t": [3, 4]}}


def test_roundrobin_assignor_deals_in_order_skipping_unsubscribed():
    plan = roundrobin_assign({"a": ["t", "u"], "b": ["t"], "c": ["u"]}, {"t": 3, "u": 3})
    assert plan == {"a": {"t": [0, 2], "u": [1]}, "b": {"t": [1]}, "c": {"u": [0, 2]}}
    everything = sorted((t, p) for m in plan.values() for t, ps in m.items() for p in ps)
    assert everything == [(t, p) for t in "tu" for p in range(3)]


def test_assignors_handle_no_members_and_more_members_than_partitions():
    assert range_assign({}, {"t": 3}) == {}
    assert roundrobin_assign({}, {"t": 3}) == {}
    plan = range_assign({"a": ["t"], "b": ["t"], "c": ["t"]}, {"t": 2})
    assert plan == {"a": {"t": [0]}, "b": {"t": [1]}, "c": {}}


async def start(nursery, nodes=(1, 2)):
    env = MemEnv()
    mini = MiniCluster(env, nodes)
    await mini.serve_all(nursery)
    return env, mini


async def test_single_member_gets_everything_and_commits(nursery, autojump_clock):
    env, mini = await start(nursery)
    mini.create_topic("t", 3)
    async with Producer(env, "b1:9092") as producer:
        for i in range(9):
            await producer.send("t", b"%d" % i, partition=i % 3)
    assigned = []
    async with Consumer(env, "b1:9092", group_id="g", auto_offset_reset="earliest",
                        heartbeat_interval_ms=100) as consumer:
        consumer.subscribe(["t"], on_assign=assigned.append)
        records = []
        with trio.fail_after(10):
            while len(records) < 9:
                records += await consumer.poll(0.5)
    assert assigned == [[("t", 0), ("t", 1), ("t", 2)]]
    assert sorted(r.value for r in records) == [b"%d" % i for i in range(9)]
    # close() auto-committed and left the group
    assert mini.groups.offsets["g"] == {("t", p): (3, "") for p in range(3)}
    assert mini.groups.groups["g"].state == "Empty"
    joins = [r for r in mini.requests if r[1] == ApiKey.JOIN_GROUP]
    assert len(joins) == 2  # MEMBER_ID_REQUIRED, then the real join


async def test_two_members_split_partitions_and_rebalance_when_one_leaves(nursery, autojump_clock):
    env, mini = await start(nursery)
    mini.create_topic("t", 4)
    async with Producer(env, "b1:9092") as producer:
        for i in range(40):
            await producer.send("t", b"%d" % i, partition=i % 4)
    seen: dict[str, list] = {"A": [], "B": []}
    assignments: dict[str, list] = {"A": [], "B": []}
    b_done = trio.Event()

    async def member(name, count_before_leaving=None):
        async with Consumer(env, "b1:9092", group_id="g", auto_offset_reset="earliest",
                            heartbeat_interval_ms=100, max_poll_records=2) as consumer:
            consumer.subscribe(["t"], on_assign=assignments[name].append)
            with trio.fail_after(30):
                while True:
                    seen[name] += [(r.partition, r.offset) for r in await consumer.poll(0.2)]
                    if name == "B" and len(assignments["B"]) and len(seen["B"]) >= 4:
                        break
                    if name == "A" and b_done.is_set() and len(set(seen["A"]) | set(seen["B"])) == 40:
                        break
        if name == "B":
            b_done.set()

    async with trio.open_nursery() as n:
        n.start_soon(member, "A")
        n.start_soon(member, "B")
    # Both were members at the same time with disjoint halves, then A took everything.
    assert any(len(a) == 2 for a in assignments["A"])
    assert len(assignments["B"][0]) == 2
    assert assignments["A"][-1] == [("t", p) for p in range(4)]
    assert len(set(seen["A"]) | set(seen["B"])) == 40


async def test_stale_heartbeat_answer_during_a_rejoin_neither_rejoins_again_nor_spins_poll(nursery, autojump_clock):
    # Seed 115 of the simulation: a heartbeat sent for generation 1 was answered
    # REBALANCE_IN_PROGRESS while the consumer was already re-joining for another reason (its
    # JoinGroup pipelined behind the heartbeat on the coordinator connection).
    # Acting on that answer flagged a rejoin which the join in progress then cleared
    # (needs_join = False) while the "rejoin wanted" flag stayed set: every fetch round
    # skipped its wait, so poll spun at one instant and simulated time stood still.
    env, mini = await start(nursery, nodes=(1,))
    mini.create_topic("t", 1)
    groups = mini.groups
    heartbeat_parked, release_heartbeat = trio.Event(), trio.Event()
    real_heartbeat, real_join = groups.on_heartbeat, groups.on_join_group

    async def parked_heartbeat(node, req, v):
        if not release_heartbeat.is_set():
            heartbeat_parked.set()
            await release_heartbeat.wait()
            return HeartbeatResponse(throttle_time_ms=0, error_code=ErrorCode.REBALANCE_IN_PROGRESS)
        return await real_heartbeat(node, req, v)

    async def join_after_the_stale_answer(node, req, v):
        if heartbeat_parked.is_set() and not release_heartbeat.is_set():
            release_heartbeat.set()
            await trio.sleep(0.05)  # the stale heartbeat answer reaches the client mid-join
        return await real_join(node, req, v)

    async with Consumer(env, "b1:9092", group_id="g", auto_offset_reset="earliest",
                        heartbeat_interval_ms=100, enable_auto_commit=False) as consumer:
        consumer.subscribe(["t"])
        with trio.fail_after(5):
            while not consumer.assignment():
                await consumer.poll(0.1)
        groups.on_heartbeat, groups.on_join_group = parked_heartbeat, join_after_the_stale_answer
        await heartbeat_parked.wait()
        consumer.subscribe(["t"])  # re-subscribing re-joins while that heartbeat is out
        rounds = 0
        real_round = consumer._fetch_round

        async def counted_round(max_wait):
            nonlocal rounds
            rounds += 1
            if rounds > 1000:  # a spin never lets the mock clock move, so fail_after could not fire
                raise AssertionError("poll spins: its fetch rounds do not wait")
            await real_round(max_wait)

        consumer._fetch_round = counted_round
        joins_before = sum(1 for r in mini.requests if r[1] == ApiKey.JOIN_GROUP)
        for _ in range(5):
            await consumer.poll(0.2)
        assert release_heartbeat.is_set()
        assert consumer.assignment() == {("t", 0)}
        assert not consumer.group.needs_join
        # One join for the re-subscribe; the stale answer asked for no second one.
        assert sum(1 for r in mini.requests if r[1] == ApiKey.JOIN_GROUP) - joins_before == 1
        assert rounds < 100
