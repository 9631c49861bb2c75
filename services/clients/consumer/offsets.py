"""Offset lookups of the consumer (Kafka's OffsetFetcher): resetting positions with ListOffsets,
validating positions after a leader change with OffsetForLeaderEpoch, and the blocking lookups
behind `beginning_offsets`, `end_offsets` and `offsets_for_times`.

Resets and validations are asynchronous, like fetches: `reset_positions_if_needed()` and
`validate_positions_if_needed()` send one request per leader for the partitions that need it and
hold those partitions back for `request.timeout.ms` while the request is out. Answers are applied
on the consumer's thread. A retriable error or a failed call holds the partitions back for
`retry.backoff.ms` (refreshing metadata when it says leadership moved); any other error is kept
and raised by the next call of the same method, as Kafka does.

Validation (KIP-320) asks the leader where the epoch of the consumer's last record ends; an end
below the position means the log was truncated under the consumer: with a reset strategy the
position moves back to that end (a warning is logged), without one LogTruncationError is raised.

`checked_offsets` reads the offsets an application asks to commit; the OffsetCommit and
OffsetFetch messages are built and read by `services.clients.group_requests`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from services.clients.cluster import Node
from services.clients.consumer.config import ConsumerConfig
from services.clients.consumer.errors import LogTruncationError
from services.clients.consumer.records import OffsetAndMetadata
from services.clients.consumer.subscription import (
    FetchPosition,
    LeaderAndEpoch,
    LogTruncation,
    OffsetResetStrategy,
    SubscriptionState,
)
from services.clients.metadata import Metadata
from services.clients.partition_requests import (
    ListOffsetsResult,
    list_offsets_failure,
    list_offsets_request,
    parse_list_offsets,
    read_call_retriable,
    read_retriable,
)
from services.clients.transport import BROKER, AsyncRequests, ChannelPool, Deadline, send_to_leaders, timeout_error
from services.common.clock import Clock
from services.common.errors import Errors, KafkaError, error_for_code
from services.common.pb.odradek.broker.v1 import broker_pb2
from services.common.shared_types import CONSUMER_REPLICA_ID, EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, NO_LEADER_EPOCH
from services.common.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

RESET_TIMESTAMPS = {OffsetResetStrategy.EARLIEST: EARLIEST_TIMESTAMP, OffsetResetStrategy.LATEST: LATEST_TIMESTAMP}


class OffsetFetcher:
    """Resets, validations and blocking offset lookups; see the module docstring."""

    def __init__(self, config: ConsumerConfig, subscriptions: SubscriptionState, metadata: Metadata,
                 pool: ChannelPool, requests: AsyncRequests, clock: Clock):
        self._config = config
        self._subscriptions = subscriptions
        self._metadata = metadata
        self._pool = pool
        self._requests = requests
        self._clock = clock
        self._isolation_level = config.isolation_level_code
        self._reset_error: KafkaError | None = None
        self._validation_error: KafkaError | None = None

    def _leaders(self, partitions: list[TopicPartition]) -> dict[Node, list[TopicPartition]]:
        """Partitions grouped by known leader; those without one ask for a metadata update."""
        cluster = self._metadata.cluster
        groups: dict[Node, list[TopicPartition]] = {}
        for tp in partitions:
            leader = cluster.leader_for(tp.topic, tp.partition)
            if leader is None:
                self._metadata.request_update()
            elif not self._pool.is_backing_off(leader.address):
                groups.setdefault(leader, []).append(tp)
        return groups

    def _current_leader(self, tp: TopicPartition) -> LeaderAndEpoch:
        info = self._metadata.partition(tp.topic, tp.partition)
        if info is None or not info.has_leader:
            return LeaderAndEpoch()
        return LeaderAndEpoch(info.leader, info.leader_epoch)

    def _retry_later(self, partitions, error: KafkaError | None = None) -> None:
        self._subscriptions.set_next_retry(partitions, self._clock.monotonic_ms() + self._config.retry_backoff_ms)
        if error is None or error.invalid_metadata or error.code == Errors.REQUEST_TIMED_OUT:
            self._metadata.request_update()

    # ------------------------------------------------------------------ resets (ListOffsets)

    def reset_positions_if_needed(self) -> None:
        """Sends ListOffsets for partitions awaiting a reset; raises an error kept from an earlier answer."""
        error, self._reset_error = self._reset_error, None
        if error is not None:
            raise error
        subscriptions = self._subscriptions
        partitions = subscriptions.partitions_needing_reset(self._clock.monotonic_ms())
        if not partitions:
            return
        in_flight_until = self._clock.monotonic_ms() + self._config.request_timeout_ms
        for leader, tps in self._leaders(partitions).items():
            strategies = {tp: subscriptions.reset_strategy(tp) for tp in tps}
            subscriptions.set_next_retry(tps, in_flight_until)
            request = list_offsets_request({tp: RESET_TIMESTAMPS[strategies[tp]] for tp in tps}, self._isolation_level)
            for topic in request.topics:
                for partition in topic.partitions:
                    epoch = self._current_leader(TopicPartition(topic.name, partition.partition_index)).epoch
                    partition.current_leader_epoch = NO_LEADER_EPOCH if epoch is None else epoch
            self._requests.send(
                leader.address, BROKER, "ListOffsets", request, self._config.request_timeout_ms,
                on_response=lambda response, strategies=strategies: self._on_reset_response(strategies, response),
                on_error=lambda error, tps=tps: self._retry_later(tps, error))

    def _on_reset_response(self, strategies: dict[TopicPartition, OffsetResetStrategy],
                           response: broker_pb2.ListOffsetsResponse) -> None:
        parsed = parse_list_offsets(response)
        retry = []
        for tp, strategy in strategies.items():
            code, result = parsed.get(tp, (None, None))
            if code is None:
                retry.append(tp)
                continue
            if code != Errors.NONE:
                error = KafkaError.from_code(code, f"ListOffsets for {tp} failed")
                if error.retriable:
                    logger.debug("resetting %s: %s; retrying", tp, error)
                    retry.append(tp)
                    if error.invalid_metadata:
                        self._metadata.request_update()
                else:
                    self._reset_error = error
                continue
            epoch = result.leader_epoch if result.leader_epoch >= 0 else None
            position = FetchPosition(result.offset, epoch, self._current_leader(tp))
            if self._subscriptions.maybe_seek_unvalidated(tp, position, strategy):
                logger.info("Resetting offset for partition %s to position %s", tp, position)
        if retry:
            self._subscriptions.set_next_retry(retry, self._clock.monotonic_ms() + self._config.retry_backoff_ms)

    # ------------------------------------------------------------------ validation (OffsetForLeaderEpoch)

    def validate_positions_if_needed(self) -> None:
        """Sends OffsetForLeaderEpoch for positions awaiting validation; raises an error kept from an
        earlier answer (LogTruncationError when the log was truncated and there is no reset strategy)."""
        error, self._validation_error = self._validation_error, None
        if error is not None:
            raise error
        subscriptions = self._subscriptions
        now_ms = self._clock.monotonic_ms()
        partitions = subscriptions.partitions_needing_validation(now_ms)
        if not partitions:
            return
        for tp in partitions:  # validate against the leader the metadata names now
            subscriptions.maybe_validate_position_for_current_leader(tp, self._current_leader(tp))
        partitions = subscriptions.partitions_needing_validation(now_ms)
        for leader, tps in self._leaders(partitions).items():
            positions = {tp: subscriptions.position(tp) for tp in tps}
            subscriptions.set_next_retry(tps, now_ms + self._config.request_timeout_ms)
            request = broker_pb2.OffsetForLeaderEpochRequest(replica_id=CONSUMER_REPLICA_ID)
            by_topic: dict[str, list[TopicPartition]] = {}
            for tp in tps:
                by_topic.setdefault(tp.topic, []).append(tp)
            for topic, topic_partitions in by_topic.items():
                request.topics.add(topic=topic, partitions=[
                    broker_pb2.OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
                        partition=tp.partition, current_leader_epoch=positions[tp].current_leader.epoch,
                        leader_epoch=positions[tp].offset_epoch)
                    for tp in topic_partitions])
            self._requests.send(
                leader.address, BROKER, "OffsetForLeaderEpoch", request, self._config.request_timeout_ms,
                on_response=lambda response, positions=positions: self._on_validation_response(positions, response),
                on_error=lambda error, tps=tps: self._retry_later(tps, error))

    def _on_validation_response(self, positions: dict[TopicPartition, FetchPosition],
                                response: broker_pb2.OffsetForLeaderEpochResponse) -> None:
        answers = {TopicPartition(topic.topic, p.partition): p for topic in response.topics for p in topic.partitions}
        truncations: list[LogTruncation] = []
        retry = []
        for tp, requested in positions.items():
            answer = answers.get(tp)
            if answer is None:
                retry.append(tp)
                continue
            if answer.error_code != Errors.NONE:
                error = KafkaError.from_code(answer.error_code, f"OffsetForLeaderEpoch for {tp} failed")
                if error.retriable:
                    logger.debug("validating the position of %s: %s; retrying", tp, error)
                    retry.append(tp)
                    if error.invalid_metadata:
                        self._metadata.request_update()
                else:
                    self._validation_error = error
                continue
            truncation = self._subscriptions.maybe_complete_validation(tp, requested, answer.leader_epoch,
                                                                       answer.end_offset)
            if truncation is not None:
                truncations.append(truncation)
        if retry:
            self._subscriptions.set_next_retry(retry, self._clock.monotonic_ms() + self._config.retry_backoff_ms)
        if truncations:
            self._validation_error = LogTruncationError(
                {t.tp: t.position.offset for t in truncations}, {t.tp: t.divergent for t in truncations})

    # ------------------------------------------------------------------ blocking lookups

    def list_offsets(self, timestamps: Mapping[TopicPartition, int], timeout_ms: float) -> dict[
            TopicPartition, ListOffsetsResult]:
        """ListOffsets for every partition, retried until `timeout_ms`; raises the error of a partition
        that failed for good, or REQUEST_TIMED_OUT when retriable errors outlast the timeout."""
        if not timestamps:
            return {}
        deadline = Deadline(timeout_ms, self._clock)
        results = send_to_leaders(
            self._metadata, self._pool, timestamps,
            method="ListOffsets",
            build_request=lambda tps: list_offsets_request({tp: timestamps[tp] for tp in tps}, self._isolation_level),
            parse_response=parse_list_offsets,
            failure_result=list_offsets_failure,
            deadline=deadline,
            backoff_ms=self._config.retry_backoff_ms,
            call_timeout_ms=self._config.request_timeout_ms,
            retry_code=read_retriable,
            retry_call_error=read_call_retriable,
        )
        for tp in timestamps:
            result = results.get(tp)
            if result is None or result.error_code == Errors.NONE:
                continue
            error = KafkaError.from_code(result.error_code, f"ListOffsets for {tp} failed")
            if error_for_code(result.error_code).retriable:
                raise timeout_error(f"Fetching offsets of {sorted(map(str, timestamps))}", 1, error) from error
            raise error
        missing = [tp for tp in timestamps if tp not in results]
        if missing:
            raise timeout_error(f"Fetching offsets of {sorted(map(str, missing))}", 1, None)
        return {tp: results[tp] for tp in timestamps}


# ---------------------------------------------------------------------------------------------- group offsets

def checked_offsets(offsets: Mapping[Any, OffsetAndMetadata | int]) -> dict[TopicPartition, OffsetAndMetadata]:
    """Offsets to commit, by TopicPartition (tuples and plain offsets accepted); negative ones refused."""
    checked = {}
    for partition, value in offsets.items():
        tp = partition if isinstance(partition, TopicPartition) else TopicPartition(*partition)
        committed = value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(value)
        if isinstance(committed.offset, bool) or not isinstance(committed.offset, int) or committed.offset < 0:
            raise ValueError(f"Invalid negative offset {committed.offset!r} for partition {tp}")
        checked[tp] = committed
    return checked
