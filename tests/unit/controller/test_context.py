"""ControllerContext: changed only by records, replay rebuilds it, and its read helpers."""

from __future__ import annotations

import pytest

from services.common.shared_types import BrokerInfo, EndPoint, ReplicaAssignment
from services.controller.state.context import ControllerContext
from services.controller.state.model import LeaderAndIsr, LeaderIsrAndControllerEpoch, PartitionAndReplica
from services.controller.state.records import (
    BrokersAdded,
    BrokerShuttingDown,
    BrokersRemoved,
    BrokerUpdated,
    ContextReset,
    ControllerEpochChanged,
    LiveBrokersSet,
    PartitionAssignmentChanged,
    PartitionLeadershipChanged,
    PartitionStateChanged,
    ReplicaStateChanged,
    ReplicaStateRemoved,
    TopicAdded,
    TopicConfigChanged,
    TopicDeletionIneligible,
    TopicDeletionQueued,
    TopicDeletionResumed,
    TopicDeletionStarted,
    TopicRemoved,
    topic_records,
)
from services.controller.state.states import PartitionState, ReplicaState
from tests.unit.controller.cluster import add_topic, broker, make_context, online_topic, set_leadership, tp


def test_brokers_live_shutting_down_and_epochs():
    context = make_context(live=[1, 2, 3], shutting_down=[3])
    assert context.live_broker_ids == {1, 2}
    assert context.live_or_shutting_down_broker_ids == {1, 2, 3}
    assert context.shutting_down_broker_ids == {3}
    assert context.broker_epoch(2) == 102 and context.broker_epoch(9) is None
    assert context.is_replica_online(1) and not context.is_replica_online(3)
    assert context.is_replica_online(3, include_shutting_down=True)
    assert [b.broker_id for b in context.live_or_shutting_down_brokers()] == [1, 2, 3]
    context.apply(BrokersRemoved(frozenset({3})))
    assert context.shutting_down_broker_ids == set()
    assert not context.is_replica_online(3, include_shutting_down=True)


def test_live_brokers_set_replaces_and_clears_shutting_down():
    context = make_context(live=[1, 2], shutting_down=[2])
    context.apply(LiveBrokersSet((broker(5),)))
    assert context.live_or_shutting_down_broker_ids == {5}
    assert context.shutting_down_broker_ids == set()


def test_broker_update_keeps_the_epoch_and_ignores_unknown_brokers():
    context = make_context(live=[1])
    context.apply(BrokerUpdated(BrokerInfo(1, (EndPoint("new", 1),), "r", broker_epoch=999)))
    assert context.broker(1) == BrokerInfo(1, (EndPoint("new", 1),), "r", 101)
    context.apply(BrokerUpdated(broker(7)))
    assert context.broker(7) is None


def test_assignment_helpers():
    context = make_context(live=[1, 2, 3])
    add_topic(context, "a", {0: [1, 2], 1: [2, 3]})
    add_topic(context, "b", {0: [3]})
    assert context.all_topics == {"a", "b"}
    assert context.all_partitions() == [tp("a", 0), tp("a", 1), tp("b", 0)]
    assert context.partitions_for_topic("a") == [tp("a", 0), tp("a", 1)]
    assert context.partitions_on_broker(2) == [tp("a", 0), tp("a", 1)]
    assert context.topic_assignment("a") == {0: (1, 2), 1: (2, 3)}
    assert context.partition_replica_assignment(tp("zzz", 0)) == ()
    assert context.replicas_on_brokers([3]) == [
        PartitionAndReplica(tp("a", 1), 3),
        PartitionAndReplica(tp("b", 0), 3),
    ]
    assert context.replicas_for_topic("b") == [PartitionAndReplica(tp("b", 0), 3)]


def test_online_and_offline_replicas():
    context = make_context(live=[1])
    add_topic(context, "a", {0: [1, 2]})
    online, offline = context.online_and_offline_replicas()
    assert online == [PartitionAndReplica(tp("a", 0), 1)]
    assert offline == [PartitionAndReplica(tp("a", 0), 2)]


def test_leadership_helpers():
    context = make_context(live=[1, 2])
    online_topic(context, "a", {0: [1, 2], 1: [2, 1], 2: [1]})
    online_topic(context, "b", {0: [3, 1]}, leaders={0: 3})
    assert context.partitions_led_by(1) == [tp("a", 0), tp("a", 2)]
    assert context.partition_leaders_on_broker(1) == [tp("a", 0)]  # RF 1 left out
    assert context.partitions_with_offline_leader() == [tp("b", 0)]
    assert context.partitions_with_leaders() == [tp("a", 0), tp("a", 1), tp("a", 2), tp("b", 0)]
    context.apply(TopicDeletionQueued(frozenset({"b"})))
    assert context.partitions_with_offline_leader() == []
    assert context.partitions_with_leaders() == [tp("a", 0), tp("a", 1), tp("a", 2)]


def test_gauges():
    context = make_context(live=[1, 2])
    online_topic(context, "a", {0: [1, 2], 1: [1, 2], 2: [2, 1]}, leaders={0: 2})
    add_topic(context, "b", {0: [1], 1: [1]}, PartitionState.OFFLINE_PARTITION)
    assert context.offline_partition_count() == 2
    assert context.online_partition_count() == 3
    assert context.global_partition_count() == 3
    assert context.preferred_replica_imbalance_count() == 1
    imbalance = context.preferred_replica_imbalance_per_broker()
    assert imbalance == {1: ([tp("a", 0)], 4), 2: ([], 1)}
    context.apply(TopicDeletionStarted(frozenset({"b"})))
    assert context.offline_partition_count() == 0


def test_preferred_replica_being_added_counts_as_balanced_until_in_isr():
    context = make_context(live=[1, 2, 3])
    context.apply(PartitionAssignmentChanged(tp("a", 0), ReplicaAssignment((3, 1, 2), (3,), ())))
    set_leadership(context, tp("a", 0), leader=1, isr=[1, 2])
    assert context.has_preferred_leader(tp("a", 0))
    set_leadership(context, tp("a", 0), leader=1, isr=[1, 2, 3])
    assert not context.has_preferred_leader(tp("a", 0))


def test_states_default_to_non_existent():
    context = make_context()
    assert context.partition_state(tp("x", 0)) == PartitionState.NON_EXISTENT_PARTITION
    replica = PartitionAndReplica(tp("x", 0), 1)
    assert context.replica_state(replica) == ReplicaState.NON_EXISTENT_REPLICA
    assert not context.has_replica_state(replica)
    context.apply(ReplicaStateChanged(replica, ReplicaState.NEW_REPLICA))
    assert context.has_replica_state(replica)
    context.apply(ReplicaStateRemoved(replica))
    assert not context.has_replica_state(replica)


def test_replica_state_queries():
    context = make_context(live=[1, 2])
    online_topic(context, "a", {0: [1, 2]})
    assert context.are_all_replicas_in_state("a", ReplicaState.ONLINE_REPLICA)
    context.apply(ReplicaStateChanged(PartitionAndReplica(tp("a", 0), 2), ReplicaState.OFFLINE_REPLICA))
    assert context.is_any_replica_in_state("a", ReplicaState.OFFLINE_REPLICA)
    assert context.replicas_in_state("a", ReplicaState.OFFLINE_REPLICA) == [
        PartitionAndReplica(tp("a", 0), 2)
    ]
    assert context.partitions_in_states({PartitionState.ONLINE_PARTITION}, "a") == [tp("a", 0)]


def test_deletion_marks():
    context = make_context()
    add_topic(context, "a", {0: [1]})
    context.apply(TopicDeletionIneligible(frozenset({"a"})))
    assert context.topics_ineligible_for_deletion == set()  # only queued topics can be ineligible
    context.apply(TopicDeletionQueued(frozenset({"a"})))
    context.apply(TopicDeletionIneligible(frozenset({"a"})))
    context.apply(TopicDeletionStarted(frozenset({"a"})))
    assert context.is_topic_queued_for_deletion("a") and context.is_topic_deletion_started("a")
    assert context.topics_ineligible_for_deletion == {"a"}
    context.apply(TopicDeletionResumed(frozenset({"a"})))
    assert context.topics_ineligible_for_deletion == set()


def test_topic_removal_forgets_everything_about_it():
    context = make_context(live=[1])
    online_topic(context, "a", {0: [1]})
    online_topic(context, "b", {0: [1]})
    context.apply(TopicAdded("a", "id-a"))
    context.apply(TopicConfigChanged.of("a", {"retention.ms": "1"}))
    context.apply(TopicDeletionQueued(frozenset({"a"})))
    context.apply(TopicRemoved("a"))
    assert context.all_topics == {"b"}
    assert context.topic_id("a") is None and context.topic_config("a") == {}
    assert context.partition_leadership(tp("a", 0)) is None
    assert context.partition_state(tp("a", 0)) == PartitionState.NON_EXISTENT_PARTITION
    assert not context.has_replica_state(PartitionAndReplica(tp("a", 0), 1))
    assert not context.is_topic_queued_for_deletion("a")
    assert context.has_replica_state(PartitionAndReplica(tp("b", 0), 1))


def test_topic_ids_and_unclean_override():
    context = make_context()
    context.apply(TopicAdded("a", "AAAAAAAAAAAAAAAAAAAAAA"))
    assert context.topic_id("a") == "AAAAAAAAAAAAAAAAAAAAAA"
    assert context.topic_name("AAAAAAAAAAAAAAAAAAAAAA") == "a"
    assert context.unclean_leader_election_enabled("a", default=True)
    context.apply(TopicConfigChanged.of("a", {"unclean.leader.election.enable": "false"}))
    assert not context.unclean_leader_election_enabled("a", default=True)


def test_replaying_the_same_records_rebuilds_the_same_context():
    records = [
        ControllerEpochChanged(3, 2),
        BrokersAdded((broker(1), broker(2))),
        BrokerShuttingDown(2),
        *topic_records("a", {0: [1, 2], 1: [2, 1]}, "id"),
        PartitionLeadershipChanged(tp("a", 0), LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1, 2), 0), 3)),
        PartitionStateChanged(tp("a", 0), PartitionState.ONLINE_PARTITION),
        ReplicaStateChanged(PartitionAndReplica(tp("a", 0), 1), ReplicaState.ONLINE_REPLICA),
        TopicDeletionQueued(frozenset({"a"})),
    ]
    first, second = ControllerContext(), ControllerContext()
    first.apply_all(records)
    second.apply_all(records)
    assert vars(first) == vars(second)
    assert first.epoch == 3 and first.epoch_zk_version == 2
    first.apply(ContextReset())
    assert vars(first) == vars(ControllerContext())


def test_unknown_records_are_refused():
    with pytest.raises(TypeError):
        ControllerContext().apply("not a record")  # type: ignore[arg-type]
