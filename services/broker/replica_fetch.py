"""The fetch part of the ReplicaManager: fetches served up to the high watermark to consumers (below
the last stable offset for read_committed ones, with the aborted transactions of the range) and up to
the log end to followers, whose fetches move the high watermark and may grow the ISR; long polls
park in the fetch purgatory and are tried after the last of overlapping appends to a partition, so
a burst of produces travels in one response. Also ListOffsets, and the request and result types of
a fetch.

A fetch in an incremental fetch session (see `fetch_session_cache`) reads only the partitions
marked changed in its session since its last answer (and those it names), answers only those whose
records, error or offsets differ from what the session last answered, and parks watching its
session alone; every change to a partition marks the sessions holding it before parked fetches
are tried. A follower's session fetch names only partitions whose offset moved, so the idle ones
are caught up as of the session's last fetch (`session_fetch_ms`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from services.broker.delayed import DelayedFetch
from services.broker.fetch_session_cache import FetchSession
from services.broker.partition import Partition
from services.common.errors import Errors, KafkaError
from services.common.records.batch import HEADER_SIZE, next_offset_after
from services.common.shared_types import (
    CONSUMER_REPLICA_ID,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
)
from services.common.topic_partition import TopicPartition

logger = logging.getLogger(__name__)


class ReplicaFetchKey(NamedTuple):
    """The one purgatory key a follower's parked fetch watches, however many partitions it asks
    for: appends and leadership changes of a partition wake the fetches of its replicas through it.
    (A one-field tuple, so it never equals a (topic, partition) key.)"""

    replica_id: int


class FetchPartition(NamedTuple):
    topic: str
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1


class LogReadResult(NamedTuple):
    """What a fetch read from one partition's log (Kafka's LogReadResult)."""

    error_code: int
    high_watermark: int = -1
    log_start_offset: int = -1
    records: bytes = b""
    error_message: str = ""
    last_stable_offset: int = -1
    aborted_transactions: tuple = ()  # txn_index.AbortedTxn of the returned range (read_committed)


class ListOffsetResult(NamedTuple):
    error_code: int
    timestamp: int = -1
    offset: int = -1
    leader_epoch: int = -1


@dataclass(frozen=True)
class FetchParams:
    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    partitions: tuple[FetchPartition, ...]  # those the request names
    read_committed: bool = False  # consumers only: read below the last stable offset
    session: FetchSession | None = None
    incremental: bool = False  # read the session's changed partitions, answer only what changed



class ReplicaFetches:
    """Fetch and ListOffsets on the partitions of a `ReplicaManager` (a part of it)."""

    # ------------------------------------------------------------------ fetch

    def fetch_messages(self, params: FetchParams, respond: Callable[[dict], None]) -> None:
        """Reads now if `min_bytes` are there (or on error / max_wait 0), else parks the fetch."""
        if params.replica_id >= 0:
            self._update_follower_fetch_states(params)
        if params.max_wait_ms <= 0 or params.min_bytes <= 0 or not (params.partitions or params.incremental):
            respond(self.read_for_fetch(params))
            return
        operation = DelayedFetch(self, params, respond)  # answers at once if it can
        if params.session is not None:
            keys = [params.session.wake_key]
        elif params.replica_id >= 0:  # thousands of partitions: one key, not one per partition
            keys = [ReplicaFetchKey(params.replica_id)]
        else:
            keys = [(p.topic, p.partition) for p in params.partitions]
        self.fetch_purgatory.try_complete_else_watch(operation, keys)

    def _wake_fetches(self, key: TopicPartition) -> None:
        """Parked fetches that `key`'s new records or new leadership may complete."""
        self._wake_fetches_of([key])

    def _wake_fetches_of(self, keys: list[TopicPartition]) -> None:
        """Parked fetches that the new records or leadership of `keys` may complete, each tried
        once for all of them: consumers' (watching a partition), sessions' (watching their session)
        and the other replicas' (watching their `ReplicaFetchKey`). A LeaderAndIsr of thousands
        would otherwise try the same few follower fetches thousands of times."""
        self._fetchables_changed(keys)
        replicas: set[int] = set()
        hosted = self._partitions
        for key in keys:
            partition = hosted.get(key)
            if partition is not None:
                replicas.update(partition.replicas)
        replicas.discard(self.broker_id)
        for replica in sorted(replicas):
            self.fetch_purgatory.check_and_complete(ReplicaFetchKey(replica))

    def _fetchable_changed(self, key: TopicPartition) -> None:
        """What a fetch of `key` would return may have changed (see `_fetchables_changed`)."""
        self._fetchables_changed([key])

    def _fetchables_changed(self, keys: list[TopicPartition]) -> None:
        """What a fetch of `keys` would return may have changed: the ISR check looks at them next,
        the sessions holding them mark them, a new `fetch_generation`, then the fetches watching
        the keys or those sessions are tried. (Marked first: a parked fetch that sees the new
        generation sees the marks too.)"""
        if self.isr_manager is not None:
            self.isr_manager.touch(keys)
        sessions: dict = {}  # wake keys, in order
        for key in keys:
            for session in self.fetch_sessions.mark_changed(key):
                sessions[session.wake_key] = None
        self.fetch_generation = next(self._fetch_generations)
        for key in keys:
            self.fetch_purgatory.check_and_complete(key)
        for wake_key in sessions:
            self.fetch_purgatory.check_and_complete(wake_key)

    def session_fetch_ms(self, replica_id: int, key: TopicPartition) -> int:
        """When follower `replica_id` last fetched `key` without naming it (0 if it never did)."""
        return self.fetch_sessions.last_fetch_ms(replica_id, key)

    def _settle_session_catch_up(self, partition: Partition) -> None:
        """Before an append to a partition led here (under its lock): a follower whose session
        holds it at the log end was caught up at the session's last fetch. Once the log end moves
        that no longer follows from the session, so it is written down now."""
        sessions = self.fetch_sessions.holders(partition.key)
        if sessions:
            end = partition.log.log_end_offset
            for session in sessions:
                follower = partition.followers.get(session.replica_id)
                if (follower is not None and follower.log_end_offset >= end
                        and session.last_used_ms > follower.last_caught_up_ms):
                    follower.last_caught_up_ms = session.last_used_ms

    def _update_follower_fetch_states(self, params: FetchParams) -> None:
        now = self.clock.monotonic_ms()
        replica_id = params.replica_id
        hosted = self._partitions
        broker_id, isr_manager = self.broker_id, self.isr_manager
        if params.session is not None and isr_manager is not None:
            # partitions the follower is out of the ISR of may be idle, and so never named: its
            # fetch at the offset the session holds may be what brings it back
            held = params.session.partitions
            for key in isr_manager.outside_isr(replica_id):
                if key in held:
                    isr_manager.request_expand(key)
        named = []
        for request in params.partitions:
            partition = hosted.get((request.topic, request.partition))
            if partition is None or partition.leader_id != broker_id:
                continue
            named.append(partition.key)
            if partition.update_follower_fetch_state(replica_id, request.fetch_offset, now):
                self.high_watermark_maybe_moved(partition.key)
            if isr_manager is not None and replica_id not in partition.isr:
                isr_manager.request_expand(partition.key)
        if isr_manager is not None and named:
            isr_manager.touch(named)

    def high_watermark_maybe_moved(self, key: TopicPartition) -> None:
        """Acks=all produces and consumer fetches waiting on `key` may complete now."""
        self.produce_purgatory.check_and_complete(key)
        self._fetchable_changed(key)

    def _fetched_leader(self, request: FetchPartition) -> Partition:
        """`leader_partition` for one partition of a fetch, the common case (led here, the epoch
        matching or not given) first: a follower's fetch asks for thousands at a time."""
        partition = self._partitions.get((request.topic, request.partition))
        epoch = request.current_leader_epoch
        if partition is None or partition.leader_id != self.broker_id or (0 <= epoch != partition.leader_epoch):
            partition = self.leader_partition(request.topic, request.partition, epoch)
        return partition

    def leader_throttles(self, replica_id: int, partition: Partition) -> bool:
        """Whether a follower's fetch of `partition` gets no records now: the partition is
        throttled here, the follower is out of its ISR, and the leader quota is over its bound."""
        quota = self.leader_quota
        return (quota.has_throttled and replica_id not in partition.isr and quota.is_throttled(partition.key)
                and quota.is_exceeded())

    def fetch_is_satisfied(self, params: FetchParams) -> bool:
        accumulated = 0
        from_follower = params.replica_id >= 0
        for request in self._partitions_to_check(params):
            try:
                partition = self._fetched_leader(request)
                log = partition.log
            except KafkaError:
                return True  # an error answers at once
            if from_follower and self.leader_throttles(params.replica_id, partition):
                continue  # its records wait for the quota: they do not complete the fetch
            end_offset = log.log_end_offset if from_follower else log.high_watermark
            fetch_offset = request.fetch_offset
            if fetch_offset > end_offset or fetch_offset < log.log_start_offset:
                return True  # out of range: answer now
            if params.read_committed and not from_follower:
                end_offset = log.last_stable_offset
            if fetch_offset >= end_offset:
                continue  # the idle case: nothing new (or nothing stable yet)
            if params.min_bytes <= HEADER_SIZE:
                return True  # any new batch is enough: no need to read it twice
            data = log.read(fetch_offset, params.min_bytes, max_offset=end_offset, min_one_message=True)
            accumulated += len(data.records)
            if accumulated >= params.min_bytes:
                return True
        return False

    def _partitions_to_check(self, params: FetchParams):
        """What a parked fetch looks at: the named partitions, or its session's changed ones."""
        if not params.incremental:
            return params.partitions
        return [FetchPartition(topic, index, cached.fetch_offset, cached.max_bytes, cached.leader_epoch)
                for (topic, index), cached in self.fetch_sessions.peek_changed(params.session)]

    def read_for_fetch(self, params: FetchParams) -> dict[TopicPartition, LogReadResult]:
        """The fetch's answer: every named partition, or in a session only what changed."""
        session = params.session
        if session is None:
            return self._read(params, params.partitions)[0]
        taken = self.fetch_sessions.take_changed(session)
        if params.incremental:
            requests = [FetchPartition(topic, index, cached.fetch_offset, cached.max_bytes, cached.leader_epoch)
                        for (topic, index), cached in taken]
        else:
            requests = params.partitions
        results, unfinished = self._read(params, requests)
        cached_partitions = session.partitions
        answer = {}
        for key, result in results.items():
            cached = cached_partitions.get(key)
            if cached is None:  # forgotten meanwhile
                continue
            if (params.incremental and not result.records and result.error_code == Errors.NONE
                    and result.high_watermark == cached.high_watermark
                    and result.last_stable_offset == cached.last_stable_offset
                    and result.log_start_offset == cached.log_start_offset):
                continue
            cached.high_watermark = result.high_watermark
            cached.last_stable_offset = result.last_stable_offset
            cached.log_start_offset = result.log_start_offset
            answer[key] = result
        if unfinished:  # those passed over first, those served after them
            served = [key for key in unfinished if key in answer and answer[key].records]
            passed_over = [key for key in unfinished if key not in answer or not answer[key].records]
            self.fetch_sessions.mark_unfinished(session, passed_over + served)
        return answer

    def _read(self, params: FetchParams, requests) -> tuple[dict[TopicPartition, LogReadResult], list]:
        """Reads `requests`; also the partitions left with more to read (or an error): a session
        must look at them again even if nothing changes."""
        results: dict[TopicPartition, LogReadResult] = {}
        unfinished = []
        remaining = params.max_bytes
        min_one_message = True
        from_follower = params.replica_id >= 0
        read_committed = params.read_committed and not from_follower
        leader_quota = self.leader_quota
        served: dict[str, int] = {}  # record bytes by topic, for the traffic counters
        served_messages: dict[str, int] = {}  # records served by topic (offsets from the fetch offset)
        for request in requests:
            # a plain tuple equals (and hashes as) the TopicPartition and costs a tenth as much to
            # build: a follower's fetch carries every partition it follows from this leader
            key = (request.topic, request.partition)
            try:
                partition = self._fetched_leader(request)
                log = partition.log
                high_watermark = log.high_watermark
                last_stable = log.last_stable_offset
                end_offset = (log.log_end_offset if from_follower
                              else last_stable if read_committed else high_watermark)
                if request.fetch_offset == end_offset:  # the idle case: nothing to read
                    results[key] = LogReadResult(Errors.NONE, high_watermark, log.log_start_offset, b"",
                                               last_stable_offset=last_stable)
                    continue
                unfinished.append(key)  # records to read, returned now or not
                limit = min(request.partition_max_bytes, remaining)
                throttled = from_follower and leader_quota.has_throttled and leader_quota.is_throttled(key)
                if (limit <= 0 and not min_one_message) or (
                        throttled and params.replica_id not in partition.isr and leader_quota.is_exceeded()):
                    records = b""
                else:
                    data = log.read(request.fetch_offset, limit, max_offset=end_offset,
                                    min_one_message=min_one_message)
                    records = bytes(data.records)
                aborted = ()
                if records:
                    min_one_message = False
                    remaining -= len(records)
                    if throttled:
                        leader_quota.record(len(records))
                    served[request.topic] = served.get(request.topic, 0) + len(records)
                    after = next_offset_after(records)
                    if after is not None:
                        served_messages[request.topic] = (served_messages.get(request.topic, 0)
                                                          + max(0, after - request.fetch_offset))
                    if read_committed:
                        aborted = tuple(log.collect_aborted_transactions(request.fetch_offset, after or end_offset))
                results[key] = LogReadResult(Errors.NONE, high_watermark, log.log_start_offset, records, "",
                                           last_stable, aborted)
            except KafkaError as exc:
                partition = self._partitions.get(key)
                hw = partition.high_watermark if partition is not None else -1
                start = partition.log.log_start_offset if partition is not None else -1
                results[key] = LogReadResult(exc.code, hw, start, b"", str(exc))
                unfinished.append(key)
            except Exception as exc:
                logger.exception("fetch from %s-%d failed", *key)
                results[key] = LogReadResult(Errors.UNKNOWN_SERVER_ERROR, error_message=str(exc))
                unfinished.append(key)
        if served:
            self.topic_stats.fetched(served, served_messages, from_follower)
        return results, unfinished


    # ------------------------------------------------------------------ offsets

    def list_offset(self, topic: str, index: int, timestamp: int, current_leader_epoch: int = -1,
                    replica_id: int = CONSUMER_REPLICA_ID, read_committed: bool = False) -> ListOffsetResult:
        """LATEST is the log end for replicas, the last stable offset for read_committed
        clients, the high watermark for others; a timestamp's offset must be below it too."""
        try:
            partition = self.leader_partition(topic, index, current_leader_epoch)
            log = partition.log
            limit = (log.log_end_offset if replica_id >= 0
                     else log.last_stable_offset if read_committed else partition.high_watermark)
            if timestamp == EARLIEST_TIMESTAMP:
                return ListOffsetResult(Errors.NONE, -1, log.log_start_offset, partition.leader_epoch)
            if timestamp == LATEST_TIMESTAMP:
                return ListOffsetResult(Errors.NONE, -1, limit, partition.leader_epoch)
            found = log.fetch_offset_by_timestamp(timestamp)
            if found is None or found.offset >= limit:
                return ListOffsetResult(Errors.NONE, -1, -1, partition.leader_epoch)
            epoch = found.leader_epoch if found.leader_epoch is not None else partition.leader_epoch
            return ListOffsetResult(Errors.NONE, found.timestamp, found.offset, epoch)
        except KafkaError as exc:
            return ListOffsetResult(exc.code)
