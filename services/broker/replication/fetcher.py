"""Follower replication: one fetcher thread per leader broker, fetching many partitions per request.

A partition enters a fetcher in the *truncating* state. The fetcher asks the leader for the end
offset of the follower's latest leader epoch (OffsetForLeaderEpoch) and truncates the local log
to where the two logs stop agreeing, so a follower never keeps records the leader does not have;
then the partition is *fetching* from the local log end offset. Each fetch response's batches are
appended with the leader's offsets and the follower's high watermark becomes
min(leader's high watermark, local log end offset).

Fetches run in an incremental fetch session (KIP-227) with the leader, and an idle partition costs
no work per fetch: the fetcher tells its `FetchSessionHandler` when a partition's fetch changes
(it starts fetching after truncation, its fetch offset moves after an append, it backs off after
an error and leaves the session until its backoff ends, it is removed), keeps the partitions to
truncate and those backing off apart, and each fetch names only the changed partitions; the
leader answers only partitions with records, an error or new offsets. A leader without room for
a session is sent every partition each time and answers them all; the idle answers are then
skipped in one pass.

A follower replication throttle (`ReplicationQuota`) counts the bytes fetched for throttled
partitions; while it is over its bound, throttled partitions not caught up with the leader's high
watermark (Kafka's test of a follower in sync) leave the session and come back once it is under.

The network side is a `LeaderEndpoint` (see `leader_endpoint`); the fetcher itself is plain
threads and logic, driven by the ReplicaManager through `ReplicaFetcherManager`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Protocol

from services.broker.replication.quota import ReplicationQuota
from services.clients.fetch_session import FetchSessionHandler, SessionFetch
from services.common.errors import Errors
from services.common.records.batch import CorruptRecordError
from services.common.topic_partition import TopicPartition

if TYPE_CHECKING:
    from services.broker.replica_manager import ReplicaManager

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class FetcherConfig:
    replica_id: int
    max_wait_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 10 * 1024 * 1024
    partition_max_bytes: int = 1024 * 1024
    backoff_ms: int = 1000
    request_timeout_ms: int = 30000


@dataclass
class PartitionFetchState:
    fetch_offset: int
    leader_epoch: int
    truncating: bool = True
    delayed_until: float = 0.0
    leader_high_watermark: int = -1  # the last one applied: an answer with no records and the same
                                     # high watermark changes nothing (most answers, when idle)
    lag: int | None = None  # the leader's high watermark less the fetch offset, after an append

    @property
    def in_sync(self) -> bool:
        return self.lag is not None and self.lag <= 0


class FetchedPartition(Protocol):
    error_code: int
    high_watermark: int
    log_start_offset: int
    records: bytes


class FetchAnswer(NamedTuple):
    """A FetchResponse: error_code is the whole request's (NETWORK_EXCEPTION for a failed call)."""

    error_code: int
    session_id: int
    partitions: Mapping[TopicPartition, FetchedPartition]


class LeaderEndpoint(Protocol):
    """How a fetcher talks to one leader broker."""

    def fetch(self, replica_id: int, max_wait_ms: int, min_bytes: int, max_bytes: int,
              fetch: SessionFetch) -> FetchAnswer:
        """fetch: the session fields, the partitions to name and those to forget."""

    def offsets_for_leader_epoch(self, partitions: dict[TopicPartition, tuple[int, int]]
                                 ) -> dict[TopicPartition, tuple[int, int, int]]:
        """partitions: tp -> (current_leader_epoch, leader_epoch); returns (error, epoch, end_offset)."""

    def close(self) -> None: ...


class ReplicaFetcherThread:
    """Replicates the partitions this broker follows from one leader."""

    def __init__(self, leader_id: int, endpoint: LeaderEndpoint, manager: ReplicaManager,
                 config: FetcherConfig, clock, quota: ReplicationQuota | None = None) -> None:
        self.leader_id = leader_id
        self.quota = quota or ReplicationQuota(clock=clock)
        self.endpoint = endpoint
        self.manager = manager
        self.config = config
        self.clock = clock
        self._lock = threading.Lock()
        self._partitions: dict[TopicPartition, PartitionFetchState] = {}
        # the partitions waiting for truncation, and those backing off in the order their backoff
        # ends (it is the same for all); the others are fetching, each in the session as it is
        self._truncating: dict[TopicPartition, None] = {}
        self._delayed: dict[TopicPartition, float] = {}
        self._throttled: dict[TopicPartition, None] = {}  # out of the session while over the quota
        self._session = FetchSessionHandler()
        self._wakeup = threading.Event()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"ReplicaFetcherThread-{leader_id}",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def add_partitions(self, partitions: dict[TopicPartition, int]) -> None:
        """partitions: tp -> leader epoch; each starts by truncating."""
        with self._lock:
            for tp, epoch in partitions.items():
                self._partitions[tp] = PartitionFetchState(-1, epoch, truncating=True)
                self._truncating[tp] = None
                self._delayed.pop(tp, None)
                self._throttled.pop(tp, None)
                self._session.remove_partition(tp)
        self._wakeup.set()

    def remove_partitions(self, partitions) -> None:
        with self._lock:
            for tp in partitions:
                self._remove_locked(tp)

    def _remove_locked(self, tp: TopicPartition) -> None:
        if self._partitions.pop(tp, None) is not None:
            self._truncating.pop(tp, None)
            self._delayed.pop(tp, None)
            self._throttled.pop(tp, None)
            self._session.remove_partition(tp)

    @property
    def partition_count(self) -> int:
        with self._lock:
            return len(self._partitions)

    def fetch_state(self, tp: TopicPartition) -> PartitionFetchState | None:
        with self._lock:
            return self._partitions.get(tp)

    def shutdown(self) -> None:
        """Stops the thread. The endpoint is closed first: that ends a request in flight to a leader
        that hangs (paused, partitioned away), which would otherwise hold the join, and the
        LeaderAndIsr that caused it, for up to `request_timeout_ms`."""
        self._stopping.set()
        self._wakeup.set()
        self.endpoint.close()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(self.config.request_timeout_ms / 1000 + 5)

    # ------------------------------------------------------------------ loop

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                did_work = self._run_once()
            except Exception:
                logger.exception("fetcher for leader %d failed; backing off", self.leader_id)
                did_work = False
                self._stopping.wait(self.config.backoff_ms / 1000)
            if not did_work:
                # partitions held back by the throttle are looked at again within a window's tenth
                wait_ms = self.config.backoff_ms if not self._throttled else \
                    min(self.config.backoff_ms, self.quota.window_size_ms / 10)
                self._wakeup.wait(wait_ms / 1000)
                self._wakeup.clear()

    def _run_once(self) -> bool:
        with self._lock:
            self._end_backoffs(self.clock.monotonic_ms())
            truncating = {tp: self._partitions[tp].leader_epoch for tp in self._truncating}
        if truncating:
            self._truncate(truncating)
        with self._lock:
            if self._throttled or self.quota.has_throttled:
                self._apply_throttle()
            if not self._session.has_partitions:
                return bool(truncating)
            fetch = self._session.build()
        answer = self.endpoint.fetch(self.config.replica_id, self.config.max_wait_ms, self.config.min_bytes,
                                     self.config.max_bytes, fetch)
        with self._lock:
            if not self._session.handle_response(answer):
                self._fetch_failed(fetch, answer.error_code)
                return True
            changed = self._changed_answers(answer.partitions)
        failed: dict[int, list[TopicPartition]] = {}
        for tp, fetch_offset, data in changed:
            if not self._process(tp, fetch_offset, data):
                failed.setdefault(data.error_code, []).append(tp)
        self._log_failures("fetch", failed)
        return True

    def _fetch_failed(self, fetch: SessionFetch, error_code: int) -> None:
        """The whole fetch failed. A session the leader lost is opened again by the next fetch,
        at once; any other failure backs off every partition fetched."""
        if not fetch.full and error_code in (Errors.FETCH_SESSION_ID_NOT_FOUND, Errors.INVALID_FETCH_SESSION_EPOCH):
            logger.info("fetch session %d with leader %d answered error %d; fetching every partition again",
                        fetch.session_id, self.leader_id, error_code)
            return
        partitions = list(self._session.partitions)
        for tp in partitions:
            self._delay_locked(tp)
        self._log_failures("fetch", {error_code: partitions})

    def _apply_throttle(self) -> None:
        """Over the quota, throttled partitions not in sync leave the session; under it, those
        held back come back."""
        quota = self.quota
        if quota.is_exceeded():
            for tp in [tp for tp in self._session.partitions
                       if quota.is_throttled(tp) and not self._partitions[tp].in_sync]:
                self._session.remove_partition(tp)
                self._throttled[tp] = None
            return
        for tp in self._throttled:
            state = self._partitions[tp]
            if not state.truncating and tp not in self._delayed:
                self._session.set_partition(tp, state.fetch_offset, state.leader_epoch,
                                            self.config.partition_max_bytes)
        self._throttled.clear()

    def _end_backoffs(self, now: float) -> None:
        """Partitions whose backoff ended go back to truncating or into the session."""
        ended = []
        for tp, until in self._delayed.items():
            if until > now:
                break
            ended.append(tp)
        for tp in ended:
            del self._delayed[tp]
            state = self._partitions[tp]
            if state.truncating:
                self._truncating[tp] = None
            else:
                self._session.set_partition(tp, state.fetch_offset, state.leader_epoch,
                                            self.config.partition_max_bytes)

    def _changed_answers(self, results: Mapping[TopicPartition, FetchedPartition]
                         ) -> list[tuple[TopicPartition, int, FetchedPartition]]:
        """The answers that change something, each with the offset it was fetched from: not those
        without records, error or a new high watermark (all an answer outside a session holds for
        idle partitions), picked in one pass."""
        changed = []
        partitions = self._partitions
        asked = self._session.session_partitions
        for tp, data in results.items():
            fetched = asked.get(tp)
            if fetched is None:
                continue  # not asked for
            fetch_offset = fetched[0]
            if data.error_code == Errors.NONE and not data.records:
                state = partitions.get(tp)
                if (state is not None and not state.truncating and state.fetch_offset == fetch_offset
                        and data.high_watermark == state.leader_high_watermark):
                    continue
            changed.append((tp, fetch_offset, data))
        return changed

    def _log_failures(self, what: str, failed: dict[int, list[TopicPartition]]) -> None:
        """One line per error code, not per partition: a leader that goes away fails thousands."""
        for error_code, partitions in failed.items():
            logger.info("%s of %d partitions from leader %d answered error %d (%s%s); backing off", what,
                        len(partitions), self.leader_id, error_code, ", ".join(f"{t}-{p}" for t, p in partitions[:5]),
                        ", ..." if len(partitions) > 5 else "")

    def _truncate(self, partitions: dict[TopicPartition, int]) -> None:
        """Finds each partition's divergence point with the leader and truncates there."""
        requests = {}
        for tp, epoch in partitions.items():
            latest = self.manager.latest_local_epoch(tp)
            if latest is None:
                self._start_fetching(tp, epoch, self.manager.truncate_follower(tp, None))
            else:
                requests[tp] = (epoch, latest)
        if not requests:
            return
        answers = self.endpoint.offsets_for_leader_epoch(requests)
        failed: dict[int, list[TopicPartition]] = {}
        for tp, (error, leader_epoch, end_offset) in answers.items():
            if error != Errors.NONE:
                failed.setdefault(error, []).append(tp)
                self._delay(tp)
                continue
            offset = self.manager.divergence_offset(tp, requests[tp][1], leader_epoch, end_offset)
            self._start_fetching(tp, requests[tp][0], self.manager.truncate_follower(tp, offset))
        self._log_failures("OffsetForLeaderEpoch", failed)

    def _start_fetching(self, tp: TopicPartition, epoch: int, fetch_offset: int | None) -> None:
        with self._lock:
            state = self._partitions.get(tp)
            if state is None or state.leader_epoch != epoch or not state.truncating:
                return  # removed or re-added meanwhile
            if fetch_offset is None:
                self._remove_locked(tp)
                return
            state.truncating = False
            state.leader_high_watermark = -1
            self._truncating.pop(tp, None)
            self._move_locked(tp, state, fetch_offset)

    def _move_locked(self, tp: TopicPartition, state: PartitionFetchState, fetch_offset: int) -> None:
        """Sets where a fetching partition fetches from next (in the session unless backing off
        or held back by the throttle)."""
        state.fetch_offset = fetch_offset
        if tp not in self._delayed and tp not in self._throttled:
            self._session.set_partition(tp, fetch_offset, state.leader_epoch, self.config.partition_max_bytes)

    def _delay(self, tp: TopicPartition) -> None:
        with self._lock:
            self._delay_locked(tp)

    def _delay_locked(self, tp: TopicPartition) -> None:
        """Backs a partition off: out of the session, and not truncated, until its backoff ends."""
        state = self._partitions.get(tp)
        if state is None:
            return
        state.delayed_until = self.clock.monotonic_ms() + self.config.backoff_ms
        self._delayed.pop(tp, None)
        self._delayed[tp] = state.delayed_until
        self._truncating.pop(tp, None)
        self._throttled.pop(tp, None)
        self._session.remove_partition(tp)

    def _process(self, tp: TopicPartition, fetch_offset: int, data: FetchedPartition) -> bool:
        """Applies one partition's answer; False when it was an error the partition backs off on."""
        with self._lock:
            state = self._partitions.get(tp)
            if state is None or state.truncating or state.fetch_offset != fetch_offset:
                return True
        if data.error_code == Errors.NONE:
            try:
                next_offset = self.manager.append_as_follower(tp, data.records, data.high_watermark,
                                                              data.log_start_offset)
            except CorruptRecordError as exc:
                logger.error("invalid records fetched for %s at offset %d are not appended: %s", tp, fetch_offset,
                             exc)
                self._delay(tp)
                return True
            if next_offset is None:  # the partition is gone here
                self.remove_partitions([tp])
                return True
            if data.records and self.quota.is_throttled(tp):
                self.quota.record(len(data.records))
            with self._lock:
                if state is self._partitions.get(tp):
                    state.leader_high_watermark = data.high_watermark
                    state.lag = max(0, data.high_watermark - next_offset)
                    self._move_locked(tp, state, next_offset)
            return True
        if data.error_code == Errors.OFFSET_OUT_OF_RANGE:
            if fetch_offset < data.log_start_offset:
                offset = self.manager.restart_follower_at(tp, data.log_start_offset)
                with self._lock:
                    if state is self._partitions.get(tp) and offset is not None:
                        self._move_locked(tp, state, offset)
            else:
                with self._lock:
                    if state is self._partitions.get(tp):
                        state.truncating = True
                        self._truncating[tp] = None
                        self._session.remove_partition(tp)
            return True
        self._delay(tp)
        return False


class ReplicaFetcherManager:
    """One `ReplicaFetcherThread` per leader broker, created on demand, removed when idle."""

    def __init__(self, manager: ReplicaManager, config: FetcherConfig, endpoint_factory, clock,
                 quota: ReplicationQuota | None = None) -> None:
        self.manager = manager
        self.quota = quota or ReplicationQuota(clock=clock)
        self.config = config
        self.endpoint_factory = endpoint_factory  # leader_id -> LeaderEndpoint
        self.clock = clock
        self._lock = threading.Lock()
        self._threads: dict[int, ReplicaFetcherThread] = {}
        self._closed = False

    def reconfigure(self, config: FetcherConfig) -> None:
        """New fetch settings: every fetcher uses them from its next fetch on."""
        with self._lock:
            self.config = config
            for thread in self._threads.values():
                thread.config = config

    def add_fetchers(self, partitions: dict[TopicPartition, tuple[int, int]]) -> None:
        """partitions: tp -> (leader id, leader epoch); nothing once the manager is shut down (a
        broker leaving after its controlled shutdown must not fetch its way back into an ISR)."""
        if self._closed:
            return
        self.remove_fetchers(list(partitions))
        by_leader: dict[int, dict[TopicPartition, int]] = {}
        for tp, (leader, epoch) in partitions.items():
            by_leader.setdefault(leader, {})[tp] = epoch
        with self._lock:
            if self._closed:
                return
            for leader, parts in by_leader.items():
                thread = self._threads.get(leader)
                if thread is None:
                    thread = ReplicaFetcherThread(leader, self.endpoint_factory(leader), self.manager,
                                                  self.config, self.clock, self.quota)
                    self._threads[leader] = thread
                    thread.start()
                thread.add_partitions(parts)

    def remove_fetchers(self, partitions) -> None:
        partitions = list(partitions)
        idle = []
        with self._lock:
            for leader, thread in list(self._threads.items()):
                thread.remove_partitions(partitions)
                if thread.partition_count == 0:
                    idle.append(self._threads.pop(leader))
        for thread in idle:
            thread.shutdown()

    def fetch_state(self, tp: TopicPartition) -> PartitionFetchState | None:
        with self._lock:
            threads = list(self._threads.values())
        for thread in threads:
            state = thread.fetch_state(tp)
            if state is not None:
                return state
        return None

    def shutdown(self) -> None:
        with self._lock:
            self._closed = True
            threads = list(self._threads.values())
            self._threads.clear()
        for thread in threads:
            thread.shutdown()
