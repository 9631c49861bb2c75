"""The partition state machine's decisions: initialization, elections, effects, failures."""

from __future__ import annotations

import logging

import pytest

from services.controller.state.effects import (
    CreatePartitionState,
    SendLeaderAndIsr,
    SendUpdateMetadata,
    StateChangeFailed,
    UpdatePartitionState,
    without_partitions,
)
from services.controller.state.election import (
    ControlledShutdownPartitionLeaderElectionStrategy,
    OfflinePartitionLeaderElectionStrategy,
    PreferredReplicaPartitionLeaderElectionStrategy,
)
from services.controller.state.model import LeaderAndIsr, LeaderIsrAndControllerEpoch
from services.controller.state.partition_state_machine import PartitionStateMachine
from services.controller.state.records import (
    BrokerShuttingDown,
    PartitionLeadershipChanged,
    TopicDeletionQueued,
)
from services.controller.state.states import PartitionState
from tests.unit.controller.cluster import (
    CONTROLLER_EPOCH,
    CONTROLLER_EPOCH_ZK_VERSION,
    add_topic,
    config,
    leader_and_isr_targets,
    make_context,
    of_type,
    set_leadership,
    set_partition_state,
    tp,
    update_metadata_brokers,
    writes,
)

NEW = PartitionState.NEW_PARTITION
ONLINE = PartitionState.ONLINE_PARTITION
OFFLINE = PartitionState.OFFLINE_PARTITION
OFFLINE_STRATEGY = OfflinePartitionLeaderElectionStrategy()


def test_new_partition_gets_first_live_replica_as_leader_and_live_replicas_as_isr():
    context = make_context(live=[2, 3, 4])
    add_topic(context, "t", {0: [1, 3, 2]}, NEW)
    machine = PartitionStateMachine(context, config())

    outcome = machine.handle_state_changes([tp("t", 0)], ONLINE, OFFLINE_STRATEGY)

    expected = LeaderAndIsr(3, 0, (3, 2), 0)
    assert outcome.results == {tp("t", 0): expected}
    assert context.partition_state(tp("t", 0)) == ONLINE
    assert context.partition_leadership(tp("t", 0)) == LeaderIsrAndControllerEpoch(expected, CONTROLLER_EPOCH)
    assert outcome.effects[0] == CreatePartitionState(
        tp("t", 0), expected, CONTROLLER_EPOCH, CONTROLLER_EPOCH_ZK_VERSION
    )
    assert leader_and_isr_targets(outcome.effects) == {tp("t", 0): [2, 3]}
    assert all(s.is_new for e in of_type(outcome.effects, SendLeaderAndIsr) for s in e.partition_states)
    assert update_metadata_brokers(outcome.effects) == [2, 3, 4]


def test_new_partition_without_live_replica_stays_new(caplog):
    context = make_context(live=[5])
    add_topic(context, "t", {0: [1, 2]}, NEW)
    machine = PartitionStateMachine(context, config(), controller_id=9)

    with caplog.at_level(logging.ERROR):
        outcome = machine.handle_state_changes([tp("t", 0)], ONLINE, OFFLINE_STRATEGY)

    assert context.partition_state(tp("t", 0)) == NEW
    assert isinstance(outcome.results[tp("t", 0)], StateChangeFailed)
    assert "No assigned replica is alive" in str(outcome.results[tp("t", 0)])
    assert outcome.effects == []
    assert context.partition_leadership(tp("t", 0)) is None
    assert "failed to change state for partition t-0" in caplog.text


def test_shutting_down_brokers_are_not_live_for_initialization():
    context = make_context(live=[1, 2], shutting_down=[1])
    add_topic(context, "t", {0: [1, 2]}, NEW)
    outcome = PartitionStateMachine(context, config()).handle_state_changes(
        [tp("t", 0)], ONLINE, OFFLINE_STRATEGY
    )
    assert outcome.results[tp("t", 0)] == LeaderAndIsr(2, 0, (2,), 0)


def test_offline_partition_election_writes_conditionally_and_notifies():
    context = make_context(live=[2, 3])
    add_topic(context, "t", {0: [1, 2, 3]}, OFFLINE)
    set_leadership(context, tp("t", 0), leader=1, isr=[1, 2, 3], leader_epoch=3, zk_version=7)

    outcome = PartitionStateMachine(context, config()).handle_state_changes(
        [tp("t", 0)], ONLINE, OFFLINE_STRATEGY
    )

    written = LeaderAndIsr(2, 4, (2, 3), 8)
    assert outcome.results == {tp("t", 0): written}
    assert writes(outcome.effects) == {
        tp("t", 0): UpdatePartitionState(
            tp("t", 0), written, CONTROLLER_EPOCH, CONTROLLER_EPOCH_ZK_VERSION, 7
        )
    }
    assert context.partition_leadership(tp("t", 0)).leader_and_isr == written
    assert context.partition_state(tp("t", 0)) == ONLINE
    assert leader_and_isr_targets(outcome.effects) == {tp("t", 0): [2, 3]}
    assert update_metadata_brokers(outcome.effects) == [2, 3]
    # writes come before the requests announcing them
    kinds = [type(e) for e in outcome.effects]
    assert kinds.index(UpdatePartitionState) < kinds.index(SendLeaderAndIsr) < kinds.index(SendUpdateMetadata)


def test_failed_election_leaves_state_unchanged():
    context = make_context(live=[2, 3])
    add_topic(context, "t", {0: [1, 2, 3]}, OFFLINE)
    set_leadership(context, tp("t", 0), leader=1, isr=[1])

    outcome = PartitionStateMachine(context, config()).handle_state_changes(
        [tp("t", 0)], ONLINE, OFFLINE_STRATEGY
    )

    assert context.partition_state(tp("t", 0)) == OFFLINE
    error = outcome.results[tp("t", 0)]
    assert isinstance(error, StateChangeFailed)
    assert (
        "Failed to elect leader for partition t-0 under strategy OfflinePartitionLeaderElectionStrategy"
        in str(error)
    )
    assert outcome.effects == []


def test_unclean_election_enabled_by_broker_config():
    context = make_context(live=[2, 3])
    add_topic(context, "t", {0: [1, 3, 2]}, OFFLINE)
    set_leadership(context, tp("t", 0), leader=1, isr=[1])
    machine = PartitionStateMachine(context, config(unclean_leader_election_enable=True))
    outcome = machine.handle_state_changes([tp("t", 0)], ONLINE, OFFLINE_STRATEGY)
    assert outcome.results[tp("t", 0)] == LeaderAndIsr(3, 4, (3,), 8)


def test_leadership_written_by_newer_controller_aborts_election():
    context = make_context(live=[1, 2])
    add_topic(context, "t", {0: [1, 2]}, ONLINE)
    set_leadership(context, tp("t", 0), leader=2, isr=[1, 2], controller_epoch=CONTROLLER_EPOCH + 1)

    outcome = PartitionStateMachine(context, config()).handle_state_changes(
        [tp("t", 0)], ONLINE, PreferredReplicaPartitionLeaderElectionStrategy()
    )

    assert "already written by another controller" in str(outcome.results[tp("t", 0)])
    assert outcome.effects == []


def test_missing_leadership_fails_election():
    context = make_context(live=[1, 2])
    add_topic(context, "t", {0: [1, 2]}, OFFLINE)
    outcome = PartitionStateMachine(context, config()).handle_state_changes(
        [tp("t", 0)], ONLINE, OFFLINE_STRATEGY
    )
    assert "LeaderAndIsr information doesn't exist" in str(outcome.results[tp("t", 0)])


def test_election_strategy_is_required_for_elections():
    context = make_context(live=[1])
    add_topic(context, "t", {0: [1]}, OFFLINE)
    set_leadership(context, tp("t", 0), leader=1, isr=[1])
    with pytest.raises(ValueError, match="election strategy is required"):
        PartitionStateMachine(context, config()).handle_state_changes([tp("t", 0)], ONLINE)


def test_strategy_is_not_needed_to_initialize_new_partitions():
    context = make_context(live=[1])
    add_topic(context, "t", {0: [1]}, NEW)
    outcome = PartitionStateMachine(context, config()).handle_state_changes([tp("t", 0)], ONLINE)
    assert context.partition_state(tp("t", 0)) == ONLINE
    assert outcome.successes() == {tp("t", 0): LeaderAndIsr(1, 0, (1,), 0)}


def test_every_controller_change_bumps_the_leader_epoch():
    context = make_context(live=[1, 2, 3])
    add_topic(context, "t", {0: [1, 2, 3]}, ONLINE)
    set_leadership(context, tp("t", 0), leader=2, isr=[1, 2, 3], leader_epoch=10, zk_version=20)
    machine = PartitionStateMachine(context, config())

    machine.handle_state_changes([tp("t", 0)], ONLINE, PreferredReplicaPartitionLeaderElectionStrategy())
    assert context.partition_leadership(tp("t", 0)).leader_and_isr == LeaderAndIsr(1, 11, (1, 2, 3), 21)
    context.apply(BrokerShuttingDown(1))
    machine.handle_state_changes([tp("t", 0)], ONLINE, ControlledShutdownPartitionLeaderElectionStrategy())
    assert context.partition_leadership(tp("t", 0)).leader_and_isr == LeaderAndIsr(2, 12, (2, 3), 22)


def test_mixed_batch_initializes_elects_and_skips():
    context = make_context(live=[1, 2])
    add_topic(context, "t", {0: [1, 2], 1: [2, 1], 2: [1, 2]})
    set_partition_state(context, tp("t", 0), NEW)
    set_partition_state(context, tp("t", 1), OFFLINE)
    set_leadership(context, tp("t", 1), leader=3, isr=[2, 3])
    # t-2 is NonExistent: invalid for Online

    outcome = PartitionStateMachine(context, config()).handle_state_changes(
        [tp("t", 0), tp("t", 1), tp("t", 2)], ONLINE, OFFLINE_STRATEGY
    )

    assert outcome.invalid == [tp("t", 2)]
    assert set(outcome.successes()) == {tp("t", 0), tp("t", 1)}
    assert isinstance(writes(outcome.effects)[tp("t", 0)], CreatePartitionState)
    assert isinstance(writes(outcome.effects)[tp("t", 1)], UpdatePartitionState)
    # requests are batched: one LeaderAndIsr per broker carrying both partitions
    assert [len(e.partition_states) for e in of_type(outcome.effects, SendLeaderAndIsr)] == [2, 2]
    assert [len(e.partition_states) for e in of_type(outcome.effects, SendUpdateMetadata)] == [2, 2]


@pytest.mark.parametrize("target", [OFFLINE, PartitionState.NON_EXISTENT_PARTITION, NEW])
def test_non_online_targets_only_record_the_state(target):
    context = make_context(live=[1])
    add_topic(context, "t", {0: [1]})
    before = {NEW: PartitionState.NON_EXISTENT_PARTITION, OFFLINE: ONLINE}.get(target, OFFLINE)
    set_partition_state(context, tp("t", 0), before)
    outcome = PartitionStateMachine(context, config()).handle_state_changes([tp("t", 0)], target)
    assert context.partition_state(tp("t", 0)) == target
    assert outcome.effects == []


def test_startup_sets_states_from_leadership_then_brings_partitions_online():
    context = make_context(live=[1, 2])
    add_topic(context, "t", {0: [1, 2], 1: [3, 2], 2: [1, 2], 3: [3]})
    set_leadership(context, tp("t", 0), leader=1, isr=[1, 2])  # leader live -> Online
    set_leadership(context, tp("t", 1), leader=3, isr=[3, 2])  # leader dead -> Offline -> elect 2
    # t-2 has no leadership -> New -> initialized
    set_leadership(context, tp("t", 3), leader=3, isr=[3])  # dead, no live replica -> stays Offline

    outcome = PartitionStateMachine(context, config()).startup()

    assert context.partition_state(tp("t", 0)) == ONLINE
    assert context.partition_state(tp("t", 1)) == ONLINE
    assert context.partition_leadership(tp("t", 1)).leader_and_isr.leader == 2
    assert context.partition_state(tp("t", 2)) == ONLINE
    assert context.partition_state(tp("t", 3)) == OFFLINE
    assert set(outcome.successes()) == {tp("t", 1), tp("t", 2)}
    assert set(outcome.failed()) == {tp("t", 3)}


def test_trigger_online_skips_topics_queued_for_deletion_and_can_target_one_topic():
    context = make_context(live=[1])
    add_topic(context, "keep", {0: [1]}, NEW)
    add_topic(context, "gone", {0: [1]}, NEW)
    add_topic(context, "other", {0: [1]}, NEW)
    context.apply(TopicDeletionQueued(frozenset({"gone"})))
    machine = PartitionStateMachine(context, config())

    outcome = machine.trigger_online_partition_state_change("keep")
    assert set(outcome.results) == {tp("keep", 0)}
    outcome = machine.trigger_online_partition_state_change()
    assert set(outcome.results) == {tp("other", 0)}
    assert context.partition_state(tp("gone", 0)) == NEW


def test_empty_input_does_nothing():
    context = make_context(live=[1])
    outcome = PartitionStateMachine(context, config()).handle_state_changes([], ONLINE)
    assert outcome.effects == [] and outcome.records == [] and outcome.results == {}


def test_version_conflict_retry_protocol():
    """A leader changed the ISR behind the controller's back: the conditional write fails, the
    service drops that partition's requests, reloads the state znode and runs the change again."""
    context = make_context(live=[1, 2, 3])
    add_topic(context, "t", {0: [1, 2, 3]}, ONLINE)
    set_leadership(context, tp("t", 0), leader=2, isr=[1, 2, 3], leader_epoch=3, zk_version=7)
    machine = PartitionStateMachine(context, config())
    strategy = PreferredReplicaPartitionLeaderElectionStrategy()

    first = machine.handle_state_changes([tp("t", 0)], ONLINE, strategy)
    assert writes(first.effects)[tp("t", 0)].expected_zk_version == 7
    assert without_partitions(first.effects, [tp("t", 0)]) == []

    in_zookeeper = LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 3, (2, 1), 8), CONTROLLER_EPOCH)
    context.apply(PartitionLeadershipChanged(tp("t", 0), in_zookeeper))
    retry = machine.handle_state_changes([tp("t", 0)], ONLINE, strategy)

    assert writes(retry.effects)[tp("t", 0)].expected_zk_version == 8
    assert retry.results[tp("t", 0)] == LeaderAndIsr(1, 4, (2, 1), 9)
    assert leader_and_isr_targets(retry.effects) == {tp("t", 0): [1, 2, 3]}
