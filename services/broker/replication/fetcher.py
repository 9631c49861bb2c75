"""Follower replication: one fetcher thread per leader broker, fetching many partitions per request.

A partition enters a fetcher in the *truncating* state. The fetcher asks the leader for the end
offset of the follower's latest leader epoch (OffsetForLeaderEpoch) and truncates the local log
to where the two logs stop agreeing, so a follower never keeps records the leader does not have;
then the partition is *fetching* from the local log end offset. Each fetch response's batches are
appended with the leader's offsets and the follower's high watermark becomes
min(leader's high watermark, local log end offset).

The network side is a `LeaderEndpoint` (see `leader_endpoint`); the fetcher itself is plain
threads and logic, driven by the ReplicaManager through `ReplicaFetcherManager`.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

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


class FetchedPartition(Protocol):
    error_code: int
    high_watermark: int
    log_start_offset: int
    records: bytes


class LeaderEndpoint(Protocol):
    """How a fetcher talks to one leader broker."""

    def fetch(self, replica_id: int, max_wait_ms: int, min_bytes: int, max_bytes: int,
              partitions: dict[TopicPartition, tuple[int, int, int]]) -> dict[TopicPartition, FetchedPartition]:
        """partitions: tp -> (fetch_offset, current_leader_epoch, partition_max_bytes)."""

    def offsets_for_leader_epoch(self, partitions: dict[TopicPartition, tuple[int, int]]
                                 ) -> dict[TopicPartition, tuple[int, int, int]]:
        """partitions: tp -> (current_leader_epoch, leader_epoch); returns (error, epoch, end_offset)."""

    def close(self) -> None: ...


class ReplicaFetcherThread:
    """Replicates the partitions this broker follows from one leader."""

    def __init__(self, leader_id: int, endpoint: LeaderEndpoint, manager: ReplicaManager,
                 config: FetcherConfig, clock) -> None:
        self.leader_id = leader_id
        self.endpoint = endpoint
        self.manager = manager
        self.config = config
        self.clock = clock
        self._lock = threading.Lock()
        self._partitions: dict[TopicPartition, PartitionFetchState] = {}
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
        self._wakeup.set()

    def remove_partitions(self, partitions) -> None:
        with self._lock:
            for tp in partitions:
                self._partitions.pop(tp, None)

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
                self._wakeup.wait(self.config.backoff_ms / 1000)
                self._wakeup.clear()

    def _run_once(self) -> bool:
        now = self.clock.monotonic_ms()
        with self._lock:
            truncating = {tp: s.leader_epoch for tp, s in self._partitions.items()
                          if s.truncating and s.delayed_until <= now}
        if truncating:
            self._truncate(truncating)
        with self._lock:
            fetching = {tp: (s.fetch_offset, s.leader_epoch, self.config.partition_max_bytes)
                        for tp, s in self._partitions.items() if not s.truncating and s.delayed_until <= now}
        if not fetching:
            return bool(truncating)
        results = self.endpoint.fetch(self.config.replica_id, self.config.max_wait_ms, self.config.min_bytes,
                                      self.config.max_bytes, fetching)
        failed: dict[int, list[TopicPartition]] = {}
        for tp, data in self._changed_answers(fetching, results):
            if not self._process(tp, fetching[tp][0], data):
                failed.setdefault(data.error_code, []).append(tp)
        self._log_failures("fetch", failed)
        return True

    def _changed_answers(self, fetching: dict[TopicPartition, tuple[int, int, int]],
                         results: dict[TopicPartition, FetchedPartition]
                         ) -> list[tuple[TopicPartition, FetchedPartition]]:
        """The answers that change something: not those without records, error or a new high
        watermark (most of them, when thousands of partitions are idle), picked in one pass."""
        changed = []
        with self._lock:
            partitions = self._partitions
            for tp, data in results.items():
                if data.error_code == Errors.NONE and not data.records:
                    state = partitions.get(tp)
                    if (state is not None and not state.truncating and state.fetch_offset == fetching[tp][0]
                            and data.high_watermark == state.leader_high_watermark):
                        continue
                changed.append((tp, data))
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
            if state is None or state.leader_epoch != epoch:
                return  # removed or re-added meanwhile
            if fetch_offset is None:
                self._partitions.pop(tp, None)
                return
            state.fetch_offset = fetch_offset
            state.truncating = False
            state.leader_high_watermark = -1

    def _delay(self, tp: TopicPartition) -> None:
        with self._lock:
            state = self._partitions.get(tp)
            if state is not None:
                state.delayed_until = self.clock.monotonic_ms() + self.config.backoff_ms

    def _process(self, tp: TopicPartition, fetch_offset: int, data: FetchedPartition) -> bool:
        """Applies one partition's answer; False when it was an error the partition backs off on."""
        with self._lock:
            state = self._partitions.get(tp)
            if state is None or state.truncating or state.fetch_offset != fetch_offset:
                return True
        if data.error_code == Errors.NONE:
            try:
                next_offset = self.manager.append_as_follower(tp, data.records, data.high_watermark)
            except CorruptRecordError as exc:
                logger.error("invalid records fetched for %s at offset %d are not appended: %s", tp, fetch_offset,
                             exc)
                self._delay(tp)
                return True
            if next_offset is None:  # the partition is gone here
                self.remove_partitions([tp])
                return True
            with self._lock:
                if state is self._partitions.get(tp):
                    state.fetch_offset = next_offset
                    state.leader_high_watermark = data.high_watermark
            return True
        if data.error_code == Errors.OFFSET_OUT_OF_RANGE:
            if fetch_offset < data.log_start_offset:
                offset = self.manager.restart_follower_at(tp, data.log_start_offset)
                with self._lock:
                    if state is self._partitions.get(tp) and offset is not None:
                        state.fetch_offset = offset
            else:
                with self._lock:
                    state.truncating = True
            return True
        self._delay(tp)
        return False


class ReplicaFetcherManager:
    """One `ReplicaFetcherThread` per leader broker, created on demand, removed when idle."""

    def __init__(self, manager: ReplicaManager, config: FetcherConfig, endpoint_factory, clock) -> None:
        self.manager = manager
        self.config = config
        self.endpoint_factory = endpoint_factory  # leader_id -> LeaderEndpoint
        self.clock = clock
        self._lock = threading.Lock()
        self._threads: dict[int, ReplicaFetcherThread] = {}
        self._closed = False

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
                                                  self.config, self.clock)
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
