"""The leadership part of the ReplicaManager: the controller's LeaderAndIsr and StopReplica (fenced by
controller epoch) applied to this broker's partitions, the follower fetchers updated to match, and
the follower side of replication for the fetcher threads (truncation to the divergence point,
appends with the leader's offsets and log start offset, OffsetForLeaderEpoch), DeleteRecords on led
partitions, with the high-watermark checkpoints."""

from __future__ import annotations

import logging

from services.broker.log.errors import KafkaStorageError
from services.broker.log.leader_epoch import UNDEFINED_EPOCH
from services.broker.partition import Partition
from services.common.errors import Errors, KafkaError
from services.common.shared_types import (
    PartitionStateInfo,
)
from services.common.topic_partition import TopicPartition

logger = logging.getLogger(__name__)


LEADER_AND_ISR_CONCURRENCY = 8  # partitions of one LeaderAndIsr applied at a time


class ReplicaLeadership:
    """Leadership changes and the follower side of the partitions of a `ReplicaManager` (a part of it)."""

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
            new_here = [state.partition for state in hosted if state.partition not in self._partitions
                        and state.partition not in self._offline_partitions]
            new_logs = [tp for tp in new_here if self.log_manager.get_log(tp) is None]
            unconfigured = self._configure_new_topics({tp.topic for tp in new_logs}, {tp.topic for tp in new_here})
            if unconfigured:  # no log is made with the broker's defaults in place of a topic's overrides
                for state in hosted:
                    if state.partition in new_logs and state.partition.topic in unconfigured:
                        errors[state.partition] = Errors.INVALID_CONFIG
                hosted = [state for state in hosted if state.partition not in errors]
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
        self._complete_delayed_of(changed_partitions)
        leaders = sum(1 for p in changed_partitions if p.is_leader)
        # one line for the request: a line per created log, from eight threads, took seconds
        logger.info("applied LeaderAndIsr of %d partitions from controller %d (epoch %d): %d leaders, "
                    "%d followers, %d not applied, %d logs created, in %d ms", len(states), controller_id,
                    controller_epoch, leaders, len(changed) - leaders, len(states) - len(changed),
                    len(new_logs), self.clock.monotonic_ms() - started_ms)
        return errors

    def _complete_delayed_of(self, partitions: list[Partition]) -> None:
        """`_complete_delayed` of each partition, each parked fetch that may care tried once."""
        keys = [partition.key for partition in partitions]
        self._wake_fetches_of(keys)
        for key in keys:
            self.produce_purgatory.check_and_complete(key)

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
                if key in self._offline_partitions:
                    errors[key] = Errors.KAFKA_STORAGE_ERROR if delete else Errors.NONE
                    continue
                partition = self._partitions.get(key)
                if partition is not None:
                    partition.stop_leading()
                    removed.append(key)
                if delete:
                    self._partitions.pop(key, None)
                    self._partition_set_changes += 1
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

    def _configure_new_topics(self, topics: set[str], newly_hosted: set[str] = frozenset()) -> set[str]:
        """Reads the config of each topic with a log to create (and of each with a partition new
        here, for its replication throttles), once per request, before any log is created.
        Returns the topics whose config could not be read (a malformed znode): their logs are
        not created."""
        unreadable = set()
        for topic in sorted(topics | newly_hosted):
            try:
                overrides = self.topic_config(topic)
            except Exception as exc:
                logger.error("the config of topic %s cannot be read: %s", topic, exc)
                unreadable.add(topic)
                continue
            if overrides and topic in topics:
                self.log_manager.update_topic_config(topic, overrides)
            self.update_replication_throttles(topic, overrides)
        return unreadable

    def _apply_leader_and_isr(self, state: PartitionStateInfo, now_ms: int) -> int:
        """One partition's part of LeaderAndIsr: 0 when applied, else its error code
        (KAFKA_STORAGE_ERROR for a partition in an offline log dir)."""
        if state.partition in self._offline_partitions:
            return Errors.KAFKA_STORAGE_ERROR
        try:
            partition = self._get_or_create_partition(*state.partition, is_new=state.is_new)
        except KafkaError as exc:
            logger.error("cannot open log of %s: %s", state.partition, exc)
            if exc.code == Errors.KAFKA_STORAGE_ERROR:
                self._offline_partitions.add(state.partition)  # until the broker restarts, as Kafka
            return exc.code
        try:
            if not partition.apply_leader_and_isr(state, now_ms):
                return Errors.STALE_CONTROLLER_EPOCH
        except KafkaStorageError as exc:
            self._on_storage_error(partition.key, exc)
            return Errors.KAFKA_STORAGE_ERROR
        logger.debug("%s: %s (leader %d, epoch %d, isr %s)", state.partition,
                     "leader" if partition.is_leader else "follower", state.leader, state.leader_epoch,
                     list(state.isr))
        return Errors.NONE

    def _get_or_create_partition(self, topic: str, index: int, is_new: bool = True) -> Partition:
        """The hosted partition, its log created if missing (the topic's config read before; not
        for a partition that is not new while a log dir is offline: KAFKA_STORAGE_ERROR)."""
        key = TopicPartition(topic, index)
        partition = self._partitions.get(key)
        if partition is None:
            log = self.log_manager.get_or_create_log(key, is_new)
            checkpointed = self._checkpointed_hw.pop(key, None)
            if checkpointed is not None:
                log.update_high_watermark(min(max(checkpointed, log.log_start_offset), log.log_end_offset))
            partition = Partition(topic, index, self.broker_id, log)
            self._partitions[key] = partition
            self._partition_set_changes += 1
        return partition

    def partition(self, topic: str, index: int) -> Partition | None:
        return self._partitions.get((topic, index))

    def partitions(self) -> list[Partition]:
        return list(self._partitions.values())

    def leader_partition(self, topic: str, index: int, leader_epoch: int = -1) -> Partition:
        partition = self.hosted_partition(topic, index)
        partition.require_leader(leader_epoch)
        return partition

    def hosted_partition(self, topic: str, index: int) -> Partition:
        """This broker's replica of the partition, leader or follower."""
        partition = self._partitions.get((topic, index))
        if partition is None:
            if (topic, index) in self._offline_partitions:
                raise self.offline_error((topic, index))
            known = self.metadata_cache.partition(topic, index) is not None
            raise KafkaError(f"{topic}-{index} is not hosted here",
                             error=Errors.NOT_LEADER_OR_FOLLOWER if known else Errors.UNKNOWN_TOPIC_OR_PARTITION)
        return partition


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
                try:
                    self.log_manager.truncate_to({tp: target})
                except KafkaStorageError as exc:
                    self._on_storage_error(tp, exc)
                    return None
            return log.log_end_offset

    def restart_follower_at(self, tp: TopicPartition, offset: int) -> int | None:
        """The leader's log starts after ours ends: start over empty at the leader's log start."""
        with self._lock:
            partition = self._follower(tp)
            if partition is None:
                return None
            logger.info("%s-%d: follower restarts empty at the leader's log start %d", tp[0], tp[1], offset)
            try:
                self.log_manager.truncate_fully_and_start_at(tp, offset)
            except KafkaStorageError as exc:
                self._on_storage_error(tp, exc)
                return None
            return partition.log.log_end_offset

    def append_as_follower(self, tp: TopicPartition, records: bytes, leader_high_watermark: int,
                           leader_log_start_offset: int = -1) -> int | None:
        """Appends replicated batches and takes the leader's high watermark (capped at the local
        end) and log start offset (records the leader deleted, capped at the high watermark);
        returns the next offset to fetch, or None when the partition is not followed here."""
        partition = self._follower(tp)
        if partition is None:
            return None
        log = partition.log
        with partition.lock:
            if records:
                try:
                    log.append_as_follower(records)
                except KafkaStorageError as exc:
                    self._on_storage_error(tp, exc)
                    return None  # the partition goes offline with its log dir
                self.topic_stats.replicated(len(records))
            high_watermark = min(leader_high_watermark, log.log_end_offset)
            if high_watermark > log.high_watermark:
                log.update_high_watermark(high_watermark)
            if leader_log_start_offset > log.log_start_offset:
                log.maybe_increment_log_start_offset(min(leader_log_start_offset, log.high_watermark))
            end = log.log_end_offset
        if records:
            self._fetchable_changed(tp)
        return end

    def delete_records(self, topic: str, index: int, offset: int) -> tuple[int, int]:
        """(error code, new log start offset): DeleteRecords on a led partition moves its log start
        offset to `offset` (-1: the high watermark), never past the high watermark
        (OFFSET_OUT_OF_RANGE); a topic without the delete cleanup policy is POLICY_VIOLATION.
        Followers take the new log start offset from their next fetch."""
        try:
            partition = self.leader_partition(topic, index)
            log = partition.log
            with partition.lock:
                if not log.config.delete:
                    return Errors.POLICY_VIOLATION, -1
                target = log.high_watermark if offset == -1 else offset
                if not 0 <= target <= log.high_watermark:
                    return Errors.OFFSET_OUT_OF_RANGE, -1
                log.maybe_increment_log_start_offset(target)
                return Errors.NONE, log.log_start_offset
        except KafkaError as exc:
            return exc.code, -1

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
        """Writes `replication-offset-checkpoint` in every log dir (Kafka's offset checkpoint format),
        unless it would write what the dir's file already holds (the idle case). While no high
        watermark was set and no partition came or went since the last write, it reads no log."""
        changes = getattr(self.log_manager, "high_watermark_changes", None)
        seen = (changes.token if changes is not None else None, self._partition_set_changes)
        if seen[0] is not None and seen == self._hw_seen:
            return
        written = True
        by_dir: dict[str, dict] = {d: {} for d in self._hw_checkpoints}
        for partition in list(self._partitions.values()):
            log = partition.log
            by_dir.setdefault(log.parent_dir, {})[partition.key] = log.high_watermark
        channel = getattr(self.log_manager, "failure_channel", None)
        for log_dir, offsets in by_dir.items():
            checkpoint = self._hw_checkpoints.get(log_dir)
            if checkpoint is None or self._hw_written.get(log_dir) == offsets:
                continue
            if channel is not None and channel.has_offline_log_dir(log_dir):
                continue
            try:
                checkpoint.write(offsets)
                self._hw_written[log_dir] = offsets
            except OSError as exc:
                written = False
                if channel is not None:
                    channel.maybe_add_offline_log_dir(log_dir, exc)
                else:
                    logger.exception("writing %s failed", checkpoint)
        if written:
            self._hw_seen = seen
