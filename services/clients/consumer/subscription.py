"""Which partitions a consumer reads and where it stands in each, as Kafka's SubscriptionState.

`SubscriptionState` holds how partitions are chosen (`subscription_type`), the assignment and,
per partition, a `TopicPartitionState`. The ways of choosing are mutually exclusive (changing
from one to another needs `unsubscribe()` first, else IllegalStateError):

    USER_ASSIGNED    `assign_from_user(partitions)`: the application names the partitions
    AUTO_TOPICS      `subscribe(topics, listener)`: the group assigns partitions of these topics
    AUTO_PATTERN     `subscribe_pattern(pattern, listener)`: as AUTO_TOPICS, over the topics the
                     pattern fully matches (`subscribe_from_pattern` sets them from metadata)

With a group, `assign_from_subscribed(partitions)` installs each new assignment; a group leader
also records the topics of every member (`group_subscribe`), so its metadata covers them all
(`metadata_topics`). The rebalance listener is kept here with the subscription.

    fetch state      INITIALIZING (no position yet), FETCHING (valid position), AWAIT_RESET (a
                     ListOffsets lookup is due, by `reset_strategy`), AWAIT_VALIDATION (the
                     position must be checked against a new leader with OffsetForLeaderEpoch)
    position         FetchPosition(offset, offset_epoch, current_leader): the next offset to
                     return, the leader epoch of the record before it (None when unknown) and
                     the leader (node id, epoch) the position was last checked against
    paused           a paused partition is neither fetched nor returned
    pending revocation  set when a rebalance is about to revoke the partition: from then on it is
                     neither fetched nor returned (its position may still be committed)
    high watermark, log start offset, last stable offset: from the last fetch answer (lag)
    next_retry_ms    when a failed reset or validation may be tried again

A seek sets a position without an epoch, which needs no validation. A position with an epoch
moves to AWAIT_VALIDATION when the partition's leader or leader epoch changes
(`maybe_validate_position_for_current_leader`); `maybe_complete_validation` applies the
leader's answer: an end offset below the position means the log was truncated, and the position
moves back to that offset when a reset strategy exists, else the truncation is reported.
Partitions keep their assignment order, and a partition whose records were just returned moves
to the end so the next fetch asks for the others first.

The state is used from the consumer's own thread only and takes no locks.
"""

from __future__ import annotations

import enum
import logging
import re
from collections.abc import Callable, Iterable
from typing import NamedTuple

from services.clients.consumer.errors import IllegalStateError, NoOffsetForPartitionError
from services.clients.consumer.listener import NO_OP_LISTENER, ConsumerRebalanceListener
from services.clients.consumer.records import OffsetAndMetadata
from services.common.topic_partition import TopicPartition

logger = logging.getLogger(__name__)


class OffsetResetStrategy(enum.Enum):
    EARLIEST = "earliest"
    LATEST = "latest"
    NONE = "none"


class SubscriptionType(enum.Enum):
    NONE = "none"
    AUTO_TOPICS = "auto_topics"
    AUTO_PATTERN = "auto_pattern"
    USER_ASSIGNED = "user_assigned"

    @property
    def auto_assigned(self) -> bool:
        return self in (SubscriptionType.AUTO_TOPICS, SubscriptionType.AUTO_PATTERN)


MUTUALLY_EXCLUSIVE = "Subscription to topics, partitions and pattern are mutually exclusive"


class FetchState(enum.Enum):
    INITIALIZING = "initializing"
    FETCHING = "fetching"
    AWAIT_RESET = "await_reset"
    AWAIT_VALIDATION = "await_validation"

    @property
    def requires_position(self) -> bool:
        return self in (FetchState.FETCHING, FetchState.AWAIT_VALIDATION)

    @property
    def has_valid_position(self) -> bool:
        return self is FetchState.FETCHING


class LeaderAndEpoch(NamedTuple):
    """A partition's leader as the metadata names it: node id and leader epoch, None when unknown."""

    leader: int | None = None
    epoch: int | None = None


UNKNOWN_LEADER = LeaderAndEpoch()  # no leader known for the partition yet


class FetchPosition(NamedTuple):
    offset: int
    offset_epoch: int | None = None
    current_leader: LeaderAndEpoch = UNKNOWN_LEADER


class LogTruncation(NamedTuple):
    """A truncation found by validation: the position held and the first diverging (offset, epoch)."""

    tp: TopicPartition
    position: FetchPosition
    divergent: tuple[int, int] | None


class TopicPartitionState:
    __slots__ = ("fetch_state", "position", "paused", "pending_revocation", "reset_strategy", "next_retry_ms",
                 "high_watermark", "log_start_offset", "last_stable_offset")

    def __init__(self) -> None:
        self.fetch_state = FetchState.INITIALIZING
        self.position: FetchPosition | None = None
        self.paused = False
        self.pending_revocation = False
        self.reset_strategy: OffsetResetStrategy | None = None
        self.next_retry_ms: int | None = None
        self.high_watermark: int | None = None
        self.log_start_offset: int | None = None
        self.last_stable_offset: int | None = None

    def transition(self, state: FetchState, position: FetchPosition | None = None) -> None:
        if state.requires_position and position is None:
            raise IllegalStateError(f"{state.name} needs a position")
        self.fetch_state = state
        self.position = position if state.requires_position else None
        self.next_retry_ms = None
        if state is not FetchState.AWAIT_RESET:
            self.reset_strategy = None

    def awaiting_retry(self, now_ms: int) -> bool:
        return self.next_retry_ms is not None and now_ms < self.next_retry_ms

    def __repr__(self) -> str:
        return (f"TopicPartitionState({self.fetch_state.name}, position={self.position}, paused={self.paused}, "
                f"reset={self.reset_strategy})")


def subscribed_topics(topics: Iterable[str] | str) -> set[str]:
    """The topics of a subscribe() call (one name or several), refusing blank names."""
    names = [topics] if isinstance(topics, str) else list(topics)
    for name in names:
        if not isinstance(name, str) or not name.strip():
            raise ValueError("Topic collection to subscribe to cannot contain null or empty topic")
    return set(names)


def compiled_pattern(pattern: str | re.Pattern[str]) -> re.Pattern[str]:
    """The regular expression of a pattern subscription, refusing an empty one."""
    text = pattern.pattern if isinstance(pattern, re.Pattern) else pattern
    if not isinstance(text, str) or not text:
        raise ValueError("Topic pattern to subscribe to cannot be empty")
    return pattern if isinstance(pattern, re.Pattern) else re.compile(pattern)


def _fetchable(state: TopicPartitionState) -> bool:
    return not state.paused and not state.pending_revocation and state.fetch_state is FetchState.FETCHING


class SubscriptionState:
    """The assignment and per-partition positions; see the module docstring."""

    def __init__(self, default_reset_strategy: OffsetResetStrategy = OffsetResetStrategy.LATEST):
        self.default_reset_strategy = default_reset_strategy
        self.subscription_type = SubscriptionType.NONE
        self.listener: ConsumerRebalanceListener = NO_OP_LISTENER
        self._assignment: dict[TopicPartition, TopicPartitionState] = {}
        self._subscription: frozenset[str] = frozenset()
        self._group_subscription: frozenset[str] = frozenset()
        self._pattern: re.Pattern[str] | None = None

    # ------------------------------------------------------------------ subscription

    def _set_subscription_type(self, wanted: SubscriptionType) -> None:
        if self.subscription_type is SubscriptionType.NONE:
            self.subscription_type = wanted
        elif self.subscription_type is not wanted:
            raise IllegalStateError(MUTUALLY_EXCLUSIVE)

    def subscribe(self, topics: Iterable[str], listener: ConsumerRebalanceListener | None = None) -> bool:
        """Subscribes to exactly `topics` (replacing an earlier topic subscription); True when changed."""
        self._set_subscription_type(SubscriptionType.AUTO_TOPICS)
        self.listener = listener or NO_OP_LISTENER
        return self._change_subscription(topics)

    def subscribe_pattern(self, pattern: re.Pattern[str], listener: ConsumerRebalanceListener | None = None) -> None:
        self._set_subscription_type(SubscriptionType.AUTO_PATTERN)
        self.listener = listener or NO_OP_LISTENER
        self._pattern = pattern

    def subscribe_from_pattern(self, topics: Iterable[str]) -> bool:
        """Sets the topics a pattern subscription currently matches; True when they changed."""
        if self.subscription_type is not SubscriptionType.AUTO_PATTERN:
            raise IllegalStateError(f"Attempt to subscribe from pattern while subscription type is "
                                    f"{self.subscription_type.name}")
        return self._change_subscription(topics)

    def _change_subscription(self, topics: Iterable[str]) -> bool:
        wanted = frozenset(topics)
        if wanted == self._subscription:
            return False
        self._subscription = wanted
        return True

    def group_subscribe(self, topics: Iterable[str]) -> bool:
        """A group leader's view of every member's topics; True when it adds topics to our own."""
        if not self.has_auto_assigned_partitions():
            raise IllegalStateError(MUTUALLY_EXCLUSIVE)
        self._group_subscription = frozenset(topics)
        return not self._group_subscription <= self._subscription

    def reset_group_subscription(self) -> None:
        self._group_subscription = frozenset()

    def subscription(self) -> set[str]:
        """The subscribed topics (for a pattern, those it matched last)."""
        return set(self._subscription)

    @property
    def subscribed_pattern(self) -> re.Pattern[str] | None:
        return self._pattern

    def metadata_topics(self) -> set[str]:
        """Topics whose metadata the consumer needs: its own, plus the group's when it leads."""
        return set(self._subscription | self._group_subscription)

    def matches_subscribed_pattern(self, topic: str) -> bool:
        return self._pattern is not None and self._pattern.fullmatch(topic) is not None

    def has_auto_assigned_partitions(self) -> bool:
        return self.subscription_type.auto_assigned

    def has_pattern_subscription(self) -> bool:
        return self.subscription_type is SubscriptionType.AUTO_PATTERN

    def has_no_subscription_or_user_assignment(self) -> bool:
        return self.subscription_type is SubscriptionType.NONE

    # ------------------------------------------------------------------ assignment

    def assign_from_user(self, partitions: Iterable[TopicPartition]) -> bool:
        """Sets the manual assignment; partitions kept from the last one keep their state.

        Returns True when the assignment changed.
        """
        wanted = list(dict.fromkeys(partitions))
        if self.subscription_type not in (SubscriptionType.NONE, SubscriptionType.USER_ASSIGNED):
            raise IllegalStateError(MUTUALLY_EXCLUSIVE)
        self.subscription_type = SubscriptionType.USER_ASSIGNED if wanted else SubscriptionType.NONE
        if set(wanted) == set(self._assignment):
            return False
        self._assignment = {tp: self._assignment.get(tp) or TopicPartitionState() for tp in wanted}
        return True

    def assign_from_subscribed(self, partitions: Iterable[TopicPartition]) -> None:
        """Installs an assignment the group made; partitions kept from the last one keep their state."""
        if not self.has_auto_assigned_partitions():
            raise IllegalStateError("Attempt to dynamically assign partitions while manual assignment in use")
        self._assignment = {tp: self._assignment.get(tp) or TopicPartitionState() for tp in partitions}

    def check_assignment_matched_subscription(self, partitions: Iterable[TopicPartition]) -> bool:
        """True when every partition belongs to a subscribed (or pattern-matched) topic."""
        return all(tp.topic in self._subscription or self.matches_subscribed_pattern(tp.topic)
                   for tp in partitions)

    def unsubscribe(self) -> None:
        self._assignment = {}
        self._subscription = frozenset()
        self._group_subscription = frozenset()
        self._pattern = None
        self.listener = NO_OP_LISTENER
        self.subscription_type = SubscriptionType.NONE

    def assigned_partitions(self) -> set[TopicPartition]:
        return set(self._assignment)

    def assigned_list(self) -> list[TopicPartition]:
        """The assigned partitions in fetch order."""
        return list(self._assignment)

    def is_assigned(self, tp: TopicPartition) -> bool:
        return tp in self._assignment

    def topics(self) -> set[str]:
        return {tp.topic for tp in self._assignment}

    def move_partition_to_end(self, tp: TopicPartition) -> None:
        state = self._assignment.pop(tp, None)
        if state is not None:
            self._assignment[tp] = state

    def state(self, tp: TopicPartition) -> TopicPartitionState:
        state = self._assignment.get(tp)
        if state is None:
            raise IllegalStateError(f"No current assignment for partition {tp}")
        return state

    # ------------------------------------------------------------------ positions

    def position(self, tp: TopicPartition) -> FetchPosition | None:
        return self.state(tp).position

    def has_valid_position(self, tp: TopicPartition) -> bool:
        state = self._assignment.get(tp)
        return state is not None and state.fetch_state.has_valid_position

    def has_all_fetch_positions(self) -> bool:
        return all(s.fetch_state.has_valid_position for s in self._assignment.values())

    def initializing_partitions(self) -> list[TopicPartition]:
        """Partitions without any position yet (their committed offsets are looked up first)."""
        return [tp for tp, s in self._assignment.items() if s.fetch_state is FetchState.INITIALIZING]

    def all_consumed(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """What to commit: each partition with a valid position, with the leader epoch of the last
        record returned."""
        return {tp: OffsetAndMetadata(s.position.offset, "", s.position.offset_epoch)
                for tp, s in self._assignment.items() if s.fetch_state.has_valid_position}

    def seek_unvalidated(self, tp: TopicPartition, position: FetchPosition) -> None:
        """A position to validate against its leader first when it carries an epoch."""
        state = self.state(tp)
        if position.offset_epoch is not None and position.current_leader.epoch is not None:
            state.transition(FetchState.AWAIT_VALIDATION, position)
        else:
            state.transition(FetchState.FETCHING, position)

    def seek_validated(self, tp: TopicPartition, position: FetchPosition) -> None:
        self.state(tp).transition(FetchState.FETCHING, position)

    def maybe_seek_unvalidated(self, tp: TopicPartition, position: FetchPosition,
                               strategy: OffsetResetStrategy) -> bool:
        """Applies a reset answer, unless the partition was unassigned or sought meanwhile."""
        state = self._assignment.get(tp)
        if state is None or state.fetch_state is not FetchState.AWAIT_RESET or state.reset_strategy != strategy:
            logger.debug("skipping the reset of %s to %s: no longer awaiting a %s reset", tp, position, strategy)
            return False
        self.seek_unvalidated(tp, position)
        return True

    def set_position(self, tp: TopicPartition, position: FetchPosition) -> None:
        """Advances a valid position (after records were returned)."""
        state = self.state(tp)
        if not state.fetch_state.has_valid_position:
            raise IllegalStateError(f"Cannot set a new position for {tp} without a valid current position")
        state.position = position

    # ------------------------------------------------------------------ resets

    def request_offset_reset(self, tp: TopicPartition, strategy: OffsetResetStrategy | None = None) -> None:
        state = self.state(tp)
        state.transition(FetchState.AWAIT_RESET)
        state.reset_strategy = strategy or self.default_reset_strategy

    def has_default_reset_strategy(self) -> bool:
        return self.default_reset_strategy is not OffsetResetStrategy.NONE

    def is_offset_reset_needed(self, tp: TopicPartition) -> bool:
        return self.state(tp).fetch_state is FetchState.AWAIT_RESET

    def reset_strategy(self, tp: TopicPartition) -> OffsetResetStrategy | None:
        return self.state(tp).reset_strategy

    def reset_initializing_positions(self) -> None:
        """Partitions without any position get the default reset strategy; with none, raises
        NoOffsetForPartitionError naming them."""
        without_offsets = []
        for tp, state in self._assignment.items():
            if state.fetch_state is FetchState.INITIALIZING:
                if self.has_default_reset_strategy():
                    self.request_offset_reset(tp)
                else:
                    without_offsets.append(tp)
        if without_offsets:
            raise NoOffsetForPartitionError(without_offsets)

    def partitions_needing_reset(self, now_ms: int) -> list[TopicPartition]:
        return [tp for tp, s in self._assignment.items()
                if s.fetch_state is FetchState.AWAIT_RESET and not s.awaiting_retry(now_ms)]

    def set_next_retry(self, partitions: Iterable[TopicPartition], next_retry_ms: int) -> None:
        """Holds back the next reset or validation attempt of `partitions` until `next_retry_ms`."""
        for tp in partitions:
            state = self._assignment.get(tp)
            if state is not None:
                state.next_retry_ms = next_retry_ms

    # ------------------------------------------------------------------ validation after a leader change

    def maybe_validate_position_for_current_leader(self, tp: TopicPartition, leader: LeaderAndEpoch) -> bool:
        """Records the partition's current leader; True when the position now awaits validation."""
        state = self._assignment.get(tp)
        if state is None or state.fetch_state is FetchState.AWAIT_RESET or leader.leader is None:
            return False
        position = state.position
        if position is not None and position.current_leader != leader:
            self.seek_unvalidated(tp, position._replace(current_leader=leader))
        return state.fetch_state is FetchState.AWAIT_VALIDATION

    def partitions_needing_validation(self, now_ms: int) -> list[TopicPartition]:
        return [tp for tp, s in self._assignment.items()
                if s.fetch_state is FetchState.AWAIT_VALIDATION and not s.awaiting_retry(now_ms)]

    def maybe_complete_validation(self, tp: TopicPartition, requested: FetchPosition, end_epoch: int,
                                  end_offset: int) -> LogTruncation | None:
        """Applies an OffsetForLeaderEpoch answer (the end of `requested.offset_epoch` on the leader)."""
        state = self._assignment.get(tp)
        if state is None or state.fetch_state is not FetchState.AWAIT_VALIDATION:
            return None
        if state.position != requested:
            logger.debug("skipping the validation of %s: position %s changed to %s", tp, requested, state.position)
            return None
        if end_offset < 0 or end_epoch < 0:
            if self.has_default_reset_strategy():
                logger.info("Truncation detected for partition %s at offset %d, but no end offset is known for "
                            "epoch %s; resetting the offset", tp, requested.offset, requested.offset_epoch)
                self.request_offset_reset(tp)
                return None
            return LogTruncation(tp, requested, None)
        if end_offset < requested.offset:
            if self.has_default_reset_strategy():
                logger.warning("Truncation detected for partition %s at offset %d, resetting offset to the "
                               "first offset known to diverge %d", tp, requested.offset, end_offset)
                self.seek_validated(tp, FetchPosition(end_offset, end_epoch, requested.current_leader))
                return None
            return LogTruncation(tp, requested, (end_offset, end_epoch))
        state.transition(FetchState.FETCHING, requested)
        return None

    # ------------------------------------------------------------------ pause and fetchability

    def pause(self, tp: TopicPartition) -> None:
        self.state(tp).paused = True

    def resume(self, tp: TopicPartition) -> None:
        self.state(tp).paused = False

    def is_paused(self, tp: TopicPartition) -> bool:
        state = self._assignment.get(tp)
        return state is not None and state.paused

    def paused_partitions(self) -> set[TopicPartition]:
        return {tp for tp, s in self._assignment.items() if s.paused}

    def mark_pending_revocation(self, partitions: Iterable[TopicPartition]) -> None:
        """Partitions about to be revoked by a rebalance are neither fetched nor returned any more."""
        for tp in partitions:
            state = self._assignment.get(tp)
            if state is not None:
                state.pending_revocation = True

    def is_fetchable(self, tp: TopicPartition) -> bool:
        """Assigned, not paused, not about to be revoked, and holding a valid position."""
        state = self._assignment.get(tp)
        return state is not None and _fetchable(state)

    def fetchable_partitions(self, keep: Callable[[TopicPartition], bool] | None = None) -> list[TopicPartition]:
        return [tp for tp, s in self._assignment.items() if _fetchable(s) and (keep is None or keep(tp))]

    # ------------------------------------------------------------------ what the last fetch said

    def update_fetch_metadata(self, tp: TopicPartition, high_watermark: int, log_start_offset: int,
                              last_stable_offset: int) -> None:
        state = self._assignment.get(tp)
        if state is None:
            return
        if high_watermark >= 0:
            state.high_watermark = high_watermark
        if log_start_offset >= 0:
            state.log_start_offset = log_start_offset
        if last_stable_offset >= 0:
            state.last_stable_offset = last_stable_offset

    def partition_lag(self, tp: TopicPartition, read_committed: bool = False) -> int | None:
        """Records between the position and the high watermark (last stable offset when
        read_committed), or None when either is unknown."""
        state = self._assignment.get(tp)
        if state is None or state.position is None:
            return None
        end = state.last_stable_offset if read_committed else state.high_watermark
        return None if end is None else end - state.position.offset
