"""The append part of the ReplicaManager: produced batches appended to leader logs (acks 0, 1 and all,
`min.insync.replicas`; acks=all parks in the produce purgatory until the ISR holds them), produces
of a live coordinator with the COORDINATOR origin, `write_txn_markers` (a COMMIT or ABORT control
batch per marker and partition, fenced by producer and coordinator epochs, answered once replicated
or with REQUEST_TIMED_OUT), and a led partition's active producers."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from services.broker.delayed import DelayedProduce
from services.broker.log.errors import KafkaStorageError
from services.broker.log.validation import AppendOrigin
from services.common.errors import Errors, KafkaError
from services.common.records.builder import build_control_batch
from services.common.shared_types import (
    ProduceResult,
    ProducerState,
    TxnMarker,
)
from services.common.topic_partition import TopicPartition

logger = logging.getLogger(__name__)


def is_internal_topic(topic: str) -> bool:
    return topic.startswith("__")


class ReplicaAppends:
    """Produce and transaction markers on the partitions of a `ReplicaManager` (a part of it)."""

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
            finished = self._end_appends(entries)
            if finished:
                self._wake_fetches_of(finished)
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
                    self._settle_session_catch_up(partition)
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
            except KafkaStorageError as exc:  # a disk error takes the log dir offline
                self._on_storage_error(key, exc)
                results[key] = ProduceResult.failed(Errors.KAFKA_STORAGE_ERROR, str(exc))
            except KafkaError as exc:
                results[key] = ProduceResult.failed(exc.code, str(exc), getattr(exc, "record_errors", ()))
            except OSError as exc:
                self._on_storage_error(key, exc)
                results[key] = ProduceResult.failed(Errors.KAFKA_STORAGE_ERROR, str(exc))
            except Exception as exc:  # a programming error: never crash the request thread
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
        """(error code, active producers) of this broker's replica of a partition, leader or follower
        (as Kafka answers DescribeProducers: an admin client may ask any replica)."""
        try:
            log = self.hosted_partition(topic, index).log
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
        if partition is None and key in self._offline_partitions:
            return Errors.KAFKA_STORAGE_ERROR
        if partition is None or not partition.is_leader:
            return Errors.NOT_LEADER_OR_FOLLOWER
        if partition.high_watermark >= required_offset:
            min_isr = partition.log.config.min_insync_replicas
            return Errors.NONE if len(partition.isr) >= min_isr else \
                Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return None
