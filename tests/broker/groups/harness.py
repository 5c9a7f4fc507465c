"""A toy driver for the coordinator core: two clocks, a log per offsets partition, answers by token."""
from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import replace

from broker.groups import GroupConfig, GroupCoordinator, Output, PendingAppend
from broker.groups.timers import Now
from wire.error_codes import ErrorCode

CONFIG = GroupConfig(num_partitions=4)
RANGE = [("range", b"range-meta")]


class Harness:
    def __init__(self, config: GroupConfig = CONFIG, *, load: bool = True):
        ids = itertools.count(1)
        self.coord = GroupCoordinator(config, new_uuid=lambda: f"u{next(ids)}")
        # Far apart, so a timestamp taken from the wrong clock shows.
        self.now = Now(monotonic_ms=1_000_000, wall_ms=1_767_225_600_000)
        self.log: dict[int, list[tuple[bytes, bytes | None]]] = defaultdict(list)
        self.answers: dict[object, list[object]] = defaultdict(list)
        self.auto_append = True
        self.held_appends: list[PendingAppend] = []
        self._tokens = itertools.count(1)
        if load:
            for p in range(config.num_partitions):
                self.coord.begin_loading(p)
                self.coord.load_partition(p, [], self.now)

    def run(self, out: Output) -> Output:
        for c in out.completions:
            self.answers[c.token].append(c.response)
        for append in out.appends:
            if self.auto_append:
                self.commit_append(append)
            else:
                self.held_appends.append(append)
        return out

    def commit_append(self, append: PendingAppend, error: ErrorCode = ErrorCode.NONE) -> None:
        if error == ErrorCode.NONE:
            self.log[append.partition].extend(append.records)
        self.run(self.coord.append_done(append.append_id, error, self.now))

    def release_appends(self, error: ErrorCode = ErrorCode.NONE) -> None:
        held, self.held_appends = self.held_appends, []
        for append in held:
            self.commit_append(append, error)

    def advance(self, ms: int) -> None:
        """Move both clocks, ticking at every deadline on the way (as a driver sleeping on them would)."""
        target = self.now.monotonic_ms + ms
        while (deadline := self.coord.next_deadline()) is not None and deadline <= target:
            self._move_to(max(self.now.monotonic_ms, deadline))
            self.run(self.coord.tick(self.now))
        self._move_to(target)

    def _move_to(self, monotonic_ms: int) -> None:
        self.now = Now(monotonic_ms, self.now.wall_ms + monotonic_ms - self.now.monotonic_ms)

    def step_wall(self, ms: int) -> None:
        """The wall clock alone jumps (NTP, an operator); the driver ticks as it would."""
        self.now = replace(self.now, wall_ms=self.now.wall_ms + ms)
        self.run(self.coord.tick(self.now))

    def token(self) -> int:
        return next(self._tokens)

    def answer(self, token):
        """The single answer to `token` so far, or None while it is held."""
        got = self.answers.get(token, [])
        assert len(got) <= 1, f"token {token} answered twice: {got}"
        return got[0] if got else None

    # ------------------------------------------------------------------ request helpers

    def join(self, group: str, member_id: str = "", *, protocols=RANGE, session=10_000, rebalance=30_000,
             instance=None, client_id="client", version_4_plus=True, protocol_type="consumer"):
        token = self.token()
        self.run(self.coord.join(token, group, member_id=member_id, protocol_type=protocol_type,
                                 protocols=protocols, session_timeout_ms=session, rebalance_timeout_ms=rebalance,
                                 group_instance_id=instance, client_id=client_id, client_host="/127.0.0.1",
                                 require_known_member_id=version_4_plus, now=self.now))
        return token

    def join_with_id(self, group: str, **kw) -> tuple[str, int]:
        """The KIP-394 dance: get an id, join with it. Returns (member_id, held join token)."""
        first = self.answer(self.join(group, **kw))
        assert first.error == ErrorCode.MEMBER_ID_REQUIRED, first
        return first.member_id, self.join(group, first.member_id, **kw)

    def sync(self, group: str, member_id: str, generation: int, assignments=(), instance=None):
        token = self.token()
        self.run(self.coord.sync(token, group, generation_id=generation, member_id=member_id,
                                 assignments=assignments, group_instance_id=instance, now=self.now))
        return token

    def heartbeat(self, group: str, member_id: str, generation: int, instance=None) -> ErrorCode:
        return self.coord.heartbeat(group, generation_id=generation, member_id=member_id,
                                    group_instance_id=instance, now=self.now).error

    def leave(self, group: str, member_id: str, instance=None):
        token = self.token()
        self.run(self.coord.leave(token, group, [(member_id, instance)], now=self.now))
        return self.answer(token)

    def commit(self, group: str, offsets, generation=-1, member_id=""):
        token = self.token()
        self.run(self.coord.commit_offsets(token, group, offsets, generation_id=generation,
                                           member_id=member_id, now=self.now))
        return token

    def fetch(self, group: str, partitions=None):
        return self.coord.fetch_offsets(group, partitions, now=self.now)

    def stable_group(self, group: str, n: int = 1, **kw) -> tuple[list[str], int]:
        """n members joined and synced; returns (member ids, generation)."""
        tokens = [self.join_with_id(group, **kw) for _ in range(n)]
        self.advance(self.coord.config.initial_rebalance_delay_ms * (n + 1) + 1)
        joined = [self.answer(t) for _, t in tokens]
        assert all(j is not None and j.error == ErrorCode.NONE for j in joined), joined
        generation = joined[0].generation_id
        leader = joined[0].leader
        members = [m for m, _ in tokens]
        syncs = [self.sync(group, m, generation, {x: f"assign-{x}".encode() for x in members} if m == leader else ())
                 for m in members]
        assert all(self.answer(s).error == ErrorCode.NONE for s in syncs)
        return members, generation
