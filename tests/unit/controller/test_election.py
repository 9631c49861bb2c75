"""Leader election strategies: the pure algorithms (table-driven) and the per-partition results."""

from __future__ import annotations

import pytest

from services.common.shared_types import ReplicaAssignment
from services.controller.state.election import (
    ControlledShutdownPartitionLeaderElectionStrategy,
    OfflinePartitionLeaderElectionStrategy,
    PreferredReplicaPartitionLeaderElectionStrategy,
    ReassignPartitionLeaderElectionStrategy,
    controlled_shutdown_partition_leader,
    elect_leader,
    offline_partition_leader,
    preferred_replica_partition_leader,
    reassign_partition_leader,
)
from services.controller.state.model import LeaderAndIsr
from services.controller.state.records import PartitionAssignmentChanged, TopicConfigChanged
from tests.unit.controller.cluster import add_topic, make_context, tp

# assignment, isr, live, unclean, expected leader
OFFLINE_CASES = [
    ([1, 2, 3], [1, 2, 3], {1, 2, 3}, False, 1),
    ([1, 2, 3], [1, 2, 3], {2, 3}, False, 2),
    ([1, 2, 3], [3, 2], {1, 2, 3}, False, 2),  # assignment order wins over ISR order
    ([1, 2, 3], [3], {1, 2, 3}, False, 3),
    ([1, 2, 3], [1], {2, 3}, False, None),  # the whole ISR is dead, clean only
    ([1, 2, 3], [1], {2, 3}, True, 2),  # unclean: first live replica
    ([1, 2, 3], [1], {3}, True, 3),
    ([1, 2, 3], [1, 2], set(), True, None),  # nothing alive at all
    ([1, 2, 3], [], {1, 2, 3}, False, None),  # empty ISR
    ([1, 2, 3], [], {1, 2, 3}, True, 1),
    ([3, 1, 2], [1, 2], {1, 2, 3}, True, 1),  # a live ISR member beats unclean
    ([], [], set(), True, None),
]


@pytest.mark.parametrize(("assignment", "isr", "live", "unclean", "expected"), OFFLINE_CASES)
def test_offline_partition_leader(assignment, isr, live, unclean, expected):
    assert offline_partition_leader(assignment, isr, live, unclean) == expected


@pytest.mark.parametrize(
    ("reassignment", "isr", "live", "expected"),
    [([4, 5, 6], [1, 4, 5], {4, 5, 6}, 4), ([4, 5, 6], [1, 5], {4, 5, 6}, 5), ([4, 5], [1, 2], {4, 5}, None)],
)
def test_reassign_partition_leader(reassignment, isr, live, expected):
    assert reassign_partition_leader(reassignment, isr, live) == expected


@pytest.mark.parametrize(
    ("assignment", "isr", "live", "expected"),
    [
        ([1, 2, 3], [1, 2, 3], {1, 2, 3}, 1),
        ([1, 2, 3], [2, 3], {1, 2, 3}, None),  # preferred not in ISR
        ([1, 2, 3], [1, 2, 3], {2, 3}, None),  # preferred not live
        ([2, 1], [1, 2], {1, 2}, 2),
        ([], [], set(), None),
    ],
)
def test_preferred_replica_partition_leader(assignment, isr, live, expected):
    assert preferred_replica_partition_leader(assignment, isr, live) == expected


@pytest.mark.parametrize(
    ("assignment", "isr", "live", "shutting_down", "expected"),
    [
        ([1, 2, 3], [1, 2, 3], {1, 2, 3}, {1}, 2),
        ([1, 2, 3], [1, 3], {1, 2, 3}, {1}, 3),
        ([1, 2, 3], [1, 2, 3], {1, 2, 3}, {1, 2}, 3),
        ([1, 2, 3], [1], {1, 2, 3}, {1}, None),  # only the shutting-down broker is in sync
        ([1, 2, 3], [1, 2, 3], {1, 3}, {1}, 3),  # 2 is dead
        ([1, 2], [1, 2], {1, 2}, set(), 1),
    ],
)
def test_controlled_shutdown_partition_leader(assignment, isr, live, shutting_down, expected):
    assert controlled_shutdown_partition_leader(assignment, isr, live, shutting_down) == expected


# --- over a context ---------------------------------------------------------------------------


def current(leader, isr, epoch=3, version=7):
    return LeaderAndIsr(leader, epoch, tuple(isr), version)


def test_offline_election_keeps_live_isr_and_bumps_epoch():
    context = make_context(live=[2, 3])
    add_topic(context, "t", {0: [1, 2, 3]})
    result = elect_leader(
        context, tp("t", 0), current(1, [1, 2, 3]), OfflinePartitionLeaderElectionStrategy()
    )
    assert result.leader_and_isr == LeaderAndIsr(2, 4, (2, 3), 7)
    assert result.recipients == (2, 3)
    assert not result.unclean


def test_offline_election_with_the_whole_isr_dead_finds_no_leader_by_default():
    context = make_context(live=[2, 3])
    add_topic(context, "t", {0: [1, 2, 3]})
    result = elect_leader(context, tp("t", 0), current(1, [1]), OfflinePartitionLeaderElectionStrategy())
    assert result.leader_and_isr is None
    assert result.recipients == (2, 3)


@pytest.mark.parametrize(
    ("allow_unclean", "broker_default", "topic_override", "elected"),
    [
        (False, False, None, False),
        (True, False, None, True),
        (False, True, None, True),
        (False, False, "true", True),
        (False, True, "false", False),  # the topic override wins over the broker default
        (True, False, "false", True),  # an admin's unclean election wins over everything
    ],
)
def test_unclean_election_sources(allow_unclean, broker_default, topic_override, elected):
    context = make_context(live=[2, 3])
    add_topic(context, "t", {0: [1, 3, 2]})
    if topic_override is not None:
        context.apply(TopicConfigChanged.of("t", {"unclean.leader.election.enable": topic_override}))
    strategy = OfflinePartitionLeaderElectionStrategy(allow_unclean)
    result = elect_leader(context, tp("t", 0), current(1, [1]), strategy, unclean_by_default=broker_default)
    if elected:
        assert result.leader_and_isr == LeaderAndIsr(3, 4, (3,), 7)  # ISR is just the new leader
        assert result.unclean
    else:
        assert result.leader_and_isr is None


def test_unclean_is_not_used_while_an_isr_member_is_alive():
    context = make_context(live=[2, 3])
    add_topic(context, "t", {0: [1, 2, 3]})
    result = elect_leader(
        context, tp("t", 0), current(1, [1, 3]), OfflinePartitionLeaderElectionStrategy(True)
    )
    assert result.leader_and_isr == LeaderAndIsr(3, 4, (3,), 7)
    assert not result.unclean


def test_offline_election_treats_shutting_down_brokers_as_offline():
    context = make_context(live=[1, 2, 3], shutting_down=[1])
    add_topic(context, "t", {0: [1, 2, 3]})
    result = elect_leader(context, tp("t", 0), current(1, [1, 2]), OfflinePartitionLeaderElectionStrategy())
    assert result.leader_and_isr == LeaderAndIsr(2, 4, (2,), 7)


def test_preferred_replica_election_keeps_isr_and_tells_the_whole_assignment():
    context = make_context(live=[1, 2, 3])
    add_topic(context, "t", {0: [1, 2, 3]})
    result = elect_leader(
        context, tp("t", 0), current(2, [2, 1, 3]), PreferredReplicaPartitionLeaderElectionStrategy()
    )
    assert result.leader_and_isr == LeaderAndIsr(1, 4, (2, 1, 3), 7)
    assert result.recipients == (1, 2, 3)


def test_preferred_replica_election_fails_when_preferred_is_dead():
    context = make_context(live=[2, 3])
    add_topic(context, "t", {0: [1, 2, 3]})
    result = elect_leader(
        context, tp("t", 0), current(2, [2, 1, 3]), PreferredReplicaPartitionLeaderElectionStrategy()
    )
    assert result.leader_and_isr is None


def test_controlled_shutdown_election_drops_shutting_down_brokers_from_isr():
    context = make_context(live=[1, 2, 3, 4], shutting_down=[1, 3])
    add_topic(context, "t", {0: [1, 3, 2, 4]})
    result = elect_leader(
        context, tp("t", 0), current(1, [1, 2, 3, 4]), ControlledShutdownPartitionLeaderElectionStrategy()
    )
    assert result.leader_and_isr == LeaderAndIsr(2, 4, (2, 4), 7)
    assert result.recipients == (1, 3, 2, 4)  # live or shutting down replicas


def test_controlled_shutdown_election_without_candidate():
    context = make_context(live=[1, 2], shutting_down=[1])
    add_topic(context, "t", {0: [1, 2]})
    result = elect_leader(
        context, tp("t", 0), current(1, [1]), ControlledShutdownPartitionLeaderElectionStrategy()
    )
    assert result.leader_and_isr is None


def test_reassign_election_uses_target_replicas():
    context = make_context(live=[1, 2, 3, 4])
    context.apply(
        PartitionAssignmentChanged(
            tp("t", 0), ReplicaAssignment((4, 1, 2), adding_replicas=(4,), removing_replicas=(1,))
        )
    )
    result = elect_leader(
        context, tp("t", 0), current(1, [1, 2, 4]), ReassignPartitionLeaderElectionStrategy()
    )
    assert result.leader_and_isr == LeaderAndIsr(4, 4, (1, 2, 4), 7)
    assert result.recipients == (4, 2)


def test_elect_leader_rejects_other_strategies():
    context = make_context(live=[1])
    with pytest.raises(TypeError):
        elect_leader(context, tp("t", 0), current(1, [1]), object())  # type: ignore[arg-type]
