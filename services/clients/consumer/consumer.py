"""`Consumer`: reads records of a consumer group's or hand-assigned partitions, with the Kafka
3.x consumer's semantics.

    with Consumer(bootstrap_servers="127.0.0.1:9092", group_id="billing") as consumer:
        consumer.subscribe(["events"])
        for record in consumer.poll(timeout_ms=1000):
            print(record.offset, record.value)

Configuration is `ConsumerConfig` (Kafka's keys as snake_case keywords, or a mapping of dotted
keys). Partitions come from the group (`subscribe` to topics or a pattern, with `group.id`; the
group work is `coordinator`'s) or by hand (`assign`). Positions start lazily: a partition without
one starts at the group's committed offset (with a group id), else is reset by
`auto.offset.reset`, at the next `poll` or `position`; `seek_to_beginning` and `seek_to_end` reset
lazily too. Commits: `commit_sync` (or kafka-python's name for it, `commit`), `commit_async`,
auto-commit (enable.auto.commit, every auto.commit.interval.ms from poll, before a rebalance and on
close). A poll's `ConsumerRecords` iterate as the Java client's and read by partition as
kafka-python's dict (`records[tp]`, `records.items()`). Iterating over the consumer
polls forever, or until `consumer.timeout.ms` passes without a record or the consumer is closed.

A poll returns records already fetched when there are any; otherwise it sends fetches and waits
up to its timeout. Right after handing records out it sends the next fetches, so the brokers
work while the application processes the records (see `fetcher`). Leadership changes are
followed through metadata refreshes, and a position is validated against a new leader before
fetching resumes (see `offsets`).

Like Kafka's KafkaConsumer, a consumer is used by one thread at a time: a public method called
while another thread is inside one raises ConcurrentModificationError. `wakeup()` is the
exception, callable from any thread: it makes the blocking call in progress (or the next one)
raise WakeupError.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

from services.clients.cluster import Cluster, PartitionInfo
from services.clients.consumer.assignors import assignors_from_config
from services.clients.consumer.config import ConsumerConfig, load_consumer_config
from services.clients.consumer.coordinator import (
    CommitCallback,
    ConsumerCoordinator,
    ConsumerGroupMetadata,
)
from services.clients.consumer.errors import (
    ConcurrentModificationError,
    IllegalStateError,
    InvalidGroupIdError,
    WakeupError,
)
from services.clients.consumer.fetcher import Fetcher
from services.clients.consumer.listener import ConsumerRebalanceListener
from services.clients.consumer.metrics import ConsumerMetrics
from services.clients.consumer.offsets import OffsetFetcher
from services.clients.consumer.records import (
    EMPTY_RECORDS,
    ConsumerRecord,
    ConsumerRecords,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    RecordBlock,
)
from services.clients.consumer.subscription import (
    FetchPosition,
    LeaderAndEpoch,
    OffsetResetStrategy,
    SubscriptionState,
    SubscriptionType,
)
from services.clients.metadata import Metadata
from services.clients.transport import BROKER, AsyncRequests, ChannelPool, Deadline
from services.common.clock import SYSTEM_CLOCK, Clock
from services.common.config import ConfigError
from services.common.errors import Errors, KafkaError
from services.common.shared_types import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, IsolationLevel
from services.common.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])
ITERATION_POLL_MS = 1000
DEFAULT_CLOSE_TIMEOUT_MS = 30000


def _single_threaded(method: F) -> F:
    """Runs a public method under the consumer's single-thread guard, on an open consumer."""

    @functools.wraps(method)
    def guarded(self: Consumer, *args: Any, **kwargs: Any) -> Any:
        self._acquire_and_ensure_open()
        try:
            return method(self, *args, **kwargs)
        finally:
            self._release()

    return guarded  # type: ignore[return-value]


def _partition(value: TopicPartition | tuple[str, int]) -> TopicPartition:
    if isinstance(value, TopicPartition):
        return value
    topic, partition = value
    return TopicPartition(topic, partition)


class Consumer:
    """A Kafka-style consumer of group-assigned or hand-assigned partitions; see the module docstring."""

    def __init__(self, config: Mapping[str, Any] | None = None, *, clock: Clock = SYSTEM_CLOCK,
                 **overrides: Any):
        self.config: ConsumerConfig = load_consumer_config(config, overrides)
        self._clock = clock
        self._pool = ChannelPool.from_config(self.config, clock)
        self._metadata = Metadata.from_config(self.config, clock=clock)
        self._subscriptions = SubscriptionState(OffsetResetStrategy(self.config.auto_offset_reset))
        self._requests = AsyncRequests(self._pool, clock)
        self._metrics = ConsumerMetrics()
        self._fetcher = Fetcher(self.config, self._subscriptions, self._metadata, self._requests, self._metrics,
                                clock)
        self._offsets = OffsetFetcher(self.config, self._subscriptions, self._metadata, self._pool, self._requests,
                                      clock)
        self._coordinator = self._make_coordinator() if self.config.group_id else None
        self._owner_lock = threading.Lock()
        self._owner_thread: int | None = None
        self._depth = 0
        self._closed = False
        self._metadata_in_flight = False
        self._iterator: Iterator[ConsumerRecord] | None = None

    def _make_coordinator(self) -> ConsumerCoordinator:
        strategy = self.config.partition_assignment_strategy
        try:
            return ConsumerCoordinator(self.config, self._subscriptions, self._metadata, self._pool, self._requests,
                                       self._clock, assignors_from_config(strategy))
        except ValueError as error:
            raise ConfigError("partition.assignment.strategy", strategy, str(error)) from None

    # ------------------------------------------------------------------ single-thread guard

    def _acquire(self) -> None:
        thread = threading.get_ident()
        if thread != self._owner_thread:
            with self._owner_lock:
                if self._owner_thread is not None:
                    raise ConcurrentModificationError("KafkaConsumer is not safe for multi-threaded access")
                self._owner_thread = thread
        self._depth += 1

    def _release(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._owner_thread = None

    def _acquire_and_ensure_open(self) -> None:
        self._acquire()
        if self._closed:
            self._release()
            raise IllegalStateError("This consumer has already been closed.")

    # ------------------------------------------------------------------ assignment

    @_single_threaded
    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        """Reads exactly these partitions from now on (an empty list unassigns everything)."""
        if partitions is None:
            raise ValueError("Topic partition collection to assign to cannot be null")
        wanted = []
        for value in partitions:
            tp = _partition(value)
            if not isinstance(tp.topic, str) or not tp.topic.strip():
                raise ValueError("Topic partitions to assign to cannot have null or empty topic")
            wanted.append(tp)
        if not wanted:
            self._unsubscribe()
            return
        if self._subscriptions.has_auto_assigned_partitions():
            raise IllegalStateError("Subscription to topics, partitions and pattern are mutually exclusive")
        keep = set(wanted)
        self._fetcher.clear_buffered_data(lambda tp: tp in keep)
        if self._coordinator is not None:  # positions of partitions given up are committed now
            self._coordinator.maybe_auto_commit_offsets_async(self._clock.monotonic_ms())
        if self._subscriptions.assign_from_user(wanted):
            logger.info("Assigned to partition(s): %s", ", ".join(map(str, wanted)))
            self._metadata.add_topics(*{tp.topic for tp in wanted})

    @_single_threaded
    def subscribe(self, topics: Iterable[str] | str | None = None, pattern: str | re.Pattern[str] | None = None,
                  listener: ConsumerRebalanceListener | None = None) -> None:
        """Joins the group for these topics or for the topics `pattern` fully matches, replacing the
        subscription (an empty list unsubscribes); `listener` hears of rebalances. Needs a group.id."""
        wanted = self._group_coordinator().subscribe(topics, pattern, listener)
        if wanted is not None and not wanted:
            self._unsubscribe()
        elif wanted is not None:
            self._fetcher.clear_buffered_data(lambda tp: tp.topic in wanted)

    @_single_threaded
    def subscription(self) -> set[str]:
        """The subscribed topics (for a pattern, the topics it matches now)."""
        return self._subscriptions.subscription()

    @_single_threaded
    def unsubscribe(self) -> None:
        """Leaves the group (revoking its partitions) or drops the manual assignment, with every position."""
        self._unsubscribe()

    def _unsubscribe(self) -> None:
        self._fetcher.clear_buffered_data(lambda tp: False)
        error = self._coordinator.on_unsubscribe() if self._coordinator is not None else None
        self._subscriptions.unsubscribe()
        self._metadata.all_topics = False
        logger.info("Unsubscribed all topics or patterns and assigned partitions")
        if error is not None:
            raise error

    @_single_threaded
    def assignment(self) -> set[TopicPartition]:
        """The partitions this consumer reads: assigned by hand, or by the group's last rebalance."""
        return self._subscriptions.assigned_partitions()

    def _group_coordinator(self) -> ConsumerCoordinator:
        if self._coordinator is None:
            raise InvalidGroupIdError()
        return self._coordinator

    # ------------------------------------------------------------------ committed offsets

    @_single_threaded
    def commit_sync(self, offsets: Mapping[Any, OffsetAndMetadata | int] | None = None,
                    timeout_ms: float | None = None) -> None:
        """Commits `offsets` (default: every assigned partition's position) and waits up to
        `timeout_ms` (default.api.timeout.ms); CommitFailedError when the group rebalanced meanwhile."""
        self._group_coordinator().commit_sync(offsets, self._timeout_ms(timeout_ms))

    def commit(self, offsets: Mapping[Any, OffsetAndMetadata | int] | None = None,
               timeout_ms: float | None = None) -> None:
        """kafka-python's name for `commit_sync`, with the same arguments."""
        self.commit_sync(offsets, timeout_ms)

    @_single_threaded
    def commit_async(self, offsets: Mapping[Any, OffsetAndMetadata | int] | None = None,
                     callback: CommitCallback | None = None) -> None:
        """Commits without waiting; `callback(offsets, error or None)` runs in a later call, in order
        (kafka-python's `commit_async` takes the same arguments and calls back the same way)."""
        self._group_coordinator().commit_async(offsets, callback)

    @_single_threaded
    def committed(self, partitions: Iterable[TopicPartition | tuple[str, int]],
                  timeout_ms: float | None = None) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offset of each partition (None when there is none)."""
        return self._group_coordinator().committed(map(_partition, partitions), self._timeout_ms(timeout_ms))

    @_single_threaded
    def group_metadata(self) -> ConsumerGroupMetadata:
        """(group_id, generation_id, member_id, group_instance_id) as they stand now."""
        return self._group_coordinator().group_metadata()

    # ------------------------------------------------------------------ polling

    @_single_threaded
    def poll(self, timeout_ms: float = 0, max_records: int | None = None) -> ConsumerRecords:
        """Records fetched for the assigned partitions, at most `max_records` (max.poll.records);
        waits up to `timeout_ms` when none are ready, then returns empty.

        A fetched batch that fails its CRC or its records' framing raises CorruptRecordError
        (naming `tp` and `offset`, see `errors.corrupt_batch_error`) once the records before it
        were returned, and again on every poll until `seek(tp, offset + 1)` moves past it."""
        if timeout_ms < 0:
            raise ValueError("Timeout must not be negative")
        if self._subscriptions.subscription_type is SubscriptionType.NONE:
            raise IllegalStateError("Consumer is not subscribed to any topics or assigned any partitions")
        if max_records is not None and max_records < 1:
            raise ValueError("max_records must be at least 1")
        limit = max_records or self.config.max_poll_records
        deadline = Deadline(timeout_ms, self._clock)
        self._metrics.polled(self._clock.monotonic_ms())
        while True:
            self._maybe_wakeup()
            self._update_assignment_metadata_if_needed(deadline)
            fetched = self._poll_for_fetches(deadline, limit)
            if fetched:
                # pipelining: the next fetches run on the brokers while these records are processed
                self._fetcher.send_fetches()
                return ConsumerRecords(fetched)
            if deadline.expired:
                return EMPTY_RECORDS

    def _poll_for_fetches(self, deadline: Deadline, limit: int) -> dict[TopicPartition, list[RecordBlock]]:
        fetcher = self._fetcher
        self._requests.poll(0)
        fetcher.send_fetches()  # before decoding what arrived, so the brokers work meanwhile
        fetched = fetcher.collect_fetch(limit)
        if fetched:
            return fetched
        wait_ms = deadline.remaining_ms()
        if self._coordinator is not None:
            wait_ms = min(wait_ms, self._coordinator.time_to_next_poll(self._clock.monotonic_ms()))
        if not self._requests.in_flight or not self._subscriptions.has_all_fetch_positions():
            # nothing will answer, or work waits for a back-off to pass: look again after it
            wait_ms = min(wait_ms, self.config.retry_backoff_ms)
        self._requests.poll(wait_ms)
        self._maybe_wakeup()
        fetcher.send_fetches()
        return fetcher.collect_fetch(limit)

    def _maybe_wakeup(self) -> None:
        if self._requests.take_wakeup():
            raise WakeupError("the consumer was woken up")

    def _update_assignment_metadata_if_needed(self, deadline: Deadline) -> bool:
        """The group's work (joining, auto-commit), then positions; True when all positions are valid."""
        self._maybe_update_metadata()
        if self._coordinator is not None and not self._coordinator.poll(deadline):
            return False
        return self._update_fetch_positions(deadline)

    def _update_fetch_positions(self, deadline: Deadline) -> bool:
        """Refreshes metadata when due, validates positions, starts partitions without one at their
        committed offsets or resets them; True when all positions are valid."""
        self._maybe_update_metadata()
        self._offsets.validate_positions_if_needed()
        if self._subscriptions.has_all_fetch_positions():
            return True
        coordinator = self._coordinator
        if coordinator is not None and not coordinator.refresh_committed_offsets_if_needed(deadline):
            return False
        self._subscriptions.reset_initializing_positions()
        self._offsets.reset_positions_if_needed()
        return False

    def _maybe_update_metadata(self) -> None:
        if self._metadata_in_flight or self._metadata.time_to_next_update() > 0:
            return
        node = self._metadata.least_loaded_node(self._pool)
        if node is None:
            return
        self._metadata_in_flight = True
        request = self._metadata.build_request(self.config.allow_auto_create_topics)
        self._requests.send(node.address, BROKER, "Metadata", request, self.config.request_timeout_ms,
                            on_response=self._on_metadata_response, on_error=self._on_metadata_error)

    def _on_metadata_response(self, response: Any) -> None:
        self._metadata_in_flight = False
        self._metadata.update(response)

    def _on_metadata_error(self, error: KafkaError) -> None:
        self._metadata_in_flight = False
        self._metadata.failed_update(error)

    # ------------------------------------------------------------------ iteration

    def __iter__(self) -> Consumer:
        return self

    def __next__(self) -> ConsumerRecord:
        if self._iterator is None:
            self._iterator = self._records_forever()
        try:
            return next(self._iterator)
        except BaseException:
            self._iterator = None
            raise

    def _records_forever(self) -> Iterator[ConsumerRecord]:
        timeout_ms = self.config.consumer_timeout_ms
        clock = self._clock
        idle_since = clock.monotonic_ms()
        while not self._closed:
            if timeout_ms < 0:
                wait_ms = ITERATION_POLL_MS
            else:
                wait_ms = max(0, min(ITERATION_POLL_MS, timeout_ms - (clock.monotonic_ms() - idle_since)))
            records = self.poll(wait_ms)
            if records:
                for record in records:
                    yield record
                    if self._closed:
                        return
                idle_since = clock.monotonic_ms()
            elif timeout_ms >= 0 and clock.monotonic_ms() - idle_since >= timeout_ms:
                return

    # ------------------------------------------------------------------ positions

    def _assigned(self, value: TopicPartition | tuple[str, int], action: str) -> TopicPartition:
        tp = _partition(value)
        if not self._subscriptions.is_assigned(tp):
            raise IllegalStateError(f"No current assignment for partition {tp} ({action})")
        return tp

    def _timeout_ms(self, timeout_ms: float | None) -> float:
        return self.config.default_api_timeout_ms if timeout_ms is None else timeout_ms

    @_single_threaded
    def position(self, partition: TopicPartition | tuple[str, int], timeout_ms: float | None = None) -> int:
        """The offset of the next record to return for `partition`, resolving a pending reset first.

        Raises REQUEST_TIMED_OUT when it cannot be determined within `timeout_ms`
        (default.api.timeout.ms by default).
        """
        tp = _partition(partition)
        if not self._subscriptions.is_assigned(tp):
            raise IllegalStateError("You can only check the position for partitions assigned to this consumer.")
        deadline = Deadline(self._timeout_ms(timeout_ms), self._clock)
        while True:
            if self._subscriptions.has_valid_position(tp):
                return self._subscriptions.position(tp).offset
            self._maybe_wakeup()
            self._update_fetch_positions(deadline)
            if self._subscriptions.has_valid_position(tp):
                return self._subscriptions.position(tp).offset
            if deadline.expired:
                raise KafkaError(f"Timeout of {deadline.timeout_ms}ms expired before the position for partition "
                                 f"{tp} could be determined", error=Errors.REQUEST_TIMED_OUT)
            self._requests.poll(min(deadline.remaining_ms(), self.config.retry_backoff_ms))

    @_single_threaded
    def seek(self, partition: TopicPartition | tuple[str, int], offset: int) -> None:
        """The next poll returns records of `partition` from `offset` on."""
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"seek offset must not be a negative number: {offset!r}")
        tp = self._assigned(partition, "seek")
        logger.info("Seeking to offset %d for partition %s", offset, tp)
        self._subscriptions.seek_unvalidated(tp, FetchPosition(offset, None, self._current_leader(tp)))

    @_single_threaded
    def seek_to_beginning(self, *partitions: TopicPartition | tuple[str, int]) -> None:
        """Resets the partitions (all assigned ones when none are given) to their first offset, lazily."""
        self._request_reset(partitions, OffsetResetStrategy.EARLIEST)

    @_single_threaded
    def seek_to_end(self, *partitions: TopicPartition | tuple[str, int]) -> None:
        """Resets the partitions (all assigned ones when none are given) to their end, lazily."""
        self._request_reset(partitions, OffsetResetStrategy.LATEST)

    def _request_reset(self, partitions, strategy: OffsetResetStrategy) -> None:
        tps = [self._assigned(p, f"seek to {strategy.value}") for p in partitions] or \
            self._subscriptions.assigned_list()
        for tp in tps:
            self._subscriptions.request_offset_reset(tp, strategy)

    def _current_leader(self, tp: TopicPartition) -> LeaderAndEpoch:
        info = self._metadata.partition(tp.topic, tp.partition)
        if info is None or not info.has_leader:
            return LeaderAndEpoch()
        return LeaderAndEpoch(info.leader, info.leader_epoch)

    # ------------------------------------------------------------------ offset lookups

    @_single_threaded
    def beginning_offsets(self, partitions: Iterable[TopicPartition | tuple[str, int]],
                          timeout_ms: float | None = None) -> dict[TopicPartition, int]:
        """The first offset of each partition (its log start offset)."""
        return self._offsets_at({_partition(p): EARLIEST_TIMESTAMP for p in partitions}, timeout_ms)

    @_single_threaded
    def end_offsets(self, partitions: Iterable[TopicPartition | tuple[str, int]],
                    timeout_ms: float | None = None) -> dict[TopicPartition, int]:
        """The offset after the last readable record of each partition: the high watermark, or the
        last stable offset with isolation.level=read_committed."""
        return self._offsets_at({_partition(p): LATEST_TIMESTAMP for p in partitions}, timeout_ms)

    def _offsets_at(self, timestamps: dict[TopicPartition, int], timeout_ms: float | None) -> dict[TopicPartition, int]:
        results = self._offsets.list_offsets(timestamps, self._timeout_ms(timeout_ms))
        return {tp: result.offset for tp, result in results.items()}

    @_single_threaded
    def offsets_for_times(self, timestamps: Mapping[TopicPartition | tuple[str, int], int],
                          timeout_ms: float | None = None) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """For each partition, the first offset whose timestamp is at or after the given one (ms),
        with that record's timestamp; None when no such record exists."""
        wanted = {}
        for partition, timestamp in timestamps.items():
            if isinstance(timestamp, bool) or not isinstance(timestamp, int) or timestamp < 0:
                raise ValueError(f"The target time for partition {_partition(partition)} is {timestamp}. "
                                 f"The target time cannot be negative.")
            wanted[_partition(partition)] = timestamp
        results = self._offsets.list_offsets(wanted, self._timeout_ms(timeout_ms))
        return {tp: (OffsetAndTimestamp(r.offset, r.timestamp, r.leader_epoch if r.leader_epoch >= 0 else None)
                     if r.offset >= 0 else None)
                for tp, r in results.items()}

    # ------------------------------------------------------------------ pause and resume

    @_single_threaded
    def pause(self, *partitions: TopicPartition | tuple[str, int]) -> None:
        """Stops fetching and returning records of these partitions until `resume`."""
        for partition in partitions:
            self._subscriptions.pause(self._assigned(partition, "pause"))

    @_single_threaded
    def resume(self, *partitions: TopicPartition | tuple[str, int]) -> None:
        for partition in partitions:
            self._subscriptions.resume(self._assigned(partition, "resume"))

    @_single_threaded
    def paused(self) -> set[TopicPartition]:
        return self._subscriptions.paused_partitions()

    # ------------------------------------------------------------------ topic metadata

    @_single_threaded
    def partitions_for(self, topic: str, timeout_ms: float | None = None) -> list[PartitionInfo]:
        """The partitions of `topic` (an empty list when it does not exist)."""
        known = self._metadata.partitions_for(topic)
        if known:
            return list(known)
        cluster = self._describe_topics([topic], timeout_ms)
        return list(cluster.partitions_for(topic))

    @_single_threaded
    def list_topics(self, timeout_ms: float | None = None) -> dict[str, list[PartitionInfo]]:
        """Every topic of the cluster with its partitions."""
        cluster = self._describe_topics(None, timeout_ms)
        return {name: list(cluster.partitions_for(name)) for name in cluster.topic_names()}

    def _describe_topics(self, topics: list[str] | None, timeout_ms: float | None) -> Cluster:
        deadline = Deadline(self._timeout_ms(timeout_ms), self._clock)
        return self._metadata.describe_topics(self._pool, topics, deadline, self.config.retry_backoff_ms)

    # ------------------------------------------------------------------ the rest

    def wakeup(self) -> None:
        """Makes the blocking call in progress, or the next one, raise WakeupError (any thread)."""
        self._requests.wakeup()

    @_single_threaded
    def metrics(self) -> dict[str, float]:
        read_committed = self.config.isolation_level_code == IsolationLevel.READ_COMMITTED
        lags = {tp: self._subscriptions.partition_lag(tp, read_committed)
                for tp in self._subscriptions.assigned_list()}
        return self._metrics.snapshot(self._clock.monotonic_ms(), lags)

    def close(self, timeout: float | None = None) -> None:
        """Stops the consumer. With a group: auto-commits, revokes the partitions (listener) and
        leaves the group (dynamic members), within `timeout` seconds (default 30, at most
        request.timeout.ms). Then calls in flight are cancelled and connections closed."""
        self._acquire()
        try:
            if self._closed:
                return
            error = self._close_membership(timeout)
            self._closed = True
            self._requests.close()
            self._pool.close()
            logger.debug("consumer closed")
            if error is not None:
                raise error
        finally:
            self._release()

    def _close_membership(self, timeout: float | None) -> Exception | None:
        if self._coordinator is None:
            return None
        timeout_ms = DEFAULT_CLOSE_TIMEOUT_MS if timeout is None else timeout * 1000
        try:
            self._coordinator.close(Deadline(min(timeout_ms, self.config.request_timeout_ms), self._clock))
        except Exception as error:  # noqa: BLE001 - raised once everything is closed
            logger.error("Failed to close the consumer's group membership", exc_info=True)
            return error
        return None

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
