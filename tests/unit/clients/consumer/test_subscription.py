"""SubscriptionState: manual assignment, fetch states, resets, validation after a leader change
(KIP-320 truncation detection), pause and fetch order."""

from __future__ import annotations

import pytest

from services.clients.consumer import IllegalStateError, NoOffsetForPartitionError
from services.clients.consumer.subscription import (
    FetchPosition,
    FetchState,
    LeaderAndEpoch,
    LogTruncation,
    OffsetResetStrategy,
    SubscriptionState,
    SubscriptionType,
)
from services.common.topic_partition import TopicPartition

A, B, C = (TopicPartition("t", i) for i in range(3))
LEADER_1 = LeaderAndEpoch(1, 4)
LEADER_2 = LeaderAndEpoch(2, 5)


def state(strategy=OffsetResetStrategy.EARLIEST, *partitions) -> SubscriptionState:
    subscriptions = SubscriptionState(strategy)
    subscriptions.assign_from_user(partitions or (A, B))
    return subscriptions


def test_manual_assignment_keeps_the_state_of_partitions_kept():
    subscriptions = state()
    assert subscriptions.subscription_type is SubscriptionType.USER_ASSIGNED
    subscriptions.seek_validated(A, FetchPosition(10))
    assert not subscriptions.assign_from_user([B, A])  # same set: unchanged
    assert subscriptions.assign_from_user([A, C])
    assert subscriptions.assigned_partitions() == {A, C}
    assert subscriptions.position(A) == FetchPosition(10)
    assert subscriptions.state(C).fetch_state is FetchState.INITIALIZING
    with pytest.raises(IllegalStateError):
        subscriptions.position(B)
    subscriptions.assign_from_user([])
    assert subscriptions.subscription_type is SubscriptionType.NONE
    assert subscriptions.assigned_partitions() == set()


def test_initializing_partitions_get_the_default_reset_or_raise_without_one():
    subscriptions = state()
    subscriptions.seek_validated(B, FetchPosition(3))
    subscriptions.reset_initializing_positions()
    assert subscriptions.is_offset_reset_needed(A) and not subscriptions.is_offset_reset_needed(B)
    assert subscriptions.reset_strategy(A) is OffsetResetStrategy.EARLIEST
    assert subscriptions.partitions_needing_reset(0) == [A]

    strict = state(OffsetResetStrategy.NONE)
    with pytest.raises(NoOffsetForPartitionError) as raised:
        strict.reset_initializing_positions()
    assert raised.value.partitions() == {A, B}
    assert raised.value.error_name == "OFFSET_OUT_OF_RANGE"


def test_a_reset_answer_applies_only_while_the_same_reset_is_awaited():
    subscriptions = state()
    subscriptions.request_offset_reset(A, OffsetResetStrategy.LATEST)
    assert subscriptions.position(A) is None and not subscriptions.has_valid_position(A)
    subscriptions.set_next_retry([A], 100)
    assert subscriptions.partitions_needing_reset(99) == [] and subscriptions.partitions_needing_reset(100) == [A]
    assert not subscriptions.maybe_seek_unvalidated(A, FetchPosition(5), OffsetResetStrategy.EARLIEST)
    assert subscriptions.maybe_seek_unvalidated(A, FetchPosition(50, None, LEADER_1), OffsetResetStrategy.LATEST)
    assert subscriptions.has_valid_position(A) and subscriptions.position(A).offset == 50
    assert not subscriptions.maybe_seek_unvalidated(A, FetchPosition(60), OffsetResetStrategy.LATEST)


def test_a_position_with_an_epoch_is_validated_when_the_leader_changes():
    subscriptions = state()
    subscriptions.seek_unvalidated(A, FetchPosition(100, 4, LEADER_1))
    assert subscriptions.state(A).fetch_state is FetchState.AWAIT_VALIDATION  # epoch known: validate first
    subscriptions.maybe_complete_validation(A, FetchPosition(100, 4, LEADER_1), 4, 120)
    assert subscriptions.is_fetchable(A)
    assert not subscriptions.maybe_validate_position_for_current_leader(A, LEADER_1)
    assert subscriptions.maybe_validate_position_for_current_leader(A, LEADER_2)
    assert subscriptions.position(A) == FetchPosition(100, 4, LEADER_2)
    assert subscriptions.partitions_needing_validation(0) == [A]
    assert not subscriptions.is_fetchable(A)
    # a position without an epoch (after a seek) needs no validation
    subscriptions.seek_unvalidated(B, FetchPosition(7, None, LEADER_1))
    assert not subscriptions.maybe_validate_position_for_current_leader(B, LEADER_2)
    assert subscriptions.is_fetchable(B) and subscriptions.position(B).current_leader == LEADER_2
    # an unknown leader changes nothing
    assert not subscriptions.maybe_validate_position_for_current_leader(B, LeaderAndEpoch())


def validating(strategy: OffsetResetStrategy) -> tuple[SubscriptionState, FetchPosition]:
    subscriptions = state(strategy)
    position = FetchPosition(100, 4, LEADER_2)
    subscriptions.seek_unvalidated(A, position)
    return subscriptions, position


def test_validation_end_offset_at_or_past_the_position_completes_it():
    subscriptions, position = validating(OffsetResetStrategy.NONE)
    assert subscriptions.maybe_complete_validation(A, position, 4, 100) is None
    assert subscriptions.is_fetchable(A) and subscriptions.position(A) == position


def test_truncation_with_a_reset_strategy_moves_back_to_the_diverging_offset(caplog):
    subscriptions, position = validating(OffsetResetStrategy.LATEST)
    assert subscriptions.maybe_complete_validation(A, position, 3, 90) is None
    assert subscriptions.position(A) == FetchPosition(90, 3, LEADER_2)
    assert subscriptions.is_fetchable(A)
    assert "Truncation detected for partition t-0 at offset 100" in caplog.text


def test_truncation_without_a_reset_strategy_is_reported():
    subscriptions, position = validating(OffsetResetStrategy.NONE)
    truncation = subscriptions.maybe_complete_validation(A, position, 3, 90)
    assert truncation == LogTruncation(A, position, (90, 3))
    assert subscriptions.state(A).fetch_state is FetchState.AWAIT_VALIDATION
    unknown = subscriptions.maybe_complete_validation(A, position, -1, -1)
    assert unknown == LogTruncation(A, position, None)


def test_unknown_epoch_end_resets_with_a_strategy_and_stale_answers_are_ignored():
    subscriptions, position = validating(OffsetResetStrategy.EARLIEST)
    assert subscriptions.maybe_complete_validation(A, position._replace(offset=5), 3, 1) is None  # stale
    assert subscriptions.state(A).fetch_state is FetchState.AWAIT_VALIDATION
    assert subscriptions.maybe_complete_validation(A, position, -1, -1) is None
    assert subscriptions.is_offset_reset_needed(A)
    assert subscriptions.reset_strategy(A) is OffsetResetStrategy.EARLIEST


def test_pause_fetchability_and_fetch_order():
    subscriptions = state(OffsetResetStrategy.EARLIEST, A, B, C)
    for tp in (A, B, C):
        subscriptions.seek_validated(tp, FetchPosition(0))
    subscriptions.pause(B)
    assert subscriptions.paused_partitions() == {B} and subscriptions.is_paused(B)
    assert subscriptions.fetchable_partitions() == [A, C]
    assert subscriptions.fetchable_partitions(lambda tp: tp != A) == [C]
    subscriptions.move_partition_to_end(A)
    subscriptions.resume(B)
    assert subscriptions.fetchable_partitions() == [B, C, A]
    assert subscriptions.assigned_list() == [B, C, A]
    subscriptions.request_offset_reset(C)
    assert subscriptions.fetchable_partitions() == [B, A] and not subscriptions.has_all_fetch_positions()
    with pytest.raises(IllegalStateError):
        subscriptions.set_position(C, FetchPosition(3))
    subscriptions.set_position(A, FetchPosition(3, 2))
    assert subscriptions.position(A) == FetchPosition(3, 2)


def test_lag_comes_from_the_last_fetch():
    subscriptions = state()
    assert subscriptions.partition_lag(A) is None
    subscriptions.seek_validated(A, FetchPosition(10))
    subscriptions.update_fetch_metadata(A, high_watermark=25, log_start_offset=0, last_stable_offset=20)
    assert subscriptions.partition_lag(A) == 15
    assert subscriptions.partition_lag(A, read_committed=True) == 10
    subscriptions.update_fetch_metadata(C, 1, 1, 1)  # not assigned: ignored
