"""Partition reassignment: start, completion on ISR change, cancellation, validation, failover."""

from __future__ import annotations

from services.common.errors import Errors
from services.common.shared_types import ReplicaAssignment
from services.controller.state.core import ClusterSnapshot, ControllerCore, TopicDescription
from services.controller.state.effects import RemoveFromZkReassignment, UpdatePartitionState, UpdateTopicAssignment
from services.controller.state.model import LeaderAndIsr, LeaderIsrAndControllerEpoch, PartitionAndReplica
from services.controller.state.reassignment import reassign_to
from services.controller.state.states import ReplicaState
from tests.unit.controller.cluster import broker, config, leader_and_isr_targets, of_type, stop_replicas, tp

EPOCH = 7
T0 = tp("t", 0)


def lead(leader, isr, epoch=2, version=3):
    return LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, epoch, tuple(isr), version), EPOCH - 1)


def started(assignment=None, leadership=None, brokers=(1, 2, 3, 4)):
    core = ControllerCore(config(), controller_id=100)
    snapshot = ClusterSnapshot(
        epoch=EPOCH,
        epoch_zk_version=6,
        brokers=tuple(broker(b) for b in brokers),
        topics={"t": TopicDescription({0: assignment or ReplicaAssignment((1, 2))}, "id-t")},
        leaderships={T0: leadership or lead(1, [1, 2])},
    )
    return core, core.on_controller_failover(snapshot)


def isr_changed(core, leader, isr):
    current = core.context.partition_leadership(T0).leader_and_isr
    changed = LeaderAndIsr(leader, current.leader_epoch, tuple(isr), current.zk_version + 1)
    return core.on_isr_change_notification({T0: LeaderIsrAndControllerEpoch(changed, EPOCH)})


def test_reassign_to_keeps_the_original_replicas():
    assert reassign_to(ReplicaAssignment((1, 2)), (2, 3)) == ReplicaAssignment((2, 3, 1), (3,), (1,))
    moving = ReplicaAssignment((2, 3, 1), (3,), (1,))
    assert reassign_to(moving, (4, 2)) == ReplicaAssignment((4, 2, 1), (4,), (1,))
    assert reassign_to(moving, (1, 2)) == ReplicaAssignment((1, 2))


def test_start_records_the_full_replica_set_bumps_the_epoch_and_starts_new_replicas():
    core, _ = started()
    outcome, results = core.on_alter_partition_reassignments({T0: [2, 3]})

    assert results == {T0: None}
    assert core.context.partition_full_replica_assignment(T0) == ReplicaAssignment((2, 3, 1), (3,), (1,))
    assert of_type(outcome.effects, UpdateTopicAssignment)[0].assignment == {0: (2, 3, 1)}
    [write] = of_type(outcome.effects, UpdatePartitionState)
    assert write.leader_and_isr == LeaderAndIsr(1, 3, (1, 2), 4)
    assert sorted(leader_and_isr_targets(outcome.effects)[T0]) == [1, 2, 3, 3]
    assert core.context.replica_state(PartitionAndReplica(T0, 3)) == ReplicaState.NEW_REPLICA
    # an API reassignment takes the partition out of the legacy znode
    assert of_type(outcome.effects, RemoveFromZkReassignment)[0].partitions == ((T0, None),)
    assert core.list_partition_reassignments() == {T0: ReplicaAssignment((2, 3, 1), (3,), (1,))}


def test_completes_when_the_targets_join_the_isr_moving_the_leader_and_deleting_removed_replicas():
    core, _ = started()
    core.on_alter_partition_reassignments({T0: [2, 3]})
    # 3 catches up but 1 is still leader: not yet complete while 3 is missing, complete once in
    assert not of_type(isr_changed(core, 1, [1, 2]).effects, UpdateTopicAssignment)
    outcome = isr_changed(core, 1, [1, 2, 3])

    context = core.context
    assert context.partition_full_replica_assignment(T0) == ReplicaAssignment((2, 3))
    assert of_type(outcome.effects, UpdateTopicAssignment)[-1].assignment == {0: (2, 3)}
    final = context.partition_leadership(T0).leader_and_isr
    assert final.leader == 2 and 1 not in final.isr
    assert (1, T0, True) in stop_replicas(outcome.effects)
    assert not context.has_replica_state(PartitionAndReplica(T0, 1))
    assert context.replica_state(PartitionAndReplica(T0, 3)) == ReplicaState.ONLINE_REPLICA
    [removal] = of_type(outcome.effects, RemoveFromZkReassignment)
    assert removal.partitions == ((T0, (2, 3)),)
    assert core.list_partition_reassignments() == {}
    # the state znode writes chain their versions
    versions = [
        (w.expected_zk_version, w.leader_and_isr.zk_version) for w in of_type(outcome.effects, UpdatePartitionState)
    ]
    assert all(b == a + 1 for a, b in versions)
    assert all(n[0] == p[1] for p, n in zip(versions, versions[1:], strict=False))


def test_a_leader_kept_in_the_target_only_gets_a_new_epoch():
    core, _ = started()
    core.on_alter_partition_reassignments({T0: [1, 3]})
    isr_changed(core, 1, [1, 2, 3])
    final = core.context.partition_leadership(T0).leader_and_isr
    assert final.leader == 1 and final.isr == (1, 3)


def test_raising_the_replication_factor():
    core, _ = started(ReplicaAssignment((1,)), lead(1, [1]))
    core.on_alter_partition_reassignments({T0: [1, 2, 3]})
    assert core.context.partition_full_replica_assignment(T0) == ReplicaAssignment((1, 2, 3), (2, 3), ())
    isr_changed(core, 1, [1, 2, 3])
    assert core.context.partition_full_replica_assignment(T0) == ReplicaAssignment((1, 2, 3))


def test_lowering_the_replication_factor_completes_at_once():
    core, _ = started(ReplicaAssignment((1, 2, 3)), lead(1, [1, 2, 3]))
    outcome, _ = core.on_alter_partition_reassignments({T0: [1]})
    assert core.context.partition_full_replica_assignment(T0) == ReplicaAssignment((1,))
    assert {(2, T0, True), (3, T0, True)} <= set(stop_replicas(outcome.effects))
    assert core.context.partition_leadership(T0).leader_and_isr.isr == (1,)


def test_cancel_reverts_to_the_original_replicas_and_deletes_the_added_ones():
    core, _ = started()
    core.on_alter_partition_reassignments({T0: [2, 3]})
    outcome, results = core.on_alter_partition_reassignments({T0: None})
    assert results == {T0: None}
    # the original replicas in the order they hold in the full set, as Kafka's originReplicas
    assert core.context.partition_full_replica_assignment(T0) == ReplicaAssignment((2, 1))
    assert (3, T0, True) in stop_replicas(outcome.effects)
    assert not core.context.has_replica_state(PartitionAndReplica(T0, 3))
    assert of_type(outcome.effects, UpdateTopicAssignment)[0].assignment == {0: (2, 1)}


def test_requests_are_validated_as_kafka_does():
    core, _ = started()
    _, results = core.on_alter_partition_reassignments({T0: None, tp("t", 5): [1], tp("u", 0): [1]})
    assert results[T0].error == Errors.NO_REASSIGNMENT_IN_PROGRESS
    assert results[tp("t", 5)].error == Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert results[tp("u", 0)].error == Errors.UNKNOWN_TOPIC_OR_PARTITION
    for target in ([], [2, 2], [2, 9]):
        outcome, results = core.on_alter_partition_reassignments({T0: target})
        assert results[T0].error == Errors.INVALID_REPLICA_ASSIGNMENT
        assert not outcome.effects
    assert core.context.partition_full_replica_assignment(T0) == ReplicaAssignment((1, 2))


def test_a_new_controller_resumes_a_recorded_reassignment():
    moving = ReplicaAssignment((2, 3, 1), (3,), (1,))
    core, outcome = started(moving, lead(1, [1, 2]))
    assert core.list_partition_reassignments() == {T0: moving}
    assert sorted(set(leader_and_isr_targets(outcome.effects)[T0])) == [1, 2, 3]
    assert not outcome.failures
    isr_changed(core, 1, [1, 2, 3])
    assert core.context.partition_full_replica_assignment(T0) == ReplicaAssignment((2, 3))


def test_a_new_controller_completes_a_reassignment_already_caught_up():
    core, outcome = started(ReplicaAssignment((2, 3, 1), (3,), (1,)), lead(1, [1, 2, 3]))
    assert core.context.partition_full_replica_assignment(T0) == ReplicaAssignment((2, 3))
    assert core.context.partition_leadership(T0).leader_and_isr.leader == 2
    assert of_type(outcome.effects, UpdateTopicAssignment)[-1].assignment == {0: (2, 3)}


def test_alter_isr_completes_a_reassignment():
    core, _ = started()
    core.on_alter_partition_reassignments({T0: [2, 3]})
    current = core.context.partition_leadership(T0).leader_and_isr
    outcome = core.on_alter_isr(
        1, broker(1).broker_epoch, {T0: LeaderAndIsr(1, current.leader_epoch, (1, 2, 3), current.zk_version)}
    )
    assert outcome.results[T0].isr == (1, 2, 3)
    assert core.context.partition_full_replica_assignment(T0) == ReplicaAssignment((2, 3))


def test_one_request_for_many_partitions_of_a_topic_rewrites_its_znode_once():
    core = ControllerCore(config(), controller_id=100)
    snapshot = ClusterSnapshot(
        epoch=EPOCH,
        epoch_zk_version=6,
        brokers=tuple(broker(b) for b in (1, 2, 3)),
        topics={"t": TopicDescription({p: ReplicaAssignment((1, 2)) for p in range(3)}, "id-t")},
        leaderships={tp("t", p): lead(1, [1, 2]) for p in range(3)},
    )
    core.on_controller_failover(snapshot)
    outcome, _ = core.on_alter_partition_reassignments({tp("t", p): [1, 3] for p in range(3)})
    [write] = of_type(outcome.effects, UpdateTopicAssignment)
    assert write.assignment == {p: (1, 3, 2) for p in range(3)}


def test_a_broker_starting_again_resumes_reassignments_onto_it():
    core, _ = started()
    core.on_alter_partition_reassignments({T0: [2, 3]})
    core.on_broker_change([broker(1), broker(2), broker(4)])  # 3 died
    outcome = core.on_broker_change([broker(b) for b in (1, 2, 3, 4)])
    assert 3 in leader_and_isr_targets(outcome.effects)[T0]
    assert of_type(outcome.effects, UpdatePartitionState)  # the leader epoch went up again


def test_a_topic_being_reassigned_is_deleted_once_the_reassignment_ends():
    core, _ = started()
    core.on_alter_partition_reassignments({T0: [2, 3]})
    outcome = core.on_topic_deletion(["t"])
    assert "t" in core.context.topics_ineligible_for_deletion
    assert not any(delete for _, _, delete in stop_replicas(outcome.effects))
    outcome = isr_changed(core, 1, [1, 2, 3])
    assert "t" not in core.context.topics_ineligible_for_deletion
    assert {(2, T0, True), (3, T0, True)} <= set(stop_replicas(outcome.effects))


def test_a_new_controller_keeps_a_reassigning_topic_from_deletion():
    core = ControllerCore(config(), controller_id=100)
    snapshot = ClusterSnapshot(
        epoch=EPOCH,
        epoch_zk_version=6,
        brokers=tuple(broker(b) for b in (1, 2, 3)),
        topics={"t": TopicDescription({0: ReplicaAssignment((2, 3, 1), (3,), (1,))}, "id-t")},
        leaderships={T0: lead(1, [1, 2])},
        topics_to_be_deleted=frozenset({"t"}),
    )
    core.on_controller_failover(snapshot)
    assert "t" in core.context.topics_ineligible_for_deletion


def test_a_reassignment_whose_topic_would_not_fit_its_znode_is_refused_before_anything_changes():
    core, _ = started()
    seen = []

    def fits(topic, partitions):
        seen.append((topic, dict(partitions)))
        return False

    outcome, results = core.on_alter_partition_reassignments({T0: [2, 3]}, fits=fits)
    assert results[T0].error == Errors.INVALID_REQUEST
    assert seen == [("t", {0: ReplicaAssignment((2, 3, 1), (3,), (1,))})]
    assert not outcome.effects and not outcome.records
    assert core.context.partition_full_replica_assignment(T0) == ReplicaAssignment((1, 2))
