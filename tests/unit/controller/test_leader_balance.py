"""Auto preferred leader rebalance and requested (preferred / unclean) leader elections."""

from __future__ import annotations

from services.common.errors import Errors, KafkaError
from services.controller.state.events import ElectionTrigger, ElectionType
from services.controller.state.leader_balance import (
    auto_rebalance,
    elect_leaders,
    leader_imbalance_ratios,
    partitions_to_rebalance,
)
from services.controller.state.model import LeaderAndIsr
from services.controller.state.partition_state_machine import PartitionStateMachine
from services.controller.state.records import BrokersRemoved, PartitionStateChanged, TopicDeletionQueued
from services.controller.state.states import PartitionState
from tests.unit.controller.cluster import add_topic, config, make_context, online_topic, set_leadership, tp


def imbalanced_cluster(moved: int):
    """10 partitions preferring broker 1 (and 10 preferring 2); `moved` of broker 1's led by 2."""
    context = make_context(live=[1, 2])
    assignment = {p: [1, 2] for p in range(10)} | {p: [2, 1] for p in range(10, 20)}
    online_topic(context, "t", assignment, leaders={p: 2 for p in range(moved)})
    return context


def test_imbalance_ratio_per_broker():
    context = imbalanced_cluster(3)
    assert leader_imbalance_ratios(context) == {1: 0.3, 2: 0.0}


def test_at_or_below_threshold_nothing_moves():
    assert partitions_to_rebalance(imbalanced_cluster(1), config()) == {}  # 10% is not above 10%


def test_above_threshold_the_not_preferred_partitions_move_back():
    assert partitions_to_rebalance(imbalanced_cluster(2), config()) == {1: [tp("t", 0), tp("t", 1)]}


def test_threshold_comes_from_config():
    assert (
        partitions_to_rebalance(imbalanced_cluster(2), config(leader_imbalance_per_broker_percentage=20))
        == {}
    )
    assert (
        partitions_to_rebalance(imbalanced_cluster(1), config(leader_imbalance_per_broker_percentage=0)) != {}
    )


def test_candidates_need_preferred_replica_live_and_in_sync():
    context = imbalanced_cluster(3)
    set_leadership(context, tp("t", 0), leader=2, isr=[2])  # preferred out of ISR
    assert partitions_to_rebalance(context, config()) == {1: [tp("t", 1), tp("t", 2)]}
    context.apply(BrokersRemoved(frozenset({1})))
    assert partitions_to_rebalance(context, config()) == {}


def test_nothing_moves_during_a_reassignment_or_for_topics_being_deleted():
    assert partitions_to_rebalance(imbalanced_cluster(3), config(), [tp("x", 0)]) == {}
    context = imbalanced_cluster(3)
    context.apply(TopicDeletionQueued(frozenset({"t"})))
    assert partitions_to_rebalance(context, config()) == {}


def test_auto_rebalance_elects_preferred_leaders():
    context = imbalanced_cluster(3)
    outcome = auto_rebalance(context, PartitionStateMachine(context, config()), config())
    assert set(outcome.successes()) == {tp("t", 0), tp("t", 1), tp("t", 2)}
    assert context.partition_leadership(tp("t", 0)).leader_and_isr == LeaderAndIsr(1, 4, (1, 2), 8)
    assert leader_imbalance_ratios(context)[1] == 0.0
    assert context.preferred_replica_imbalance_count() == 0


# --- requested elections ----------------------------------------------------------------------


def test_preferred_election_results():
    context = make_context(live=[1, 2, 3])
    online_topic(
        context, "t", {0: [1, 2], 1: [1, 2], 2: [3, 2], 3: [1, 2]}, leaders={0: 2, 2: 2}, isr={2: [2]}
    )
    online_topic(context, "deleting", {0: [1, 2]})
    context.apply(TopicDeletionQueued(frozenset({"deleting"})))
    add_topic(context, "new", {0: [1]}, PartitionState.NEW_PARTITION)
    psm = PartitionStateMachine(context, config())

    outcome = elect_leaders(
        context,
        psm,
        [tp("t", 0), tp("t", 1), tp("t", 2), tp("nope", 0), tp("deleting", 0), tp("new", 0)],
        ElectionType.PREFERRED,
    )

    names = {p: r.error_name if isinstance(r, KafkaError) else r for p, r in outcome.leaders.items()}
    assert names == {
        tp("t", 0): 1,
        tp("t", 1): "ELECTION_NOT_NEEDED",
        tp("t", 2): "PREFERRED_LEADER_NOT_AVAILABLE",
        tp("nope", 0): "UNKNOWN_TOPIC_OR_PARTITION",
        tp("deleting", 0): "INVALID_TOPIC_EXCEPTION",
        tp("new", 0): "PREFERRED_LEADER_NOT_AVAILABLE",
    }
    assert context.partition_state(tp("new", 0)) == PartitionState.NEW_PARTITION


def test_unclean_election_from_admin_goes_outside_the_isr():
    context = make_context(live=[2, 3])
    online_topic(context, "t", {0: [1, 2], 1: [2, 3]}, isr={0: [1]})
    context.apply(PartitionStateChanged(tp("t", 0), PartitionState.OFFLINE_PARTITION))
    psm = PartitionStateMachine(context, config())

    outcome = elect_leaders(context, psm, [tp("t", 0), tp("t", 1)], ElectionType.UNCLEAN)

    assert outcome.leaders[tp("t", 0)] == 2
    assert outcome.leaders[tp("t", 1)].code == Errors.ELECTION_NOT_NEEDED
    assert context.partition_leadership(tp("t", 0)).leader_and_isr.isr == (2,)


def test_unclean_election_not_from_admin_stays_clean():
    context = make_context(live=[2, 3])
    online_topic(context, "t", {0: [1, 2]}, isr={0: [1]})
    psm = PartitionStateMachine(context, config())
    outcome = elect_leaders(context, psm, [tp("t", 0)], ElectionType.UNCLEAN, ElectionTrigger.ZK_TRIGGERED)
    assert outcome.leaders[tp("t", 0)].code == Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE
