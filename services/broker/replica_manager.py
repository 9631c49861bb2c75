"""ReplicaManager: the partitions this broker hosts, and produce, fetch and list-offsets on them.

It applies the controller's LeaderAndIsr and StopReplica (fenced by controller epoch), appends
produced batches to leader logs (acks 0, 1 and all, `min.insync.replicas`), serves fetches up to
the high watermark to consumers and up to the log end to followers (whose fetches move the high
watermark and may grow the ISR; long polls park in the fetch purgatory and are tried after the
last of overlapping appends to a partition, so a burst of produces travels in one response),
drives the follower side of replication for the fetcher threads (truncation to the divergence
point, appends with the leader's offsets), checkpoints high watermarks, and answers ListOffsets
and OffsetForLeaderEpoch.

Transactions: produces from a live coordinator append with the COORDINATOR origin (no sequence
numbers needed); `write_txn_markers` appends a COMMIT or ABORT control batch per marker and
partition, fenced by producer and coordinator epochs, answered once replicated (acks=all through
the produce purgatory) or with REQUEST_TIMED_OUT. A read_committed consumer reads below the last
stable offset, not the high watermark, and gets the aborted transactions of the returned range;
every fetch answer carries the last stable offset. `describe_producers` lists a led partition's
active producers.
Results are plain tuples with Kafka error codes; the gRPC servicer turns them into responses.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import NamedTuple

from services.broker.delayed import DelayedFetch, DelayedProduce
from services.broker.log.checkpoints import OffsetCheckpointFile
from services.broker.log.leader_epoch import UNDEFINED_EPOCH
from services.broker.log.validation import AppendOrigin
from services.broker.metadata_cache import MetadataCache
from services.broker.partition import Partition
from services.broker.purgatory import DelayedOperationPurgatory
from services.broker.topic_stats import BrokerTopicStats
from services.common.clock import SYSTEM_CLOCK
from services.common.errors import Errors, KafkaError
from services.common.records.batch import HEADER_SIZE, next_offset_after
from services.common.records.builder import build_control_batch
from services.common.shared_types import (
    CONSUMER_REPLICA_ID,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    PartitionStateInfo,
    ProduceResult,
    ProducerState,
    TxnMarker,
)
from services.common.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

HIGH_WATERMARK_CHECKPOINT_FILE = "replication-offset-checkpoint"
LEADER_AND_ISR_CONCURRENCY = 8  # partitions of one LeaderAndIsr applied at a time


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
    partitions: tuple[FetchPartition, ...]
    read_committed: bool = False  # consumers only: read below the last stable offset


def is_internal_topic(topic: str) -> bool:
    return topic.startswith("__")


class ReplicaManager:
    def __init__(self, broker_id: int, log_manager, metadata_cache: MetadataCache,
                 topic_config: Callable[[str], dict[str, str]] | None = None,
                 fetch_purgatory: DelayedOperationPurgatory | None = None,
                 produce_purgatory: DelayedOperationPurgatory | None = None, clock=SYSTEM_CLOCK) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.metadata_cache = metadata_cache
        self.clock = clock
        self.fetcher_manager = None  # set by the server: follower replication
        self.isr_manager = None  # set by the server: leader-side ISR changes
        self._hw_checkpoints = {d: OffsetCheckpointFile(f"{d}/{HIGH_WATERMARK_CHECKPOINT_FILE}")
                                for d in getattr(log_manager, "log_dirs", [])}
        self._checkpointed_hw: dict[TopicPartition, int] = {}
        for checkpoint in self._hw_checkpoints.values():
            try:
                self._checkpointed_hw.update({tuple(tp): offset for tp, offset in checkpoint.read().items()})
            except OSError:
                logger.exception("cannot read %s; high watermarks start at the log start", checkpoint)
        self.topic_config = topic_config or (lambda topic: {})
        self.fetch_purgatory = fetch_purgatory or DelayedOperationPurgatory("Fetch", broker_id=broker_id)
        self.produce_purgatory = (produce_purgatory
                                  or DelayedOperationPurgatory("Produce", broker_id=broker_id))
        self.controller_epoch = -1
        self._lock = threading.RLock()
        self._fetcher_update_lock = threading.Lock()
        self._partitions: dict[TopicPartition, Partition] = {}
        self._appends_lock = threading.Lock()
        self._appends_in_progress: dict[TopicPartition, int] = {}
        # bumped before parked fetches are tried for any change (records, high watermark,
        # leadership): a parked fetch that already looked at this generation need not look again
        self._fetch_generations = itertools.count(1)
        self.fetch_generation = 0
        self._leader_and_isr_pool = ThreadPoolExecutor(LEADER_AND_ISR_CONCURRENCY,
                                                       thread_name_prefix=f"leader-and-isr-{broker_id}")
        self.delayed_fetch_expired = 0
        self.delayed_produce_expired = 0
        self.topic_stats = BrokerTopicStats()

    # ------------------------------------------------------------------ controller requests

    def become_leader_or_follower(self, controller_id: int, controller_epoch: int,
                                  states: list[PartitionStateInfo]) -> dict[TopicPartition, int]:
        """Applies LeaderAndIsr; returns an error code per partition (0 when applied)."""
        started_ms = self.clock.monotonic_ms()
        with self._lock:
            if controller_epoch < self.controller_epoch:
                raise KafkaError(f"controller {controller_id} epoch {controller_epoch} is older than "
                                 f"{self.controller_epoch}", error=Errors.STALE_CONTROLLER_EPOCH)
            self.controller_epoch = controller_epoch
            errors: dict[TopicPartition, int] = {}
            changed = []
            by_key: dict[TopicPartition, PartitionStateInfo] = {}  # one state per partition
            for state in states:
                if self.broker_id in state.replicas:
                    by_key[state.partition] = state
                else:
                    errors[state.partition] = Errors.UNKNOWN_TOPIC_OR_PARTITION
            hosted = list(by_key.values())
            self._configure_new_topics(hosted)
            now = self.clock.monotonic_ms()
            # opening thousands of new logs is file creation (and a leader epoch checkpoint per
            # leader): done several partitions at a time, each under its own partition's lock
            applied = self._leader_and_isr_pool.map(lambda state: self._apply_leader_and_isr(state, now), hosted)
            for state, error in zip(hosted, applied, strict=True):
                key = state.partition
                errors[key] = error
                if error == Errors.NONE:
                    changed.append(key)
            changed_partitions = [self._partitions[key] for key in changed]
        # outside the manager lock: stopping a fetcher waits for its thread, which may be in
        # truncate_follower waiting for that lock
        with self._fetcher_update_lock:
            self._update_fetchers(changed_partitions)
        for key in changed:
            self._complete_delayed(key)
        leaders = sum(1 for p in changed_partitions if p.is_leader)
        logger.info("applied LeaderAndIsr of %d partitions from controller %d (epoch %d): %d leaders, "
                    "%d followers, %d not applied, in %d ms", len(states), controller_id, controller_epoch,
                    leaders, len(changed) - leaders, len(states) - len(changed),
                    self.clock.monotonic_ms() - started_ms)
        return errors

    def _update_fetchers(self, partitions: list[Partition]) -> None:
        """Leaders stop fetching, followers fetch from their leader; reads each partition's current
        state, so concurrent LeaderAndIsr requests cannot leave a stale assignment behind."""
        if self.fetcher_manager is None:
            return
        leaders = [p.key for p in partitions if p.is_leader or p.leader_id < 0]
        followers = {p.key: (p.leader_id, p.leader_epoch) for p in partitions
                     if not p.is_leader and p.leader_id >= 0}
        if leaders:
            self.fetcher_manager.remove_fetchers(leaders)
        if followers:
            self.fetcher_manager.add_fetchers(followers)

    def stop_replicas(self, controller_id: int, controller_epoch: int,
                      partitions: list[tuple[str, int, bool]]) -> dict[TopicPartition, int]:
        """Applies StopReplica: stop serving (and with delete, remove the log) of each partition."""
        if controller_epoch < self.controller_epoch:
            raise KafkaError(f"controller {controller_id} epoch {controller_epoch} is older than "
                             f"{self.controller_epoch}", error=Errors.STALE_CONTROLLER_EPOCH)
        if self.fetcher_manager is not None:
            with self._fetcher_update_lock:
                self.fetcher_manager.remove_fetchers([(t, i) for t, i, _ in partitions])
        with self._lock:
            if controller_epoch < self.controller_epoch:
                raise KafkaError(f"controller {controller_id} epoch {controller_epoch} is older than "
                                 f"{self.controller_epoch}", error=Errors.STALE_CONTROLLER_EPOCH)
            self.controller_epoch = controller_epoch
            errors = {}
            removed = []
            deleted = []
            for topic, index, delete in partitions:
                key = TopicPartition(topic, index)
                partition = self._partitions.get(key)
                if partition is not None:
                    partition.leader_id = -1
                    removed.append(key)
                if delete:
                    self._partitions.pop(key, None)
                    self._checkpointed_hw.pop(key, None)
                    deleted.append(key)
                errors[key] = Errors.NONE
            # one rename per log, then one fsync and one write of each checkpoint per log dir
            _, failed = self.log_manager.async_delete_logs(deleted)
            errors.update({tuple(tp): exc.code for tp, exc in failed.items()})
            self._forget_deleted_topics(deleted)
        for key in removed:
            self._complete_delayed(key)
        return errors

    def _forget_deleted_topics(self, deleted: list[TopicPartition]) -> None:
        """Drops the traffic counters of topics none of whose partitions is left here."""
        if not deleted:
            return
        hosted = {topic for topic, _ in self._partitions}
        for topic in {topic for topic, _ in deleted} - hosted:
            self.topic_stats.remove(topic)

    def _configure_new_topics(self, states: list[PartitionStateInfo]) -> None:
        """Reads the config of each topic with a log to create, once per request, before any is."""
        topics = {state.partition.topic for state in states if state.partition not in self._partitions
                  and self.log_manager.get_log(state.partition) is None}
        for topic in sorted(topics):
            overrides = self.topic_config(topic)
            if overrides:
                self.log_manager.update_topic_config(topic, overrides)

    def _apply_leader_and_isr(self, state: PartitionStateInfo, now_ms: int) -> int:
        """One partition's part of LeaderAndIsr: 0 when applied, else its error code."""
        try:
            partition = self._get_or_create_partition(*state.partition)
        except KafkaError as exc:
            logger.error("cannot open log of %s: %s", state.partition, exc)
            return exc.code
        if not partition.apply_leader_and_isr(state, now_ms):
            return Errors.STALE_CONTROLLER_EPOCH
        logger.debug("%s: %s (leader %d, epoch %d, isr %s)", state.partition,
                     "leader" if partition.is_leader else "follower", state.leader, state.leader_epoch,
                     list(state.isr))
        return Errors.NONE

    def _get_or_create_partition(self, topic: str, index: int) -> Partition:
        """The hosted partition, its log created if missing (the topic's config read before)."""
        key = TopicPartition(topic, index)
        partition = self._partitions.get(key)
        if partition is None:
            log = self.log_manager.get_or_create_log(key)
            checkpointed = self._checkpointed_hw.pop(key, None)
            if checkpointed is not None:
                log.update_high_watermark(min(max(checkpointed, log.log_start_offset), log.log_end_offset))
            partition = Partition(topic, index, self.broker_id, log)
            self._partitions[key] = partition
        return partition

    def partition(self, topic: str, index: int) -> Partition | None:
        return self._partitions.get((topic, index))

    def partitions(self) -> list[Partition]:
        return list(self._partitions.values())

    def leader_partition(self, topic: str, index: int, leader_epoch: int = -1) -> Partition:
        partition = self._partitions.get((topic, index))
        if partition is None:
            known = self.metadata_cache.partition(topic, index) is not None
            raise KafkaError(f"{topic}-{index} is not hosted here",
                             error=Errors.NOT_LEADER_OR_FOLLOWER if known else Errors.UNKNOWN_TOPIC_OR_PARTITION)
        partition.require_leader(leader_epoch)
        return partition

    # ------------------------------------------------------------------ produce

    def append_records(self, acks: int, timeout_ms: int, entries: dict[TopicPartition, bytes],
                       respond: Callable[[dict[TopicPartition, ProduceResult]], None],
                       internal_topics_allowed: bool = False, origin: AppendOrigin = AppendOrigin.CLIENT) -> None:
        """Appends to leader logs, then responds at once (acks 0/1) or when replicated (acks=-1)."""
        if acks not in (0, 1, -1):
            respond({key: ProduceResult.failed(Errors.INVALID_REQUIRED_ACKS, f"acks={acks} is not 0, 1 or -1")
                     for key in entries})
            return
        results: dict[TopicPartition, ProduceResult] = {}
        pending: dict[TopicPartition, int] = {}
        self._begin_appends(entries)
        try:
            self._append_to_leaders(acks, entries, results, pending, internal_topics_allowed, origin)
        finally:
            for key in self._end_appends(entries):
                self._wake_fetches(key)
        if not pending:
            respond(results)
            return
        operation = DelayedProduce(self, timeout_ms, pending, results, respond)
        self.produce_purgatory.try_complete_else_watch(operation, list(pending))

    def _begin_appends(self, keys) -> None:
        with self._appends_lock:
            for key in keys:
                self._appends_in_progress[key] = self._appends_in_progress.get(key, 0) + 1

    def _end_appends(self, keys) -> list[TopicPartition]:
        """The partitions this was the last append in progress of. Parked fetches are tried only
        after the last of the appends that overlapped, so a burst of produces (the producers whose
        requests one follower acknowledgement completed, say) reaches followers in one fetch
        response instead of one for the first append and another for the rest."""
        last = []
        with self._appends_lock:
            for key in keys:
                left = self._appends_in_progress[key] - 1
                if left:
                    self._appends_in_progress[key] = left
                else:
                    del self._appends_in_progress[key]
                    last.append(key)
        return last

    def _append_to_leaders(self, acks: int, entries: dict[TopicPartition, bytes],
                           results: dict[TopicPartition, ProduceResult], pending: dict[TopicPartition, int],
                           internal_topics_allowed: bool, origin: AppendOrigin) -> None:
        for key, records in entries.items():
            topic, index = key
            if is_internal_topic(topic) and not internal_topics_allowed:
                results[key] = ProduceResult.failed(Errors.INVALID_TOPIC_EXCEPTION,
                                                    f"cannot append to internal topic {topic}")
                continue
            try:
                partition = self.leader_partition(topic, index)
                with partition.lock:
                    min_isr = partition.log.config.min_insync_replicas
                    if acks == -1 and len(partition.isr) < min_isr:
                        raise KafkaError(f"{topic}-{index}: {len(partition.isr)} in-sync replicas, "
                                         f"{min_isr} required", error=Errors.NOT_ENOUGH_REPLICAS)
                    info = partition.log.append_as_leader(records, partition.leader_epoch, origin)
                    # a producer's retry of a batch already in the log wrote nothing and answers
                    # with the original batch's offsets (acks=-1 still waits for that batch)
                    hw_moved = not info.duplicate and partition.maybe_increment_high_watermark()
                results[key] = ProduceResult(info.first_offset, Errors.NONE, info.log_append_time_ms,
                                             info.log_start_offset)
                if not info.duplicate:
                    self.topic_stats.appended(topic, info.valid_bytes, info.num_records)
                if acks == -1:
                    pending[key] = info.last_offset + 1
                if hw_moved:
                    self.produce_purgatory.check_and_complete(key)
            except KafkaError as exc:
                results[key] = ProduceResult.failed(exc.code, str(exc), getattr(exc, "record_errors", ()))
            except Exception as exc:  # an I/O or programming error: never crash the request thread
                logger.exception("append to %s-%d failed", topic, index)
                results[key] = ProduceResult.failed(Errors.UNKNOWN_SERVER_ERROR, str(exc))

    def write_txn_markers(self, markers: list[tuple[TxnMarker, tuple[TopicPartition, ...]]], timeout_ms: int,
                          respond: Callable[[list[dict[TopicPartition, int]]], None]) -> None:
        """Appends each marker to each of its partitions as leader (acks=all); responds once every
        marker's partitions are answered, with an error code per partition per marker."""
        if not markers:
            respond([])
            return
        codes: list[dict[TopicPartition, int] | None] = [None] * len(markers)
        left = [len(markers)]
        lock = threading.Lock()

        def marker_done(i: int, results: dict[TopicPartition, ProduceResult]) -> None:
            with lock:
                codes[i] = {key: result.error_code for key, result in results.items()}
                left[0] -= 1
                done = left[0] == 0
            if done:
                respond(codes)

        for i, (marker, partitions) in enumerate(markers):
            batch = build_control_batch(marker.commit, producer_id=marker.producer_id,
                                        producer_epoch=marker.producer_epoch,
                                        coordinator_epoch=marker.coordinator_epoch,
                                        timestamp_ms=self.clock.time_ms())
            entries = {TopicPartition(*key): batch for key in partitions}
            self.append_records(-1, timeout_ms, entries, lambda results, i=i: marker_done(i, results),
                                internal_topics_allowed=True, origin=AppendOrigin.TXN_MARKER)

    def describe_producers(self, topic: str, index: int) -> tuple[int, list[ProducerState]]:
        """(error code, active producers) of a partition led here."""
        try:
            log = self.leader_partition(topic, index).log
        except KafkaError as exc:
            return exc.code, []
        producers = []
        for entry in log.active_producers():
            first = entry.current_txn_first_offset
            producers.append(ProducerState(entry.producer_id, entry.producer_epoch, entry.last_seq,
                                           entry.last_timestamp, entry.coordinator_epoch,
                                           -1 if first is None else first))
        return Errors.NONE, producers

    def produce_acked(self, key: TopicPartition, required_offset: int) -> int | None:
        """None while still waiting; 0 once the HW reached `required_offset`; an error code otherwise."""
        partition = self._partitions.get(key)
        if partition is None or not partition.is_leader:
            return Errors.NOT_LEADER_OR_FOLLOWER
        if partition.high_watermark >= required_offset:
            min_isr = partition.log.config.min_insync_replicas
            return Errors.NONE if len(partition.isr) >= min_isr else \
                Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return None

    # ------------------------------------------------------------------ fetch

    def fetch_messages(self, params: FetchParams, respond: Callable[[dict], None]) -> None:
        """Reads now if `min_bytes` are there (or on error / max_wait 0), else parks the fetch."""
        if params.replica_id >= 0:
            self._update_follower_fetch_states(params)
        if params.max_wait_ms <= 0 or params.min_bytes <= 0 or not params.partitions:
            respond(self.read_for_fetch(params))
            return
        operation = DelayedFetch(self, params, respond)  # answers at once if it can
        if params.replica_id >= 0:  # thousands of partitions: one key, not one per partition
            keys = [ReplicaFetchKey(params.replica_id)]
        else:
            keys = [(p.topic, p.partition) for p in params.partitions]
        self.fetch_purgatory.try_complete_else_watch(operation, keys)

    def _wake_fetches(self, key: TopicPartition) -> None:
        """Parked fetches that `key`'s new records or new leadership may complete: consumers'
        (watching the partition) and its other replicas' (watching their `ReplicaFetchKey`)."""
        self._fetchable_changed(key)
        partition = self._partitions.get(key)
        if partition is not None:
            for replica in partition.replicas:
                if replica != self.broker_id:
                    self.fetch_purgatory.check_and_complete(ReplicaFetchKey(replica))

    def _fetchable_changed(self, key: TopicPartition) -> None:
        """What a fetch of `key` would return may have changed: a new `fetch_generation`, then
        the fetches watching `key` are tried."""
        self.fetch_generation = next(self._fetch_generations)
        self.fetch_purgatory.check_and_complete(key)

    def _update_follower_fetch_states(self, params: FetchParams) -> None:
        now = self.clock.monotonic_ms()
        replica_id = params.replica_id
        hosted = self._partitions
        broker_id, isr_manager = self.broker_id, self.isr_manager
        for request in params.partitions:
            partition = hosted.get((request.topic, request.partition))
            if partition is None or partition.leader_id != broker_id:
                continue
            if partition.update_follower_fetch_state(replica_id, request.fetch_offset, now):
                self.high_watermark_maybe_moved(partition.key)
            if isr_manager is not None and replica_id not in partition.isr:
                isr_manager.request_expand(partition.key)

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

    def fetch_is_satisfied(self, params: FetchParams) -> bool:
        accumulated = 0
        from_follower = params.replica_id >= 0
        for request in params.partitions:
            try:
                log = self._fetched_leader(request).log
            except KafkaError:
                return True  # an error answers at once
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

    def read_for_fetch(self, params: FetchParams) -> dict[TopicPartition, LogReadResult]:
        results: dict[TopicPartition, LogReadResult] = {}
        remaining = params.max_bytes
        min_one_message = True
        from_follower = params.replica_id >= 0
        read_committed = params.read_committed and not from_follower
        served: dict[str, int] = {}  # record bytes by topic, for the traffic counters
        served_messages: dict[str, int] = {}  # records served by topic (offsets from the fetch offset)
        for request in params.partitions:
            # a plain tuple equals (and hashes as) the TopicPartition and costs a tenth as much to
            # build: a follower's fetch carries every partition it follows from this leader
            key = (request.topic, request.partition)
            try:
                log = self._fetched_leader(request).log
                high_watermark = log.high_watermark
                last_stable = log.last_stable_offset
                end_offset = (log.log_end_offset if from_follower
                              else last_stable if read_committed else high_watermark)
                if request.fetch_offset == end_offset:  # the idle case: nothing to read
                    results[key] = LogReadResult(Errors.NONE, high_watermark, log.log_start_offset, b"",
                                               last_stable_offset=last_stable)
                    continue
                limit = min(request.partition_max_bytes, remaining)
                if limit <= 0 and not min_one_message:
                    records = b""
                else:
                    data = log.read(request.fetch_offset, limit, max_offset=end_offset,
                                    min_one_message=min_one_message)
                    records = bytes(data.records)
                aborted = ()
                if records:
                    min_one_message = False
                    remaining -= len(records)
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
            except Exception as exc:
                logger.exception("fetch from %s-%d failed", *key)
                results[key] = LogReadResult(Errors.UNKNOWN_SERVER_ERROR, error_message=str(exc))
        if served:
            self.topic_stats.fetched(served, served_messages, from_follower)
        return results

    # ------------------------------------------------------------------ follower side

    def _follower(self, tp: TopicPartition) -> Partition | None:
        partition = self._partitions.get(tp)
        if partition is None or partition.is_leader:
            return None
        return partition

    def latest_local_epoch(self, tp: TopicPartition) -> int | None:
        partition = self._partitions.get(tp)
        return None if partition is None else partition.log.leader_epoch_cache.latest_epoch

    def divergence_offset(self, tp: TopicPartition, requested_epoch: int, leader_epoch: int,
                          leader_end_offset: int) -> int | None:
        """Where the local log stops agreeing with the leader's, from the leader's answer to
        OffsetForLeaderEpoch(requested_epoch); None means "fall back to the high watermark"."""
        partition = self._partitions.get(tp)
        if partition is None or leader_epoch == UNDEFINED_EPOCH or leader_end_offset < 0:
            return None
        log = partition.log
        if leader_epoch == requested_epoch:
            return min(leader_end_offset, log.log_end_offset)
        _epoch, local_end = log.leader_epoch_cache.end_offset_for(leader_epoch, log.log_end_offset)
        return min(leader_end_offset, local_end if local_end >= 0 else log.log_end_offset)

    def truncate_follower(self, tp: TopicPartition, offset: int | None) -> int | None:
        """Truncates a follower's log to `offset` (its high watermark when None); returns the next
        offset to fetch, or None when the partition is no longer followed here."""
        with self._lock:
            partition = self._follower(tp)
            if partition is None:
                return None
            log = partition.log
            target = log.high_watermark if offset is None else offset
            if target < log.log_end_offset:
                logger.info("%s-%d: truncating follower log from %d to %d", tp[0], tp[1],
                            log.log_end_offset, target)
                self.log_manager.truncate_to({tp: target})
            return log.log_end_offset

    def restart_follower_at(self, tp: TopicPartition, offset: int) -> int | None:
        """The leader's log starts after ours ends: start over empty at the leader's log start."""
        with self._lock:
            partition = self._follower(tp)
            if partition is None:
                return None
            logger.info("%s-%d: follower restarts empty at the leader's log start %d", tp[0], tp[1], offset)
            self.log_manager.truncate_fully_and_start_at(tp, offset)
            return partition.log.log_end_offset

    def append_as_follower(self, tp: TopicPartition, records: bytes, leader_high_watermark: int) -> int | None:
        """Appends replicated batches and takes the leader's high watermark (capped at the local
        end); returns the next offset to fetch, or None when the partition is not followed here."""
        partition = self._follower(tp)
        if partition is None:
            return None
        log = partition.log
        with partition.lock:
            if records:
                log.append_as_follower(records)
                self.topic_stats.replicated(len(records))
            high_watermark = min(leader_high_watermark, log.log_end_offset)
            if high_watermark > log.high_watermark:
                log.update_high_watermark(high_watermark)
            end = log.log_end_offset
        if records:
            self._fetchable_changed(tp)
        return end

    def offset_for_leader_epoch(self, topic: str, index: int, current_leader_epoch: int,
                                leader_epoch: int) -> tuple[int, int, int]:
        """(error code, epoch, end offset): the end of `leader_epoch` (or of the largest epoch
        below it) in the leader's log, used by followers to find where to truncate."""
        try:
            partition = self.leader_partition(topic, index, current_leader_epoch)
            log = partition.log
            epoch, end_offset = log.leader_epoch_cache.end_offset_for(leader_epoch, log.log_end_offset)
            return Errors.NONE, epoch, end_offset
        except KafkaError as exc:
            return exc.code, UNDEFINED_EPOCH, -1

    def checkpoint_high_watermarks(self) -> None:
        """Writes `replication-offset-checkpoint` in every log dir (Kafka's offset checkpoint format)."""
        by_dir: dict[str, dict] = {d: {} for d in self._hw_checkpoints}
        for partition in list(self._partitions.values()):
            log = partition.log
            by_dir.setdefault(log.parent_dir, {})[partition.key] = log.high_watermark
        for log_dir, offsets in by_dir.items():
            checkpoint = self._hw_checkpoints.get(log_dir)
            if checkpoint is None:
                continue
            try:
                checkpoint.write(offsets)
            except OSError:
                logger.exception("writing %s failed", checkpoint)

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

    # ------------------------------------------------------------------ housekeeping

    def _complete_delayed(self, key: TopicPartition) -> None:
        self._wake_fetches(key)
        self.produce_purgatory.check_and_complete(key)

    def metrics_delayed_fetch_expired(self) -> None:
        self.delayed_fetch_expired += 1

    def metrics_delayed_produce_expired(self) -> None:
        self.delayed_produce_expired += 1

    def leader_partition_count(self) -> int:
        return sum(1 for p in self._partitions.values() if p.is_leader)

    def stop_fetching(self) -> None:
        """Stops every follower fetcher for good: the broker is leaving."""
        if self.fetcher_manager is not None:
            self.fetcher_manager.shutdown()

    def shutdown(self) -> None:
        if self.fetcher_manager is not None:
            self.fetcher_manager.shutdown()
        if self.isr_manager is not None:
            self.isr_manager.shutdown()
        self._leader_and_isr_pool.shutdown(wait=True)
        self.checkpoint_high_watermarks()
        self.fetch_purgatory.shutdown()
        self.produce_purgatory.shutdown()
