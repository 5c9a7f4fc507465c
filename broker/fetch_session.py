"""Fetch sessions (KIP-227), the broker side: repeated fetches carry and answer only changes.

A fetcher that asks for the same partitions over and over (a follower with
thousands of them, a consumer) opens a session with a full request (session
id 0, epoch 0). We remember its partitions — what it asked (fetch offset, max
bytes, leader epoch) and what we last told it (high watermark, last stable
offset, log start offset) — and answer with a session id. Its next requests
are incremental (that id, the next epoch): they list only partitions added or
changed, plus `forgotten_topics_data` for the ones to drop, and our answers
list only partitions with something new: records, a moved high watermark /
LSO / log start, or an error. A partition with records is always included, so
a session never hides data.

Request kinds, by (session_id, session_epoch):

    (0, -1)  sessionless full fetch (Fetch v < 7 always is one)
    (0,  0)  full fetch that opens a new session (if the cache has room)
    (X,  0)  full fetch that closes session X and opens a new one
    (X, -1)  closes session X; answered as a sessionless full fetch
    (X,  N)  incremental: N must be X's current epoch, else INVALID_FETCH_SESSION_EPOCH;
             an unknown X is FETCH_SESSION_ID_NOT_FOUND

From Fetch v13 on topics are named by id: a session opened by such a request keys its
partitions by (topic id, partition), one opened by an older request by (topic name,
partition), and an incremental request of the other kind is refused with
FETCH_SESSION_TOPIC_ID_ERROR, as in Kafka. An id that names no topic stays in the session
and is answered UNKNOWN_TOPIC_ID (by the handler) until it is forgotten.

The cache holds `max.incremental.fetch.session.cache.slots` sessions. When it
is full a newcomer may evict, as in Kafka's FetchSessionCache: first a session
unused for `eviction_ms`, else the least valuable one — (privileged, size, id)
ordered, followers being privileged over consumers — if the newcomer is worth
at least as much; a non-privileged newcomer may only evict sessions older than
`eviction_ms`. Followers' sessions thus survive a storm of consumer sessions.

Sans-IO: the handler reads the partitions a context names and hands the
answer back to `context.respond`; time comes in as milliseconds.
"""
from __future__ import annotations

import uuid
from random import Random
from typing import Iterable, Union

from wire.error_codes import ErrorCode
from wire.protocol import FetchResponse

__all__ = [
    "FetchSessionCache", "FetchSession", "CachedPartition", "FetchContext", "next_epoch",
    "INVALID_SESSION_ID", "INITIAL_EPOCH", "FINAL_EPOCH", "SESSION_VERSION", "TOPIC_ID_VERSION", "topic_key",
]

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
SESSION_VERSION = 7  # Fetch versions from 7 on carry session fields
TOPIC_ID_VERSION = 13  # Fetch versions from 13 on name topics by id
MAX_SESSION_ID = (1 << 31) - 1
TopicKey = Union[str, uuid.UUID]  # a topic's name, or its id (v13+)
Key = tuple[TopicKey, int]


def topic_key(topic, by_id: bool) -> TopicKey:
    """How a request or response topic (or forgotten topic) is named at its version."""
    return topic.topic_id if by_id else topic.topic


def next_epoch(epoch: int) -> int:
    """The epoch after `epoch`; it wraps to 1 (0 always means "open a session")."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == MAX_SESSION_ID else epoch + 1


class CachedPartition:
    """One partition of a session: the fetcher's last request for it and what we last answered.

    Its attribute names match FetchRequest.FetchPartition, so the handler reads either."""

    __slots__ = ("topic", "partition", "current_leader_epoch", "fetch_offset", "last_fetched_epoch",
                 "log_start_offset", "partition_max_bytes", "high_watermark", "last_stable_offset", "leader_log_start_offset",
                 "served")

    def __init__(self, topic: TopicKey, requested):
        self.topic = topic
        self.partition = requested.partition
        self.update(requested)
        self.high_watermark = -1  # nothing answered yet: the first answer always includes it
        self.last_stable_offset = -1
        self.leader_log_start_offset = -1
        # The fetch handler's note of what it last read here (opaque to the session): lets an
        # incremental fetch skip re-reading a partition where nothing happened.
        self.served = None

    def update(self, requested) -> None:
        self.current_leader_epoch = requested.current_leader_epoch
        self.fetch_offset = requested.fetch_offset
        self.last_fetched_epoch = requested.last_fetched_epoch
        self.log_start_offset = requested.log_start_offset
        self.partition_max_bytes = requested.partition_max_bytes

    def answered(self, pd: FetchResponse.PartitionData) -> bool:
        """Record what `pd` tells the fetcher; whether it must be in an incremental answer."""
        changed = (len(pd.records or b"") > 0 or pd.error_code != ErrorCode.NONE
                   or pd.diverging_epoch.end_offset >= 0
                   or pd.high_watermark != self.high_watermark
                   or pd.last_stable_offset != self.last_stable_offset
                   or pd.log_start_offset != self.leader_log_start_offset)
        # After an error, forget what we sent: the partition is answered again once it clears.
        self.high_watermark = -1 if pd.error_code != ErrorCode.NONE else pd.high_watermark
        self.last_stable_offset = pd.last_stable_offset
        self.leader_log_start_offset = pd.log_start_offset
        return changed


class FetchSession:
    __slots__ = ("id", "privileged", "uses_topic_ids", "partitions", "epoch", "created_ms", "last_used_ms")

    def __init__(self, session_id: int, privileged: bool, partitions: dict[Key, CachedPartition], now_ms: int,
                 uses_topic_ids: bool = False):
        self.id = session_id
        self.privileged = privileged
        self.uses_topic_ids = uses_topic_ids  # partitions keyed by topic id (opened by Fetch v13+)
        # Insertion order is answer order; answered partitions move to the end (round robin,
        # so a full response does not always starve the same partitions).
        self.partitions = partitions
        self.epoch = next_epoch(INITIAL_EPOCH)
        self.created_ms = now_ms
        self.last_used_ms = now_ms

    @property
    def size(self) -> int:
        return len(self.partitions)

    def eviction_key(self) -> tuple[bool, int, int]:
        return self.privileged, self.size, self.id

    def apply(self, request) -> None:
        """An incremental request: add or update the partitions it names, drop the forgotten."""
        by_id = self.uses_topic_ids
        for topic in request.topics:
            name = topic_key(topic, by_id)
            for p in topic.partitions:
                cached = self.partitions.get((name, p.partition))
                if cached is None:
                    self.partitions[(name, p.partition)] = CachedPartition(name, p)
                else:
                    cached.update(p)
        for forgotten in request.forgotten_topics_data or ():
            name = topic_key(forgotten, by_id)
            for index in forgotten.partitions:
                self.partitions.pop((name, index), None)


class FetchContext:
    """What one Fetch request reads (`topics`) and how its answer is shaped (`respond`).

    `error` set: answer at once with that top-level error and no partitions."""

    def __init__(self, topics: list, *, error: int = ErrorCode.NONE, session: FetchSession | None = None,
                 cache: "FetchSessionCache | None" = None, privileged: bool = False, by_id: bool = False):
        # [(topic name, or id when by_id, [items with partition/fetch_offset/... attributes])]
        self.topics = topics
        self.by_id = by_id
        self.error = error
        self.session = session  # the incremental session, if any
        self._cache = cache  # set for a full fetch that may open a session
        self._privileged = privileged

    @property
    def incremental(self) -> bool:
        return self.session is not None

    def respond(self, responses: list, now_ms: int) -> tuple[int, list]:
        """(session id, the topics to send) for the answer read from `self.topics`."""
        if self.session is not None:
            return self.session.id, _changed_only(self.session, responses)
        if self._cache is not None:
            partitions = {}
            for (name, items), topic in zip(self.topics, responses):
                for item, pd in zip(items, topic.partitions):
                    cached = CachedPartition(name, item)
                    cached.answered(pd)
                    partitions[(name, item.partition)] = cached
            return self._cache.maybe_create(now_ms, self._privileged, partitions, self.by_id), responses
        return INVALID_SESSION_ID, responses


def _changed_only(session: FetchSession, responses: list) -> list:
    out = []
    moved = []
    for topic in responses:
        kept = []
        name = topic_key(topic, session.uses_topic_ids)
        for pd in topic.partitions:
            key = (name, pd.partition_index)
            cached = session.partitions.get(key)
            if cached is None or cached.answered(pd):  # (None: forgotten meanwhile; say it anyway)
                kept.append(pd)
                moved.append(key)
        if kept:
            out.append(FetchResponse.FetchableTopicResponse(topic=topic.topic, topic_id=topic.topic_id,
                                                            partitions=kept))
    for key in moved:
        cached = session.partitions.pop(key, None)
        if cached is not None:
            session.partitions[key] = cached
    return out


def session_topics(session: FetchSession) -> list:
    """The session's partitions grouped into runs of one topic (name or id), in session order."""
    topics: list = []
    for (name, _), cached in session.partitions.items():
        if topics and topics[-1][0] == name:
            topics[-1][1].append(cached)
        else:
            topics.append((name, [cached]))
    return topics


class FetchSessionCache:
    def __init__(self, rng: Random, max_slots: int = 1000, eviction_ms: int = 120_000):
        self.rng = rng
        self.max_slots = max(0, max_slots)
        self.eviction_ms = eviction_ms
        self.sessions: dict[int, FetchSession] = {}
        # Counters (tests and operators): which kinds of requests came, how sessions ended.
        self.full_fetches = 0
        self.incremental_fetches = 0
        self.sessionless_fetches = 0
        self.session_errors = 0
        self.evictions = 0

    def __len__(self) -> int:
        return len(self.sessions)

    def new_context(self, request, version: int, now_ms: int, *, privileged: bool) -> FetchContext:
        """How to serve `request` (a decoded FetchRequest of `version`); updates the cache."""
        by_id = version >= TOPIC_ID_VERSION
        request_topics = [(topic_key(t, by_id), t.partitions) for t in request.topics]
        session_id, epoch = request.session_id, request.session_epoch
        if version < SESSION_VERSION or (session_id == INVALID_SESSION_ID and epoch == FINAL_EPOCH):
            self.sessionless_fetches += 1
            return FetchContext(request_topics, by_id=by_id)
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.remove(session_id)
            if epoch == FINAL_EPOCH:
                self.sessionless_fetches += 1
                return FetchContext(request_topics, by_id=by_id)
            self.full_fetches += 1
            return FetchContext(request_topics, cache=self, privileged=privileged, by_id=by_id)
        session = self.sessions.get(session_id)
        if session is None:
            self.session_errors += 1
            return FetchContext([], error=ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            self.session_errors += 1
            return FetchContext([], error=ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != by_id:  # a session names its topics one way for its whole life
            self.session_errors += 1
            return FetchContext([], error=ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
        session.apply(request)
        session.epoch = next_epoch(session.epoch)
        session.last_used_ms = now_ms
        self.incremental_fetches += 1
        return FetchContext(session_topics(session), session=session, by_id=by_id)

    def maybe_create(self, now_ms: int, privileged: bool, partitions: dict[Key, CachedPartition],
                     uses_topic_ids: bool = False) -> int:
        """A new session's id, or INVALID_SESSION_ID when there is no room for it."""
        if self.max_slots == 0:
            return INVALID_SESSION_ID
        if len(self.sessions) >= self.max_slots and not self._try_evict(privileged, len(partitions), now_ms):
            return INVALID_SESSION_ID
        session_id = self._new_id()
        self.sessions[session_id] = FetchSession(session_id, privileged, partitions, now_ms, uses_topic_ids)
        return session_id

    def remove(self, session_id: int) -> FetchSession | None:
        return self.sessions.pop(session_id, None)

    def _new_id(self) -> int:
        while True:
            session_id = self.rng.randint(1, MAX_SESSION_ID)
            if session_id not in self.sessions:
                return session_id

    def _try_evict(self, privileged: bool, size: int, now_ms: int) -> bool:
        sessions: Iterable[FetchSession] = self.sessions.values()
        stale = min(sessions, key=lambda s: (s.last_used_ms, s.id))
        if now_ms - stale.last_used_ms > self.eviction_ms:
            return self._evict(stale)
        # Only sessions past their minimum lifetime are fair game, except that a follower may
        # always displace a consumer.
        candidates = [s for s in self.sessions.values()
                      if now_ms - s.created_ms > self.eviction_ms or (privileged and not s.privileged)]
        if not candidates:
            return False
        victim = min(candidates, key=FetchSession.eviction_key)
        if (privileged, size, INVALID_SESSION_ID) < victim.eviction_key():
            return False
        return self._evict(victim)

    def _evict(self, session: FetchSession) -> bool:
        del self.sessions[session.id]
        self.evictions += 1
        return True
