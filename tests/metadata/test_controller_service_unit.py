"""ControllerService decisions against a scripted Raft driver: no work before the new
leader's LeaderChange is applied, speculative state visible at once but answered only at
commit, and everything speculative dropped on losing leadership."""
from __future__ import annotations

import random
import uuid
from dataclasses import dataclass

import pytest
import trio

from metadata.controller.service import ControllerService, NotControllerError
from metadata.controller.state_machine import ControllerStateMachine
from metadata.controller.topics import CreatableTopic, create_topics
from metadata.image import METADATA_VERSION
from metadata.log_format import BatchAssembler, encode_batch
from raft.driver import ProposalFailed
from raft.entry import Entry, LeaderChange, encode_leader_change
from raft.quorum_state import Role
from storage.env import RealEnv

ME = 1


@dataclass
class Status:
    role: Role
    epoch: int
    leader_id: int | None
    log_end_offset: int
    departed_leader: int | None = None


class ScriptedDriver:
    """Appends proposals to a list; the test decides when they commit or fail."""

    def __init__(self, sm: ControllerStateMachine):
        self.sm = sm
        self.role, self.epoch, self.leader = Role.FOLLOWER, 0, None
        self.log: list[Entry] = []
        self.committed = 0
        self.waiting: list[tuple[int, int, trio.Event, list]] = []
        self.snapshot_interval_bytes = 1 << 30
        self.departed: int | None = None

    def status(self):
        return Status(self.role, self.epoch, self.leader, len(self.log), self.departed)

    def elect(self, epoch: int, me: bool = True) -> None:
        self.role, self.epoch, self.leader = (Role.LEADER if me else Role.FOLLOWER), epoch, (ME if me else 2)
        if me:
            self.log.append(Entry(len(self.log), epoch, encode_leader_change(
                LeaderChange(ME, [1, 2, 3], [1, 2])), control=True))

    async def propose(self, payloads):
        if self.role is not Role.LEADER:
            raise ProposalFailed(self.leader, self.epoch, "not the leader")
        first = len(self.log)
        self.log += [Entry(first + i, self.epoch, p) for i, p in enumerate(payloads)]
        slot = [None]
        done = trio.Event()
        self.waiting.append((first, len(self.log) - 1, done, slot))
        await done.wait()
        if slot[0] is not None:
            raise slot[0]
        return first, first + len(payloads) - 1

    def commit_all(self) -> None:
        """Commit the whole log (as a majority would) and resolve every proposal."""
        if self.committed < len(self.log):
            self.sm.apply(self.log[self.committed:], len(self.log))
            self.committed = len(self.log)
        for _, _, done, _ in self.waiting:
            done.set()
        self.waiting = []

    def fail_all(self) -> None:
        for _, _, done, slot in self.waiting:
            slot[0] = ProposalFailed(None, self.epoch, "lost")
            done.set()
        self.waiting = []


@pytest.fixture
async def setup(nursery):
    sm = ControllerStateMachine()
    driver = ScriptedDriver(sm)
    service = ControllerService(RealEnv(seed=1), node_id=ME, driver=driver, state_machine=sm,
                                tick=0.01)
    await nursery.start(service.run)
    return driver, sm, service


def create(names):
    rng = random.Random(0)

    def op(image, next_offset, now):
        records, results = create_topics(image, [CreatableTopic(n, assignments={0: [ME]})
                                                 for n in names], rng=rng)
        return [records], results

    return op


async def wait_until(pred, timeout=5):
    with trio.fail_after(timeout):
        while not pred():
            await trio.sleep(0.005)


async def test_new_leader_does_nothing_until_its_leader_change_is_applied(setup):
    driver, sm, service = setup
    driver.elect(5)
    await trio.sleep(0.05)
    assert not service.active  # elected, but the LeaderChange is not committed yet
    with pytest.raises(NotControllerError):
        await service.submit("noop", lambda image, off, now: ([], None))
    driver.commit_all()
    await wait_until(lambda: service.active)
    # A fresh cluster is bootstrapped with metadata.version, answered at commit.
    await wait_until(lambda: driver.waiting)
    driver.commit_all()
    await wait_until(lambda: METADATA_VERSION in sm.image.features)
    assert sm.image.elr_enabled()  # eligible leader replicas on for new clusters (KIP-966)


async def test_speculative_state_answers_at_commit_and_reverts_on_leadership_loss(setup, nursery):
    driver, sm, service = setup
    driver.elect(1)
    driver.commit_all()
    await wait_until(lambda: service.active and driver.waiting)
    driver.commit_all()  # the bootstrap record
    await wait_until(lambda: not service._awaiting and METADATA_VERSION in sm.image.features)
    # Register broker 1 by hand so a 1-replica topic can be placed.
    from metadata.records import RegisterBroker

    def register(image, off, now):
        return [[RegisterBroker(ME, uuid.UUID(int=1), off, fenced=False)]], None

    async def submit(fn, out):
        try:
            out.append(await service.submit("op", fn))
        except NotControllerError as e:
            out.append(e)

    done: list = []
    nursery.start_soon(submit, register, done)
    await wait_until(lambda: driver.waiting)
    driver.commit_all()
    await wait_until(lambda: done)
    created: list = []
    nursery.start_soon(submit, create(["spec"]), created)
    await wait_until(lambda: service.image is not None and "spec" in service.image.topics_by_name)
    await trio.sleep(0.05)
    assert created == []  # not answered before commit
    assert "spec" not in sm.image.topics_by_name
    # A read that follows the uncommitted write waits for it too.
    read: list = []
    nursery.start_soon(submit, lambda image, off, now: ([], "topics" if image.topics_by_name else "none"), read)
    await trio.sleep(0.05)
    assert read == []
    # Leadership moves away: the proposal fails, waiting requests learn NOT_CONTROLLER.
    driver.role, driver.epoch, driver.leader = Role.FOLLOWER, 2, 2
    driver.fail_all()
    await wait_until(lambda: created and read)
    assert isinstance(created[0], NotControllerError) and created[0].leader_id == 2
    assert isinstance(read[0], NotControllerError)
    assert service.image is None and not service.active
    # Elected again later (the uncommitted entries were truncated by the other leader).
    del driver.log[sm.applied_end:]
    driver.elect(3)
    driver.commit_all()
    await wait_until(lambda: service.active)
    assert "spec" not in service.image.topics_by_name  # started over from the committed image
    again: list = []
    nursery.start_soon(submit, create(["spec"]), again)
    await wait_until(lambda: driver.waiting)
    driver.commit_all()
    await wait_until(lambda: again)
    assert again[0][0][0].error == 0 and "spec" in sm.image.topics_by_name
    assert again[0][1] == len(driver.log) - 1  # answered with the committed offset


def test_abandoned_batch_prefix_is_dropped_everywhere():
    from metadata.log_format import CommittedBatch, encode_batch
    from metadata.records import FeatureLevel
    payloads = encode_batch([FeatureLevel("a", 1), FeatureLevel("b", 1), FeatureLevel("c", 1)])
    lc = encode_leader_change(LeaderChange(2, [1, 2, 3], [2, 3]))
    entries = [Entry(0, 1, payloads[0]), Entry(1, 1, payloads[1]),  # the leader died here
               Entry(2, 2, lc, control=True),
               Entry(3, 2, encode_batch([FeatureLevel("d", 1)])[0])]
    asm = BatchAssembler()
    items = asm.feed(entries[:2]) + asm.feed(entries[2:])
    batches = [i for i in items if isinstance(i, CommittedBatch)]
    assert [[r.name for r in b.records] for b in batches] == [["d"]]
    assert asm.dropped_batches == 1


async def _started(nursery, tick: float = 0.01):
    """A running service with a 0.5 s session and a 0.1 s close grace."""
    sm = ControllerStateMachine()
    driver = ScriptedDriver(sm)
    service = ControllerService(RealEnv(seed=1), node_id=ME, driver=driver, state_machine=sm, tick=tick,
                                session_timeout=0.5, close_grace=0.1)
    await nursery.start(service.run)
    return driver, sm, service


async def _activate_after(driver, sm, service, predecessor_for: float, departed: bool):
    """Node 2 leads for `predecessor_for` seconds (a broker registered meanwhile, unfenced), then
    this node is elected: with 2 departed (its link closed, nothing since) or not."""
    from metadata.records import RegisterBroker
    driver.elect(1, me=False)
    driver.log.append(Entry(len(driver.log), 1, encode_leader_change(LeaderChange(2, [1, 2, 3], [1, 2])),
                            control=True))
    driver.log.append(Entry(len(driver.log), 1, encode_batch([RegisterBroker(2, uuid.UUID(int=2), 1,
                                                                             fenced=False)])[0]))
    driver.commit_all()
    await trio.sleep(predecessor_for)
    driver.departed = 2 if departed else None
    driver.elect(2)
    driver.commit_all()
    await wait_until(lambda: service.active)
    await wait_until(lambda: driver.waiting)
    driver.commit_all()  # the bootstrap records


@pytest.mark.parametrize("departed, predecessor_for, fenced", [
    (True, 0.6, True),  # the dead controller's broker never heartbeats: fenced after the grace
    (False, 0.6, False),  # no sign of death: a full session
    (True, 0.05, False),  # it had not been controller for a session: earlier leases may run
])
async def test_after_the_previous_controllers_death_silent_brokers_are_fenced_within_the_grace(
        nursery, departed, predecessor_for, fenced):
    driver, sm, service = await _started(nursery)
    await _activate_after(driver, sm, service, predecessor_for, departed)
    start = trio.current_time()
    with trio.move_on_after(0.3):  # within the session
        await wait_until(lambda: service.fenced_log)
    assert bool(service.fenced_log) == fenced
    if fenced:
        assert service.fenced_log[0][1] == 2 and trio.current_time() - start < 0.3


async def test_a_departed_controller_heard_from_again_leaves_the_brokers_their_sessions(nursery):
    driver, sm, service = await _started(nursery)
    await _activate_after(driver, sm, service, 0.6, departed=True)
    driver.departed = None  # something came from node 2: it lives
    await trio.sleep(0.3)
    assert service.fenced_log == []


async def test_a_grace_that_ends_between_two_ticks_fences_when_it_ends(nursery):
    driver, sm, service = await _started(nursery, tick=60.0)
    await _activate_after(driver, sm, service, 0.6, departed=True)
    await wait_until(lambda: service.fenced_log, timeout=30)  # long before the next periodic tick
    assert service.fenced_log[0][1] == 2
