"""The replica state machine's effects for each target state."""

from __future__ import annotations

from services.controller.state.effects import SendLeaderAndIsr, SendUpdateMetadata, UpdatePartitionState
from services.controller.state.model import LeaderAndIsr, PartitionAndReplica
from services.controller.state.records import TopicDeletionQueued
from services.controller.state.replica_state_machine import ReplicaStateMachine
from services.controller.state.states import PartitionState, ReplicaState
from tests.unit.controller.cluster import (
    CONTROLLER_EPOCH,
    CONTROLLER_EPOCH_ZK_VERSION,
    add_topic,
    leader_and_isr_targets,
    make_context,
    of_type,
    online_topic,
    set_leadership,
    set_replica_state,
    stop_replicas,
    tp,
    update_metadata_brokers,
    writes,
)

R = ReplicaState
T0 = tp("t", 0)


def replica(broker_id, partition=T0):
    return PartitionAndReplica(partition, broker_id)


def test_new_replica_gets_leader_and_isr_marked_new():
    context = make_context(live=[1, 2, 3])
    online_topic(context, "t", {0: [1, 2]})
    outcome = ReplicaStateMachine(context).handle_state_changes([replica(3)], R.NEW_REPLICA)
    assert context.replica_state(replica(3)) == R.NEW_REPLICA
    assert leader_and_isr_targets(outcome.effects) == {T0: [3]}
    assert of_type(outcome.effects, SendLeaderAndIsr)[0].partition_states[0].is_new


def test_new_replica_without_leadership_only_records_state():
    context = make_context(live=[1])
    add_topic(context, "t", {0: [1]})
    outcome = ReplicaStateMachine(context).handle_state_changes([replica(1)], R.NEW_REPLICA)
    assert context.replica_state(replica(1)) == R.NEW_REPLICA
    assert outcome.effects == []


def test_new_replica_refused_for_the_current_leader():
    context = make_context(live=[1, 2])
    add_topic(context, "t", {0: [1, 2]})
    set_leadership(context, T0, leader=1, isr=[1, 2])
    outcome = ReplicaStateMachine(context).handle_state_changes([replica(1)], R.NEW_REPLICA)
    assert context.replica_state(replica(1)) == R.NON_EXISTENT_REPLICA
    assert "being requested to become leader" in str(outcome.failures[0][1])
    assert outcome.effects == []


def test_online_from_new_adds_missing_replica_to_assignment_without_requests():
    context = make_context(live=[1, 2, 3])
    online_topic(context, "t", {0: [1, 2]})
    set_replica_state(context, T0, 3, R.NEW_REPLICA)
    outcome = ReplicaStateMachine(context).handle_state_changes([replica(3)], R.ONLINE_REPLICA)
    assert context.partition_replica_assignment(T0) == (1, 2, 3)
    assert context.replica_state(replica(3)) == R.ONLINE_REPLICA
    assert outcome.effects == []


def test_online_from_offline_sends_current_leadership():
    context = make_context(live=[1, 2])
    online_topic(context, "t", {0: [1, 2]})
    set_replica_state(context, T0, 2, R.OFFLINE_REPLICA)
    outcome = ReplicaStateMachine(context).handle_state_changes([replica(2)], R.ONLINE_REPLICA)
    assert leader_and_isr_targets(outcome.effects) == {T0: [2]}
    state = of_type(outcome.effects, SendLeaderAndIsr)[0].partition_states[0]
    assert (state.leader, state.isr, state.is_new) == (1, (1, 2), False)
    assert update_metadata_brokers(outcome.effects) == [1, 2]


def test_offline_follower_is_removed_from_isr_with_new_epoch():
    context = make_context(live=[1, 3])
    online_topic(context, "t", {0: [1, 2, 3]})
    set_leadership(context, T0, leader=1, isr=[1, 2, 3], leader_epoch=3, zk_version=7)

    outcome = ReplicaStateMachine(context).handle_state_changes([replica(2)], R.OFFLINE_REPLICA)

    updated = LeaderAndIsr(1, 4, (1, 3), 8)
    assert writes(outcome.effects) == {
        T0: UpdatePartitionState(T0, updated, CONTROLLER_EPOCH, CONTROLLER_EPOCH_ZK_VERSION, 7)
    }
    assert context.partition_leadership(T0).leader_and_isr == updated
    assert stop_replicas(outcome.effects) == []  # broker 2 is dead: requests go to live brokers only
    assert leader_and_isr_targets(outcome.effects) == {T0: [1, 3]}
    assert context.replica_state(replica(2)) == R.OFFLINE_REPLICA


def test_offline_live_replica_gets_stop_replica_without_delete():
    context = make_context(live=[1, 2])
    online_topic(context, "t", {0: [1, 2]})
    outcome = ReplicaStateMachine(context).handle_state_changes([replica(2)], R.OFFLINE_REPLICA)
    assert stop_replicas(outcome.effects) == [(2, T0, False)]
    assert leader_and_isr_targets(outcome.effects) == {T0: [1]}


def test_offline_leader_leaves_partition_without_leader():
    context = make_context(live=[2])
    online_topic(context, "t", {0: [1, 2]})
    outcome = ReplicaStateMachine(context).handle_state_changes([replica(1)], R.OFFLINE_REPLICA)
    assert context.partition_leadership(T0).leader_and_isr == LeaderAndIsr(-1, 4, (2,), 8)
    assert len(writes(outcome.effects)) == 1


def test_offline_last_isr_member_stays_in_isr():
    context = make_context(live=[2])
    online_topic(context, "t", {0: [1, 2]}, isr={0: [1]})
    ReplicaStateMachine(context).handle_state_changes([replica(1)], R.OFFLINE_REPLICA)
    assert context.partition_leadership(T0).leader_and_isr == LeaderAndIsr(-1, 4, (1,), 8)


def test_offline_replica_outside_isr_needs_no_write_and_no_second_leader_and_isr():
    context = make_context(live=[1])
    online_topic(context, "t", {0: [1, 2]}, isr={0: [1]})
    before = context.partition_leadership(T0)
    outcome = ReplicaStateMachine(context).handle_state_changes([replica(2)], R.OFFLINE_REPLICA)
    assert writes(outcome.effects) == {}
    # broker 1 already holds this leader epoch: only the metadata (replica 2 offline) changes
    assert leader_and_isr_targets(outcome.effects) == {}
    assert update_metadata_brokers(outcome.effects) == [1]
    assert of_type(outcome.effects, SendUpdateMetadata)[0].partition_states[0].offline_replicas == (2,)
    assert context.partition_leadership(T0) == before
    assert context.replica_state(replica(2)) == R.OFFLINE_REPLICA


def test_offline_replica_without_leadership_sends_update_metadata():
    context = make_context(live=[1, 2])
    add_topic(context, "t", {0: [1, 2]})
    set_replica_state(context, T0, 2, R.ONLINE_REPLICA)
    outcome = ReplicaStateMachine(context).handle_state_changes([replica(2)], R.OFFLINE_REPLICA)
    assert update_metadata_brokers(outcome.effects) == [1, 2]
    assert writes(outcome.effects) == {}
    assert context.replica_state(replica(2)) == R.OFFLINE_REPLICA


def test_offline_replica_of_topic_being_deleted_sends_no_leader_and_isr():
    context = make_context(live=[1, 2])
    online_topic(context, "t", {0: [1, 2]})
    context.apply(TopicDeletionQueued(frozenset({"t"})))
    outcome = ReplicaStateMachine(context).handle_state_changes([replica(2)], R.OFFLINE_REPLICA)
    assert leader_and_isr_targets(outcome.effects) == {}
    assert stop_replicas(outcome.effects) == [(2, T0, False)]
    assert len(writes(outcome.effects)) == 1


def test_offline_refused_when_newer_controller_wrote_state():
    context = make_context(live=[1, 2])
    online_topic(context, "t", {0: [1, 2]})
    set_leadership(context, T0, leader=1, isr=[1, 2], controller_epoch=CONTROLLER_EPOCH + 1)
    outcome = ReplicaStateMachine(context).handle_state_changes([replica(2)], R.OFFLINE_REPLICA)
    assert context.replica_state(replica(2)) == R.ONLINE_REPLICA
    assert "written by another controller" in str(outcome.failures[0][1])
    assert writes(outcome.effects) == {}


def test_deletion_started_sends_stop_replica_with_delete():
    context = make_context(live=[1, 2])
    online_topic(context, "t", {0: [1, 2]})
    context.apply(TopicDeletionQueued(frozenset({"t"})))
    set_replica_state(context, T0, 2, R.OFFLINE_REPLICA)
    outcome = ReplicaStateMachine(context).handle_state_changes([replica(2)], R.REPLICA_DELETION_STARTED)
    assert stop_replicas(outcome.effects) == [(2, T0, True)]
    assert outcome.effects[0].partitions[0].leader_epoch == -2  # EpochDuringDelete


def test_deletion_outcomes_only_record_state():
    context = make_context(live=[1])
    add_topic(context, "t", {0: [1]})
    set_replica_state(context, T0, 1, R.REPLICA_DELETION_STARTED)
    machine = ReplicaStateMachine(context)
    assert machine.handle_state_changes([replica(1)], R.REPLICA_DELETION_SUCCESSFUL).effects == []
    assert context.replica_state(replica(1)) == R.REPLICA_DELETION_SUCCESSFUL


def test_non_existent_removes_replica_from_assignment_and_state():
    context = make_context(live=[1, 2])
    add_topic(context, "t", {0: [1, 2]})
    set_replica_state(context, T0, 2, R.REPLICA_DELETION_SUCCESSFUL)
    outcome = ReplicaStateMachine(context).handle_state_changes([replica(2)], R.NON_EXISTENT_REPLICA)
    assert context.partition_replica_assignment(T0) == (1,)
    assert not context.has_replica_state(replica(2))
    assert outcome.effects == []


def test_replicas_are_handled_per_broker_with_one_request_each():
    context = make_context(live=[1, 2, 3])
    online_topic(context, "t", {0: [1, 2], 1: [2, 3], 2: [3, 1]})
    for p, b in [(0, 2), (1, 2), (2, 3)]:
        set_replica_state(context, tp("t", p), b, R.OFFLINE_REPLICA)
    outcome = ReplicaStateMachine(context).handle_state_changes(
        [replica(3, tp("t", 2)), replica(2, tp("t", 0)), replica(2, tp("t", 1))], R.ONLINE_REPLICA
    )
    sends = of_type(outcome.effects, SendLeaderAndIsr)
    assert [(e.broker_id, [s.partition.partition for s in e.partition_states]) for e in sends] == [
        (2, [0, 1]),
        (3, [2]),
    ]


def test_startup_initializes_replica_states():
    context = make_context(live=[1])
    add_topic(context, "t", {0: [1, 2]}, PartitionState.ONLINE_PARTITION)
    set_leadership(context, T0, leader=1, isr=[1, 2])
    outcome = ReplicaStateMachine(context).startup()
    assert context.replica_state(replica(1)) == R.ONLINE_REPLICA
    assert context.replica_state(replica(2)) == R.OFFLINE_REPLICA
    assert context.partition_leadership(T0).leader_and_isr.isr == (1,)
    # two batches, as in Kafka: Online (current state to broker 1), then Offline (shrunk ISR to broker 1)
    sends = of_type(outcome.effects, SendLeaderAndIsr)
    assert [(e.broker_id, e.partition_states[0].isr) for e in sends] == [(1, (1, 2)), (1, (1,))]
