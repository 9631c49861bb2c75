"""Incremental fetch sessions on the leader (KIP-227): the bounded cache of sessions, what each
session remembers of its partitions, and which of them changed since its last answer.

A fetcher opens a session with a full fetch (epoch 0); later fetches are incremental: they name
only partitions added to the session or whose fetch offset, leader epoch or byte limit changed,
and the answer holds only partitions with records, an error, or a new high watermark, last stable
or log start offset. What a session must look at is kept as it happens: every change to a
partition (an append, a high watermark move, a leadership change) marks it *changed* in the
sessions that hold it (`mark_changed`), so an incremental fetch reads its changed partitions and
nothing else, and an idle partition costs nothing per fetch.

The cache holds at most `max.incremental.fetch.session.cache.slots` sessions. When it is full a
new session takes the slot of one not used for `EVICTION_MS`, else of the least valuable one it
outranks: a follower's session (privileged) outranks a consumer's and may take any slot, a
consumer's only a consumer's, and between sessions of the same kind the one with more partitions
wins (a tie keeps the old one). A follower's new session replaces its previous one (a broker
fetches from a leader in one session; the old one is a restarted broker's or an abandoned one).
A full fetch the cache has no slot for is answered outside any session (session id 0).
Thread-safe: fetches run on the broker's event loop while appends and leadership changes mark
partitions from other threads.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from services.common.errors import Errors

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_EPOCH = 2**31 - 1
EVICTION_MS = 120_000  # min.incremental.fetch.session.eviction.ms, as Kafka's


def next_epoch(epoch: int) -> int:
    """The epoch after `epoch`, wrapping to 1 (0 and -1 are reserved)."""
    return 1 if epoch >= MAX_EPOCH else epoch + 1


@dataclass(eq=False)
class CachedPartition:
    """What a session last sent or learned of one partition."""

    fetch_offset: int
    max_bytes: int
    leader_epoch: int = -1
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1


@dataclass(frozen=True)
class SessionWakeKey:
    """The purgatory key a session's parked fetch watches (never equal to a partition's key)."""

    session_id: int


@dataclass(eq=False)
class FetchSession:
    id: int
    replica_id: int  # a follower's broker id, or -1 for a consumer
    read_committed: bool
    created_ms: int
    last_used_ms: int
    epoch: int = 1  # the epoch the next incremental fetch must carry
    partitions: dict[tuple[str, int], CachedPartition] = field(default_factory=dict)
    changed: dict[tuple[str, int], None] = field(default_factory=dict)  # in the order to read them
    closed: bool = False

    @property
    def privileged(self) -> bool:
        return self.replica_id >= 0

    @property
    def wake_key(self) -> SessionWakeKey:
        return SessionWakeKey(self.id)

    def rank(self) -> tuple[bool, int, int]:
        """Eviction order: the smallest goes first."""
        return self.privileged, len(self.partitions), -self.last_used_ms


@dataclass
class FetchContext:
    """How one fetch relates to the cache: `error` (a session error answers the fetch as a whole),
    `session` (None: full and outside any session) and whether the answer is `full`."""

    error: int = Errors.NONE
    session: FetchSession | None = None
    full: bool = True

    @property
    def session_id(self) -> int:
        return self.session.id if self.session is not None else INVALID_SESSION_ID


class FetchSessionCache:
    def __init__(self, max_slots: int = 1000, eviction_ms: int = EVICTION_MS) -> None:
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self._lock = threading.Lock()
        self._sessions: dict[int, FetchSession] = {}
        self._holders: dict[tuple[str, int], set[FetchSession]] = {}  # partition -> sessions
        self.releases = 0  # times a session stopped holding a partition (closed, evicted, forgot it)
        self.evictions = 0
        self.full_fetches = 0
        self.incremental_fetches = 0

    # ------------------------------------------------------------------ fetches

    def new_context(self, replica_id: int, session_id: int, epoch: int, named: Iterable,
                    forgotten: Iterable[tuple[str, int]], read_committed: bool, now_ms: int) -> FetchContext:
        """Resolves a fetch's session fields. `named` holds FetchPartition-like entries (topic,
        partition, fetch_offset, partition_max_bytes, current_leader_epoch)."""
        if epoch == FINAL_EPOCH or epoch == INITIAL_EPOCH:
            with self._lock:
                self.full_fetches += 1
                if session_id != INVALID_SESSION_ID:
                    self._remove(self._sessions.get(session_id))
                if epoch == FINAL_EPOCH:
                    return FetchContext()
                session = self._try_create(replica_id, read_committed, named, now_ms)
            return FetchContext(session=session)
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                return FetchContext(Errors.FETCH_SESSION_ID_NOT_FOUND)
            if session.epoch != epoch or session.replica_id != replica_id:
                return FetchContext(Errors.INVALID_FETCH_SESSION_EPOCH)
            self.incremental_fetches += 1
            session.epoch = next_epoch(epoch)
            session.last_used_ms = now_ms
            for key in forgotten:
                if session.partitions.pop(key, None) is not None:
                    session.changed.pop(key, None)
                    self._unhold(key, session)
            for request in named:
                key = (request.topic, request.partition)
                cached = session.partitions.get(key)
                if cached is None:
                    session.partitions[key] = CachedPartition(request.fetch_offset, request.partition_max_bytes,
                                                              request.current_leader_epoch)
                    self._holders.setdefault(key, set()).add(session)
                else:
                    cached.fetch_offset = request.fetch_offset
                    cached.max_bytes = request.partition_max_bytes
                    cached.leader_epoch = request.current_leader_epoch
                session.changed[key] = None
        return FetchContext(session=session, full=False)

    def take_changed(self, session: FetchSession) -> list[tuple[tuple[str, int], CachedPartition]]:
        """The session's changed partitions with their cached state; none is changed after."""
        with self._lock:
            changed, session.changed = session.changed, {}
            partitions = session.partitions
            return [(key, partitions[key]) for key in changed if key in partitions]

    def has_changed(self, session: FetchSession) -> bool:
        return bool(session.changed)

    def peek_changed(self, session: FetchSession) -> list[tuple[tuple[str, int], CachedPartition]]:
        """The changed partitions, left changed (a parked fetch checking whether it can answer)."""
        with self._lock:
            partitions = session.partitions
            return [(key, partitions[key]) for key in session.changed if key in partitions]

    def mark_changed(self, key: tuple[str, int]) -> list[FetchSession]:
        """Marks `key` changed in every session holding it; returns those sessions."""
        with self._lock:
            holders = self._holders.get(key)
            if not holders:
                return []
            for session in holders:
                session.changed[key] = None
            return list(holders)

    def mark_unfinished(self, session: FetchSession, keys: Iterable[tuple[str, int]]) -> None:
        """Keeps partitions changed that an answer left with more to read (or an error), after
        those marked since, in the order given: an answer that ran out of bytes puts the
        partitions it served last, so none is passed over fetch after fetch."""
        with self._lock:
            if not session.closed:
                changed, partitions = session.changed, session.partitions
                for key in keys:
                    if key in partitions:
                        changed[key] = None

    def holders(self, key: tuple[str, int]) -> list[FetchSession]:
        with self._lock:
            holders = self._holders.get(key)
            return list(holders) if holders else []

    def last_fetch_ms(self, replica_id: int, key: tuple[str, int]) -> int:
        """When a session of follower `replica_id` holding `key` last fetched (0 if none holds it):
        such a fetch asked for `key` at the offset the session holds for it."""
        with self._lock:
            holders = self._holders.get(key)
            if not holders:
                return 0
            return max((s.last_used_ms for s in holders if s.replica_id == replica_id), default=0)

    def followers_fetched_since(self, since_ms: int) -> frozenset[int]:
        """Ids of the followers' sessions used at or after `since_ms`."""
        with self._lock:
            return frozenset(s.id for s in self._sessions.values() if s.privileged and s.last_used_ms >= since_ms)

    # ------------------------------------------------------------------ slots

    def _try_create(self, replica_id: int, read_committed: bool, named: Iterable, now_ms: int
                    ) -> FetchSession | None:
        partitions = {(r.topic, r.partition): CachedPartition(r.fetch_offset, r.partition_max_bytes,
                                                              r.current_leader_epoch) for r in named}
        candidate = FetchSession(self._new_id(), replica_id, read_committed, now_ms, now_ms,
                                 partitions=partitions)
        if candidate.privileged:  # a follower fetches from a leader in one session: the older is over
            for session in [s for s in self._sessions.values() if s.replica_id == replica_id]:
                self._remove(session)
        if len(self._sessions) >= self.max_slots and not self._try_evict(candidate, now_ms):
            return None
        self._sessions[candidate.id] = candidate
        holders = self._holders
        for key in partitions:
            holders.setdefault(key, set()).add(candidate)
        return candidate

    def _try_evict(self, candidate: FetchSession, now_ms: int) -> bool:
        sessions = list(self._sessions.values())
        if not sessions:
            return False
        stale = min(sessions, key=lambda s: s.last_used_ms)
        if now_ms - stale.last_used_ms > self.eviction_ms:
            victim = stale
        else:
            # a consumer's session may only take a consumer's slot; a follower's, any slot
            eligible = sessions if candidate.privileged else [s for s in sessions if not s.privileged]
            if not eligible:
                return False
            victim = min(eligible, key=FetchSession.rank)
            if victim.rank()[:2] >= candidate.rank()[:2]:
                return False
        self._remove(victim)
        self.evictions += 1
        return True

    def _new_id(self) -> int:
        while True:
            session_id = random.randint(1, MAX_EPOCH)
            if session_id not in self._sessions:
                return session_id

    def remove(self, session_id: int) -> None:
        with self._lock:
            self._remove(self._sessions.get(session_id))

    def _remove(self, session: FetchSession | None) -> None:
        if session is None or self._sessions.pop(session.id, None) is None:
            return
        session.closed = True
        for key in session.partitions:
            self._unhold(key, session)

    def _unhold(self, key: tuple[str, int], session: FetchSession) -> None:
        self.releases += 1
        holders = self._holders.get(key)
        if holders is not None:
            holders.discard(session)
            if not holders:
                del self._holders[key]

    # ------------------------------------------------------------------ metrics

    @property
    def size(self) -> int:
        return len(self._sessions)

    @property
    def partitions_cached(self) -> int:
        with self._lock:
            return sum(len(s.partitions) for s in self._sessions.values())
