"""Fetching records for the assigned partitions (Kafka's Fetcher).

`send_fetches()` sends one FetchRequest to each leader that leads assigned, unpaused partitions
with a valid position and no fetch in flight to that leader (one fetch per broker at a time, as
Kafka's consumer). Each partition carries its position and the leader epoch the consumer knows
(`current_leader_epoch`), so a broker with another view of leadership answers
FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH instead of data. Requests are futures
(`AsyncRequests`), and fetching runs ahead of decoding: a partition whose waiting answers (at
most MAX_BUFFERED_FETCHES, without errors) continue one another from its position is fetched
again from where the last of them ends, read from their batch headers. So the broker serves the
next fetch while an answer is decoded and while the application processes the records; answers
arriving during a long drain are taken in between its batches and the next fetch sent at once.
A prefetched answer whose offset no longer matches the position when its turn comes (after a
seek, or an error part-way) is dropped.

Each broker's fetches run in an incremental fetch session (KIP-227, one `FetchSessionHandler` per
broker): a fetch names only the partitions whose offset, leader epoch or size changed, forgets
those not fetched this time (paused, buffered, moved away), and the broker answers only the
partitions with records, an error or new offsets. A broker that lost the session or refused its
epoch is sent a full fetch next, without backing off and without an error for the user.

Answers become one `CompletedFetch` per partition, queued in arrival order. `collect_fetch()`
drains them into at most `max.poll.records` records: a fetch whose offset no longer matches the
partition's position (a seek happened meanwhile) is dropped, a paused partition's data is kept
back for later, and partition errors are handled as Kafka's consumer does: stale leadership
(NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION, ...) refreshes
metadata and fetches again; UNKNOWN_LEADER_EPOCH just fetches again; OFFSET_OUT_OF_RANGE resets
the position by auto.offset.reset, or raises OffsetOutOfRangeError when it is none. Positions
advance only past records handed out. A failed call backs its broker off for retry.backoff.ms
and requests a metadata refresh.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable

from services.clients.cluster import Node
from services.clients.consumer.completed_fetch import CompletedFetch
from services.clients.consumer.config import ConsumerConfig
from services.clients.consumer.errors import OffsetOutOfRangeError
from services.clients.consumer.metrics import ConsumerMetrics
from services.clients.consumer.records import RecordBlock
from services.clients.consumer.subscription import FetchPosition, LeaderAndEpoch, SubscriptionState
from services.clients.fetch_session import FetchSessionHandler, SessionFetch
from services.clients.metadata import Metadata
from services.clients.partition_requests import session_fetch_request
from services.clients.transport import BROKER, AsyncRequests
from services.common.clock import Clock
from services.common.errors import Errors, KafkaError, error_for_code
from services.common.pb.odradek.broker.v1 import broker_pb2
from services.common.shared_types import NO_LEADER_EPOCH
from services.common.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

# Errors after which the partition is simply fetched again (after a metadata refresh).
REFRESH_AND_RETRY = frozenset({
    Errors.NOT_LEADER_OR_FOLLOWER, Errors.REPLICA_NOT_AVAILABLE, Errors.KAFKA_STORAGE_ERROR,
    Errors.FENCED_LEADER_EPOCH, Errors.OFFSET_NOT_AVAILABLE, Errors.LEADER_NOT_AVAILABLE})
# Answers a partition may have waiting to be drained while it is fetched again.
MAX_BUFFERED_FETCHES = 2
RETRY = frozenset({Errors.UNKNOWN_SERVER_ERROR, Errors.CORRUPT_MESSAGE, Errors.REQUEST_TIMED_OUT})
# Whole-fetch errors answered by fetching every partition again, in a new session.
SESSION_ERRORS = frozenset({Errors.FETCH_SESSION_ID_NOT_FOUND, Errors.INVALID_FETCH_SESSION_EPOCH})


class Fetcher:
    """Sends fetches and turns their answers into records; see the module docstring."""

    def __init__(self, config: ConsumerConfig, subscriptions: SubscriptionState, metadata: Metadata,
                 requests: AsyncRequests, metrics: ConsumerMetrics, clock: Clock):
        self._config = config
        self._subscriptions = subscriptions
        self._metadata = metadata
        self._requests = requests
        self._metrics = metrics
        self._clock = clock
        self._isolation_level = config.isolation_level_code
        self._fetch_timeout_ms = config.request_timeout_ms + config.fetch_max_wait_ms
        self._completed_fetches: deque[CompletedFetch] = deque()
        self._next_in_line: CompletedFetch | None = None
        self._draining: CompletedFetch | None = None
        self._nodes_with_pending_fetch: set[str] = set()
        self._node_backoff_until_ms: dict[str, int] = {}
        self._sessions: dict[int, FetchSessionHandler] = {}  # by broker id

    # ------------------------------------------------------------------ sending

    def send_fetches(self, *, check_leaders: bool = True) -> int:
        """Sends a fetch to every leader with fetchable partitions and none in flight; returns how many.

        With `check_leaders=False` partitions whose leader changed are left for a later call rather
        than moved to validation, so no partition changes state (used while records are drained).
        """
        requests = self._prepare_fetch_requests(check_leaders)
        config = self._config
        partition_max_bytes = config.max_partition_fetch_bytes
        for node, positions in requests.items():
            session = self._sessions.get(node.node_id)
            if session is None:
                session = self._sessions[node.node_id] = FetchSessionHandler()
            fetch = session.build_from({
                tp: (position.offset, _leader_epoch_field(position.current_leader.epoch), partition_max_bytes)
                for tp, position in positions.items()})
            request = session_fetch_request(
                fetch, max_wait_ms=config.fetch_max_wait_ms, min_bytes=config.fetch_min_bytes,
                max_bytes=config.fetch_max_bytes, isolation_level=self._isolation_level, rack_id=config.client_rack)
            self._nodes_with_pending_fetch.add(node.address)
            sent_ms = self._clock.monotonic_ms()
            self._requests.send(
                node.address, BROKER, "Fetch", request, self._fetch_timeout_ms,
                on_response=lambda response, node=node, positions=positions, sent_ms=sent_ms, session=session,
                fetch=fetch: self._on_fetch_response(node, positions, sent_ms, session, fetch, response),
                on_error=lambda error, node=node, positions=positions, session=session:
                    self._on_call_error(node, positions, session, error))
        return len(requests)

    def _prepare_fetch_requests(self, check_leaders: bool) -> dict[Node, dict[TopicPartition, FetchPosition]]:
        cluster = self._metadata.cluster
        buffered = self._buffered_fetches()
        now_ms = self._clock.monotonic_ms()
        requests: dict[Node, dict[TopicPartition, FetchPosition]] = {}
        subscriptions = self._subscriptions
        for tp in subscriptions.fetchable_partitions():
            position = subscriptions.position(tp)
            waiting = buffered.get(tp)
            if waiting is not None:
                position = self._prefetch_position(position, waiting)
                if position is None:
                    continue
            info = cluster.partition(tp.topic, tp.partition)
            leader = cluster.node(info.leader) if info is not None and info.has_leader else None
            if leader is None:
                logger.debug("requesting a metadata update: the leader of %s is unknown", tp)
                self._metadata.request_update()
                continue
            current = LeaderAndEpoch(info.leader, info.leader_epoch)
            if not check_leaders and current != position.current_leader:
                continue
            if subscriptions.maybe_validate_position_for_current_leader(tp, current):
                logger.debug("not fetching %s: its position awaits validation against leader %s", tp, leader)
                continue
            if leader.address in self._nodes_with_pending_fetch:
                continue
            if now_ms < self._node_backoff_until_ms.get(leader.address, 0):
                continue
            requests.setdefault(leader, {})[tp] = position._replace(
                current_leader=subscriptions.position(tp).current_leader)
        return requests

    def _buffered_fetches(self) -> dict[TopicPartition, list[CompletedFetch]]:
        buffered: dict[TopicPartition, list[CompletedFetch]] = {}
        current = self._next_in_line
        if current is not None and not current.consumed:
            buffered[current.tp] = [current]
        for fetch in self._completed_fetches:
            buffered.setdefault(fetch.tp, []).append(fetch)
        return buffered

    def _prefetch_position(self, position: FetchPosition, waiting: list[CompletedFetch]) -> FetchPosition | None:
        """Where to fetch a partition that still has answers waiting: after the last of them, when
        they are at most MAX_BUFFERED_FETCHES answers without errors, each continuing where the
        one before ends (the first from the position); otherwise None (do not fetch)."""
        if len(waiting) > MAX_BUFFERED_FETCHES:
            return None
        offset = position.offset
        epoch = position.offset_epoch
        for fetch in waiting:
            if fetch is self._draining:  # part-way through a drain that started at the position
                start = offset
            else:
                start = fetch.next_fetch_offset if fetch.initialized else fetch.fetch_offset
            if fetch.failed or start != offset:
                return None
            end_offset, epoch = fetch.end_position()
            if end_offset <= offset:
                return None
            offset = end_offset
        return FetchPosition(offset, epoch, position.current_leader)

    # ------------------------------------------------------------------ answers (on the consumer's thread)

    def _on_fetch_response(self, node: Node, positions: dict[TopicPartition, FetchPosition], sent_ms: int,
                           session: FetchSessionHandler, fetch: SessionFetch,
                           response: broker_pb2.FetchResponse) -> None:
        self._nodes_with_pending_fetch.discard(node.address)
        self._metrics.fetch_completed(self._clock.monotonic_ms() - sent_ms)
        if not session.handle_response(response):
            if response.error_code in SESSION_ERRORS and not fetch.full:
                logger.debug("fetch session %d with %s answered %s; fetching every partition again",
                             fetch.session_id, node, error_for_code(response.error_code).name)
                return
            error = KafkaError.from_code(response.error_code, response.error_message)
            logger.debug("fetch from %s failed as a whole: %s", node, error)
            self._on_fetch_error(node, positions, error, count=False)
            return
        config = self._config
        for topic in response.responses:
            for data in topic.partitions:
                tp = TopicPartition(topic.topic, data.partition_index)
                position = positions.get(tp)
                if position is None:
                    logger.debug("ignoring fetched data for %s, which was not asked for", tp)
                    continue
                records = data.records
                self._metrics.bytes_fetched(len(records))
                self._completed_fetches.append(CompletedFetch(
                    tp, position.offset, position.offset_epoch, error_code=data.error_code, records=records,
                    high_watermark=data.high_watermark, log_start_offset=data.log_start_offset,
                    last_stable_offset=data.last_stable_offset,
                    aborted_transactions=tuple((a.producer_id, a.first_offset) for a in data.aborted_transactions),
                    check_crcs=config.check_crcs, key_deserializer=config.key_deserializer,
                    value_deserializer=config.value_deserializer))

    def _on_call_error(self, node: Node, positions: dict[TopicPartition, FetchPosition],
                       session: FetchSessionHandler, error: KafkaError) -> None:
        session.handle_error()
        self._on_fetch_error(node, positions, error)

    def _on_fetch_error(self, node: Node, positions: dict[TopicPartition, FetchPosition], error: KafkaError,
                        count: bool = True) -> None:
        self._nodes_with_pending_fetch.discard(node.address)
        if count:
            self._metrics.fetch_failed()
        logger.debug("fetch of %s from %s failed: %s", sorted(positions), node, error)
        self._node_backoff_until_ms[node.address] = self._clock.monotonic_ms() + self._config.retry_backoff_ms
        if error.invalid_metadata or error.code == Errors.REQUEST_TIMED_OUT:
            self._metadata.request_update()

    # ------------------------------------------------------------------ handing records out

    def has_available_fetches(self) -> bool:
        return bool(self._completed_fetches) or (self._next_in_line is not None and not self._next_in_line.consumed)

    def collect_fetch(self, max_records: int) -> dict[TopicPartition, list[RecordBlock]]:
        """Up to `max_records` records from the fetched data, partition by partition.

        An error found after records were collected is left for the next call, which raises it.
        """
        fetched: dict[TopicPartition, list[RecordBlock]] = {}
        remaining = max_records
        paused: list[CompletedFetch] = []
        subscriptions = self._subscriptions
        try:
            while remaining > 0:
                current = self._next_in_line
                if current is None or current.consumed:
                    if not self._completed_fetches:
                        break
                    candidate = self._completed_fetches[0]
                    if candidate.initialized:
                        current = candidate
                    else:
                        try:
                            current = self._initialize(candidate)
                        except KafkaError:
                            if fetched:  # keep it queued: the next call raises, these records are kept
                                break
                            self._completed_fetches.popleft()
                            raise
                    self._completed_fetches.popleft()
                    self._next_in_line = current
                elif subscriptions.is_paused(current.tp):
                    logger.debug("not returning fetched records of paused partition %s", current.tp)
                    paused.append(current)
                    self._next_in_line = None
                else:
                    blocks = self._fetch_records(current, remaining, bool(fetched))
                    count = sum(map(len, blocks))
                    if count:
                        fetched.setdefault(current.tp, []).extend(blocks)
                        remaining -= count
                        subscriptions.move_partition_to_end(current.tp)
                    elif current.initialized and not current.consumed:
                        break  # an error is waiting for the next call
        finally:
            self._completed_fetches.extendleft(reversed(paused))
        return fetched

    def _initialize(self, fetch: CompletedFetch) -> CompletedFetch | None:
        """Checks a partition's answer before its records are read; None when there is nothing to read."""
        tp = fetch.tp
        subscriptions = self._subscriptions
        code = fetch.error_code
        if not subscriptions.is_assigned(tp):
            logger.debug("ignoring fetched records for %s: no longer assigned", tp)
            return None
        if code == Errors.NONE:
            position = subscriptions.position(tp) if subscriptions.has_valid_position(tp) else None
            if position is None or position.offset != fetch.fetch_offset:
                logger.debug("ignoring fetched records for %s at offset %d: the position is now %s", tp,
                             fetch.fetch_offset, position)
                return None
            subscriptions.update_fetch_metadata(tp, fetch.high_watermark, fetch.log_start_offset,
                                                fetch.last_stable_offset)
            fetch.initialized = True
            return fetch
        if code in REFRESH_AND_RETRY:
            logger.debug("fetch of %s answered %s; refreshing metadata", tp, KafkaError.from_code(code))
            self._metadata.request_update()
        elif code == Errors.UNKNOWN_TOPIC_OR_PARTITION:
            logger.warning("Received unknown topic or partition error in fetch for partition %s", tp)
            self._metadata.request_update()
        elif code == Errors.UNKNOWN_LEADER_EPOCH:
            logger.debug("fetch of %s: the broker does not know our leader epoch yet", tp)
        elif code == Errors.OFFSET_OUT_OF_RANGE:
            self._handle_offset_out_of_range(fetch)
        elif code in RETRY:
            logger.warning("fetch of %s answered %s; fetching again", tp, KafkaError.from_code(code))
        else:
            raise KafkaError.from_code(code, f"Unexpected error code {code} while fetching from partition {tp}")
        return None

    def _handle_offset_out_of_range(self, fetch: CompletedFetch) -> None:
        tp = fetch.tp
        subscriptions = self._subscriptions
        position = subscriptions.position(tp) if subscriptions.has_valid_position(tp) else None
        if position is None or position.offset != fetch.fetch_offset:
            logger.debug("discarding a stale out-of-range answer for %s at offset %d", tp, fetch.fetch_offset)
            return
        if not subscriptions.has_default_reset_strategy():
            raise OffsetOutOfRangeError({tp: fetch.fetch_offset})
        logger.info("Fetch position %s is out of range for partition %s, resetting offset", position, tp)
        subscriptions.request_offset_reset(tp)

    def _fetch_records(self, fetch: CompletedFetch, max_records: int, have_records: bool) -> list[RecordBlock]:
        tp = fetch.tp
        subscriptions = self._subscriptions
        if not subscriptions.is_fetchable(tp):
            logger.debug("not returning fetched records for %s: no longer fetchable", tp)
            fetch.drain()
            return []
        position = subscriptions.position(tp)
        if fetch.next_fetch_offset != position.offset:
            logger.debug("ignoring fetched records for %s at offset %d: the position is %d", tp,
                         fetch.next_fetch_offset, position.offset)
            fetch.drain()
            return []
        self._draining = fetch
        try:
            blocks = fetch.fetch_records(max_records, self._handle_arrivals)
        except KafkaError:
            if have_records:
                return []
            raise
        finally:
            self._draining = None
        if fetch.next_fetch_offset > position.offset:
            subscriptions.set_position(tp, FetchPosition(fetch.next_fetch_offset, fetch.last_epoch,
                                                         position.current_leader))
        self._metrics.records_returned(sum(map(len, blocks)))
        return blocks

    def _handle_arrivals(self) -> None:
        """Between two batches of a drain: queues answers that arrived and fetches again at once,
        instead of at the next poll, so the brokers are not left idle while a long drain runs."""
        if self._requests.has_completed():
            self._requests.poll(0)
            self.send_fetches(check_leaders=False)

    # ------------------------------------------------------------------ buffered data

    def clear_buffered_data(self, keep: Callable[[TopicPartition], bool]) -> None:
        """Drops fetched data of partitions `keep` rejects (after an assignment change)."""
        self._completed_fetches = deque(f for f in self._completed_fetches if keep(f.tp))
        if self._next_in_line is not None and not keep(self._next_in_line.tp):
            self._next_in_line.drain()
            self._next_in_line = None


def _leader_epoch_field(epoch: int | None) -> int:
    return NO_LEADER_EPOCH if epoch is None else epoch
