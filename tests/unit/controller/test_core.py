"""ControllerCore: failover, broker changes, topic creation and deletion, ISR changes."""

from __future__ import annotations

import pytest

from services.common.errors import Errors, KafkaError
from services.common.shared_types import ReplicaAssignment
from services.controller.state.core import ClusterSnapshot, ControllerCore, TopicDescription
from services.controller.state.effects import (
    CreatePartitionState,
    DeleteTopic,
    DeleteTopicDeletionMarkers,
    SendLeaderAndIsr,
    SendUpdateMetadata,
    UpdatePartitionState,
    UpdateTopicAssignment,
)
from services.controller.state.events import ElectionType
from services.controller.state.model import LeaderAndIsr, LeaderIsrAndControllerEpoch, PartitionAndReplica
from services.controller.state.states import PartitionState, ReplicaState
from tests.unit.controller.cluster import (
    broker,
    config,
    leader_and_isr_targets,
    of_type,
    stop_replicas,
    tp,
    update_metadata_brokers,
    writes,
)

EPOCH = 7


def assignment(*replicas):
    return ReplicaAssignment(tuple(replicas))


def lead(leader, isr, epoch=2, version=3, controller_epoch=EPOCH - 1):
    return LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, epoch, tuple(isr), version), controller_epoch)


def started(brokers=(1, 2, 3), topics=None, leaderships=None, deleting=frozenset(), **overrides):
    core = ControllerCore(config(**overrides), controller_id=100)
    snapshot = ClusterSnapshot(
        epoch=EPOCH,
        epoch_zk_version=6,
        brokers=tuple(broker(b) for b in brokers),
        topics=topics or {},
        leaderships=leaderships or {},
        topics_to_be_deleted=deleting,
    )
    return core, core.on_controller_failover(snapshot)


def test_failover_loads_the_cluster_and_starts_the_state_machines():
    topics = {"t": TopicDescription({0: assignment(1, 2), 1: assignment(3, 2), 2: assignment(2, 1)}, "id-t")}
    leaderships = {tp("t", 0): lead(1, [1, 2]), tp("t", 1): lead(3, [3, 2])}
    core, outcome = started(brokers=(1, 2), topics=topics, leaderships=leaderships)
    context = core.context

    assert (context.epoch, context.epoch_zk_version) == (EPOCH, 6)
    assert context.topic_id("t") == "id-t"
    # the first effects announce the live brokers
    assert [(type(e), e.partition_states) for e in outcome.effects[:2]] == [(SendUpdateMetadata, ())] * 2
    assert context.partition_state(tp("t", 0)) == PartitionState.ONLINE_PARTITION
    assert context.partition_leadership(tp("t", 0)).leader_and_isr.leader == 1
    # t-1's leader 3 is dead: OfflineReplica took 3 out of the ISR, then 2 was elected
    assert context.partition_leadership(tp("t", 1)).leader_and_isr == LeaderAndIsr(2, 4, (2,), 5)
    # t-2 had no state znode: created
    assert isinstance(writes(outcome.effects)[tp("t", 2)], CreatePartitionState)
    assert context.replica_state(PartitionAndReplica(tp("t", 1), 3)) == ReplicaState.OFFLINE_REPLICA
    assert context.replica_state(PartitionAndReplica(tp("t", 1), 2)) == ReplicaState.ONLINE_REPLICA


def test_resignation_forgets_everything():
    core, _ = started(topics={"t": TopicDescription({0: assignment(1)})})
    core.on_controller_resignation()
    assert core.context.all_topics == set() and core.context.epoch == 0


def test_new_topic_partitions_are_created_and_brought_online():
    core, _ = started()
    outcome = core.on_topic_change(["t"], {"t": TopicDescription({0: assignment(1, 2), 1: assignment(2, 3)})})
    context = core.context
    assert context.partition_state(tp("t", 0)) == PartitionState.ONLINE_PARTITION
    assert context.partition_leadership(tp("t", 1)).leader_and_isr == LeaderAndIsr(2, 0, (2, 3), 0)
    assert set(writes(outcome.effects)) == {tp("t", 0), tp("t", 1)}
    assert context.replica_state(PartitionAndReplica(tp("t", 1), 3)) == ReplicaState.ONLINE_REPLICA
    assert leader_and_isr_targets(outcome.effects)[tp("t", 0)][:2] == [1, 2]


def test_topics_gone_from_zookeeper_are_forgotten():
    core, _ = started(topics={"t": TopicDescription({0: assignment(1)})})
    core.on_topic_change([], {})
    assert core.context.all_topics == set()


def test_partition_modifications_add_new_partitions():
    core, _ = started(topics={"t": TopicDescription({0: assignment(1, 2)})})
    outcome = core.on_partition_modifications("t", {0: assignment(1, 2), 1: assignment(2, 3)})
    assert core.context.partition_state(tp("t", 1)) == PartitionState.ONLINE_PARTITION
    assert set(writes(outcome.effects)) == {tp("t", 1)}
    assert core.on_partition_modifications("t", {0: assignment(1, 2), 1: assignment(2, 3)}).effects == []


def test_partition_modifications_during_deletion_restore_the_assignment():
    core, _ = started(
        brokers=(1,), topics={"t": TopicDescription({0: assignment(1, 2)})}, deleting=frozenset({"t"})
    )
    outcome = core.on_partition_modifications("t", {0: assignment(1, 2), 1: assignment(1)})
    assert outcome.effects == [UpdateTopicAssignment("t", {0: (1, 2)})]


def test_broker_failure_elects_new_leaders_and_shrinks_isrs():
    core, _ = started(topics={"t": TopicDescription({0: assignment(1, 2, 3), 1: assignment(2, 1, 3)})})
    outcome = core.on_broker_change([broker(2), broker(3)])
    context = core.context
    assert context.live_or_shutting_down_broker_ids == {2, 3}
    assert context.partition_leadership(tp("t", 0)).leader_and_isr.leader == 2
    assert context.partition_leadership(tp("t", 0)).leader_and_isr.isr == (2, 3)
    assert context.partition_leadership(tp("t", 1)).leader_and_isr.isr == (2, 3)
    assert context.replica_state(PartitionAndReplica(tp("t", 1), 1)) == ReplicaState.OFFLINE_REPLICA
    assert 1 not in update_metadata_brokers(outcome.effects)


def test_broker_failure_sends_one_leader_and_isr_per_partition_and_leader_epoch():
    """The re-election's LeaderAndIsr is the only one: taking the dead replicas offline afterwards
    finds them out of the ISR already and sends no second one at the same leader epoch."""
    core, _ = started(topics={"t": TopicDescription({0: assignment(1, 2, 3), 1: assignment(2, 1, 3)})})
    outcome = core.on_broker_change([broker(2), broker(3)])
    sent = [(e.broker_id, s.partition, s.leader_epoch) for e in of_type(outcome.effects, SendLeaderAndIsr)
            for s in e.partition_states]
    assert sorted(sent) == sorted(set(sent))
    assert leader_and_isr_targets(outcome.effects) == {tp("t", 0): [2, 3], tp("t", 1): [2, 3]}
    assert len(writes(outcome.effects)) == 2  # one state znode write per partition


def test_broker_failure_without_leader_change_still_announces_brokers():
    core, _ = started(topics={"t": TopicDescription({0: assignment(1, 2)})})
    outcome = core.on_broker_change([broker(1), broker(2)])  # broker 3 held nothing
    assert [e.partition_states for e in of_type(outcome.effects, SendUpdateMetadata)] == [(), ()]


def test_last_isr_member_dying_makes_the_partition_offline():
    core, _ = started(brokers=(1, 2), topics={"t": TopicDescription({0: assignment(1)})})
    core.on_broker_change([broker(2)])
    assert core.context.partition_state(tp("t", 0)) == PartitionState.OFFLINE_PARTITION
    assert core.context.offline_partition_count() == 1
    outcome = core.on_broker_change([broker(1), broker(2)])
    assert core.context.partition_state(tp("t", 0)) == PartitionState.ONLINE_PARTITION
    assert core.context.partition_leadership(tp("t", 0)).leader_and_isr.leader == 1
    # the returning broker is told about every partition with a leader
    assert SendUpdateMetadata in {type(e) for e in outcome.effects}


def test_bounced_broker_is_failed_and_started_again():
    core, _ = started(topics={"t": TopicDescription({0: assignment(1, 2)})})
    outcome = core.on_broker_change([broker(1, epoch=500), broker(2), broker(3)])
    assert core.context.broker_epoch(1) == 500
    assert core.context.partition_leadership(tp("t", 0)).leader_and_isr.leader == 2
    assert core.context.replica_state(PartitionAndReplica(tp("t", 0), 1)) == ReplicaState.ONLINE_REPLICA
    assert len(writes(outcome.effects)) >= 1


def test_broker_modification_announces_new_endpoints_only_when_changed():
    core, _ = started()
    assert core.on_broker_modification(broker(1)).effects == []
    outcome = core.on_broker_modification(broker(1, rack="r9"))
    assert core.context.broker(1).rack == "r9"
    assert update_metadata_brokers(outcome.effects) == [1, 2, 3]
    assert core.on_broker_modification(broker(9)).effects == []


def test_topic_deletion_end_to_end():
    core, _ = started(topics={"t": TopicDescription({0: assignment(1, 2)})})
    context = core.context
    outcome = core.on_topic_deletion(["t", "unknown"])
    assert outcome.effects[0] == DeleteTopicDeletionMarkers(("unknown",), 6)
    assert context.is_topic_deletion_started("t")
    assert context.partition_state(tp("t", 0)) == PartitionState.NON_EXISTENT_PARTITION
    assert sorted(stop_replicas(outcome.effects)) == [
        (1, tp("t", 0), False),
        (1, tp("t", 0), True),
        (2, tp("t", 0), False),
        (2, tp("t", 0), True),
    ]
    announced = [s for e in of_type(outcome.effects, SendUpdateMetadata) for s in e.partition_states]
    assert announced and all(s.leader == -2 for s in announced)

    core.on_stop_replica_deletion_response(1, 0, {tp("t", 0): 0})
    assert (
        context.replica_state(PartitionAndReplica(tp("t", 0), 1)) == ReplicaState.REPLICA_DELETION_SUCCESSFUL
    )
    outcome = core.on_stop_replica_deletion_response(2, 0, {tp("t", 0): 0})
    assert outcome.effects[-1] == DeleteTopic("t", 6)
    assert context.all_topics == set()


def test_topic_deletion_with_a_dead_replica_waits_for_the_broker():
    core, _ = started(topics={"t": TopicDescription({0: assignment(1, 2)})})
    core.on_broker_change([broker(1), broker(3)])
    core.on_topic_deletion(["t"])
    context = core.context
    assert context.topics_ineligible_for_deletion == {"t"}
    assert (
        context.replica_state(PartitionAndReplica(tp("t", 0), 2)) == ReplicaState.REPLICA_DELETION_INELIGIBLE
    )
    core.on_stop_replica_deletion_response(1, 0, {tp("t", 0): 0})
    assert "t" in context.all_topics

    outcome = core.on_broker_change([broker(1), broker(2), broker(3)])
    assert context.topics_ineligible_for_deletion == set()
    assert (2, tp("t", 0), True) in stop_replicas(outcome.effects)
    core.on_stop_replica_deletion_response(2, 0, {tp("t", 0): 0})
    assert context.all_topics == set()


def test_failed_replica_deletion_is_retried_later():
    core, _ = started(topics={"t": TopicDescription({0: assignment(1)})})
    core.on_topic_deletion(["t"])
    core.on_stop_replica_deletion_response(1, 56, {tp("t", 0): 0})  # request-level error
    context = core.context
    assert context.topics_ineligible_for_deletion == {"t"}
    # as in Kafka, the failed replica is reset to OfflineReplica, ready for a retry
    assert context.replica_state(PartitionAndReplica(tp("t", 0), 1)) == ReplicaState.OFFLINE_REPLICA
    outcome = core.topic_deletion_manager.resume_deletion_for_topics(["t"])
    assert context.replica_state(PartitionAndReplica(tp("t", 0), 1)) == ReplicaState.REPLICA_DELETION_STARTED
    assert (1, tp("t", 0), True) in stop_replicas(outcome.effects)


def test_topic_deletion_disabled_removes_markers():
    core, outcome = started(
        topics={"t": TopicDescription({0: assignment(1)})},
        deleting=frozenset({"t"}),
        delete_topic_enable=False,
    )
    assert DeleteTopicDeletionMarkers(("t",), 6) in outcome.effects
    outcome = core.on_topic_deletion(["t"])
    assert outcome.effects == [DeleteTopicDeletionMarkers(("t",), 6)]
    assert not core.context.is_topic_queued_for_deletion("t")


def test_failover_resumes_pending_deletions():
    core, outcome = started(topics={"t": TopicDescription({0: assignment(1)})}, deleting=frozenset({"t"}))
    assert core.context.is_topic_deletion_started("t")
    assert (1, tp("t", 0), True) in stop_replicas(outcome.effects)


def test_enabling_unclean_election_for_a_topic_brings_it_online():
    core, _ = started(
        brokers=(2,),
        topics={"t": TopicDescription({0: assignment(1, 2)})},
        leaderships={tp("t", 0): lead(1, [1])},
    )
    assert core.context.partition_state(tp("t", 0)) == PartitionState.OFFLINE_PARTITION
    core.on_topic_config_change("t", {"unclean.leader.election.enable": "true"})
    assert core.context.partition_leadership(tp("t", 0)).leader_and_isr.leader == 2
    assert core.context.partition_state(tp("t", 0)) == PartitionState.ONLINE_PARTITION


def test_controlled_shutdown_and_rebalance_through_the_core():
    core, _ = started(topics={"t": TopicDescription({0: assignment(1, 2), 1: assignment(1, 2)})})
    result = core.on_controlled_shutdown(1, 101)
    assert result.remaining_partitions == []
    assert core.context.partition_leadership(tp("t", 0)).leader_and_isr.leader == 2
    core.on_broker_change([broker(2), broker(3)])
    core.on_broker_change([broker(1, epoch=600), broker(2), broker(3)])
    assert core.context.partition_leadership(tp("t", 0)).leader_and_isr.leader == 2
    core.on_isr_change_notification(
        {
            p: LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 9, (2, 1), 20), EPOCH)
            for p in (tp("t", 0), tp("t", 1))
        }
    )
    outcome = core.on_auto_leader_rebalance()
    assert set(outcome.successes()) == {tp("t", 0), tp("t", 1)}
    assert core.context.partition_leadership(tp("t", 0)).leader_and_isr == LeaderAndIsr(1, 10, (2, 1), 21)


def test_no_auto_rebalance_while_a_reassignment_is_in_progress():
    core, _ = started(
        topics={
            "t": TopicDescription({0: assignment(1, 2)}),
            "r": TopicDescription({0: ReplicaAssignment((2, 3), adding_replicas=(3,))}),
        },
        leaderships={tp("t", 0): lead(2, [2, 1]), tp("r", 0): lead(2, [2])},
    )
    assert core.on_auto_leader_rebalance().successes() == {}
    assert core.context.partition_leadership(tp("t", 0)).leader_and_isr.leader == 2


# --- ISR changes from leaders -----------------------------------------------------------------


def isr_core():
    return started(
        topics={"t": TopicDescription({0: assignment(1, 2, 3), 1: assignment(2, 3)})},
        leaderships={tp("t", 0): lead(1, [1, 2, 3]), tp("t", 1): lead(2, [2, 3])},
    )[0]


def test_alter_isr_results():
    core = isr_core()
    current = core.context.partition_leadership(tp("t", 0)).leader_and_isr
    outcome = core.on_alter_isr(
        1,
        101,
        {
            tp("t", 0): LeaderAndIsr(1, current.leader_epoch, (1, 2), current.zk_version),
            tp("t", 1): LeaderAndIsr(2, current.leader_epoch - 1, (2,), 0),
            tp("nope", 0): LeaderAndIsr(1, 0, (1,), 0),
        },
    )
    written = LeaderAndIsr(1, current.leader_epoch, (1, 2), current.zk_version + 1)
    assert outcome.results[tp("t", 0)] == written
    assert outcome.results[tp("t", 1)].code == Errors.FENCED_LEADER_EPOCH
    assert outcome.results[tp("nope", 0)].code == Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert writes(outcome.effects) == {
        tp("t", 0): UpdatePartitionState(tp("t", 0), written, EPOCH, 6, current.zk_version)
    }
    assert core.context.partition_leadership(tp("t", 0)).leader_and_isr == written
    assert update_metadata_brokers(outcome.effects) == [1, 2, 3]


def test_alter_isr_same_state_and_stale_version():
    core = isr_core()
    current = core.context.partition_leadership(tp("t", 0)).leader_and_isr
    same = core.on_alter_isr(1, 101, {tp("t", 0): current.with_zk_version(999)})
    assert same.results[tp("t", 0)] == current and writes(same.effects) == {}
    stale = core.on_alter_isr(
        1, 101, {tp("t", 0): LeaderAndIsr(1, current.leader_epoch, (1,), current.zk_version - 1)}
    )
    assert stale.results[tp("t", 0)].code == Errors.INVALID_UPDATE_VERSION


@pytest.mark.parametrize(("broker_id", "broker_epoch"), [(1, 100), (9, 109)])
def test_alter_isr_from_stale_or_unknown_broker(broker_id, broker_epoch):
    with pytest.raises(KafkaError) as raised:
        isr_core().on_alter_isr(broker_id, broker_epoch, {})
    assert raised.value.code == Errors.STALE_BROKER_EPOCH


def test_isr_change_notification_refreshes_and_announces():
    core = isr_core()
    fresh = LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 4, (2,), 9), EPOCH)
    outcome = core.on_isr_change_notification({tp("t", 1): fresh})
    assert core.context.partition_leadership(tp("t", 1)) == fresh
    assert update_metadata_brokers(outcome.effects) == [1, 2, 3]
    assert core.on_isr_change_notification({}).effects == []


def test_elect_leaders_through_the_core():
    core = isr_core()
    outcome = core.on_elect_leaders([tp("t", 0)], ElectionType.PREFERRED)
    assert outcome.leaders[tp("t", 0)].code == Errors.ELECTION_NOT_NEEDED


def test_a_log_dir_failure_sends_leader_and_isr_for_every_replica_of_the_broker():
    core, _ = started(topics={"t": TopicDescription({0: assignment(1, 2, 3), 1: assignment(2, 3, 1)})})
    outcome = core.on_broker_log_dir_failure([1, 9])
    targets = leader_and_isr_targets(outcome.effects)
    assert targets == {tp("t", 0): [1], tp("t", 1): [1]}
    assert not writes(outcome.effects)


def test_storage_errors_in_leader_and_isr_answers_move_leadership_and_shrink_isrs():
    core, _ = started(topics={"t": TopicDescription({0: assignment(1, 2, 3), 1: assignment(2, 3, 1),
                                                     2: assignment(1, 3, 2)})})
    outcome = core.on_leader_and_isr_response(
        1, {tp("t", 0): Errors.KAFKA_STORAGE_ERROR, tp("t", 1): Errors.KAFKA_STORAGE_ERROR})
    context = core.context
    moved = context.partition_leadership(tp("t", 0)).leader_and_isr
    assert (moved.leader, moved.isr) == (2, (2, 3))
    shrunk = context.partition_leadership(tp("t", 1)).leader_and_isr
    assert (shrunk.leader, shrunk.isr) == (2, (2, 3))
    kept = context.partition_leadership(tp("t", 2)).leader_and_isr
    assert (kept.leader, kept.isr) == (1, (1, 3, 2))  # its replica on broker 1 is in a healthy dir
    assert context.replica_state(PartitionAndReplica(tp("t", 0), 1)) == ReplicaState.OFFLINE_REPLICA
    assert set(writes(outcome.effects)) == {tp("t", 0), tp("t", 1)}
    assert context.is_replica_online(1, partition=tp("t", 2))
    assert not context.is_replica_online(1, partition=tp("t", 0))
    # the same answer again changes nothing; a new registration of the broker clears the mark
    assert not core.on_leader_and_isr_response(1, {tp("t", 0): Errors.KAFKA_STORAGE_ERROR}).effects
    core.on_broker_change([broker(1, epoch=500), broker(2), broker(3)])
    assert context.is_replica_online(1, partition=tp("t", 0))


def test_an_offline_replica_is_not_elected_when_its_broker_is_live():
    core, _ = started(topics={"t": TopicDescription({0: assignment(1, 2)})})
    core.on_leader_and_isr_response(2, {tp("t", 0): Errors.KAFKA_STORAGE_ERROR})
    core.on_broker_change([broker(2)])  # the leader's broker dies: no live replica is left
    assert core.context.partition_state(tp("t", 0)) == PartitionState.OFFLINE_PARTITION
