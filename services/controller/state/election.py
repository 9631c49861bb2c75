"""Partition leader election: the four strategies and their pure algorithms (Kafka 2.8).

    offline            first replica in assignment order that is live and in the ISR; with unclean
                       election allowed and no live ISR member, the first live replica. New ISR:
                       the live part of the ISR, or just the new leader after an unclean election.
    reassign           first target replica (of a reassignment) that is live and in the ISR;
                       the ISR is kept.
    preferred replica  the first replica of the assignment, only if it is live and in the ISR;
                       the ISR is kept.
    controlled shutdown first replica in assignment order that is live (or shutting down), in the
                       ISR and not shutting down; the new ISR drops every shutting-down broker.

Every change made here bumps the leader epoch (`LeaderAndIsr.new_leader_and_isr`). An election
that finds no leader changes nothing; the partition keeps its state.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from services.common.topic_partition import TopicPartition
from services.controller.state.context import ControllerContext
from services.controller.state.model import LeaderAndIsr


@dataclass(frozen=True, slots=True)
class OfflinePartitionLeaderElectionStrategy:
    """For new, offline and online partitions; `allow_unclean` forces unclean election on."""

    allow_unclean: bool = False


@dataclass(frozen=True, slots=True)
class ReassignPartitionLeaderElectionStrategy:
    pass


@dataclass(frozen=True, slots=True)
class PreferredReplicaPartitionLeaderElectionStrategy:
    pass


@dataclass(frozen=True, slots=True)
class ControlledShutdownPartitionLeaderElectionStrategy:
    pass


ElectionStrategy = (
    OfflinePartitionLeaderElectionStrategy
    | ReassignPartitionLeaderElectionStrategy
    | PreferredReplicaPartitionLeaderElectionStrategy
    | ControlledShutdownPartitionLeaderElectionStrategy
)


@dataclass(frozen=True, slots=True)
class ElectionResult:
    """The new leader/ISR (None when no replica qualifies) and the brokers to tell."""

    partition: TopicPartition
    leader_and_isr: LeaderAndIsr | None
    recipients: tuple[int, ...]
    unclean: bool = False


# ---------------------------------------------------------------------------------------------
# the algorithms: pure functions over assignment, ISR, live replicas and shutting-down brokers


def offline_partition_leader(
    assignment: Sequence[int], isr: Collection[int], live_replicas: Collection[int], unclean_enabled: bool
) -> int | None:
    for replica in assignment:
        if replica in live_replicas and replica in isr:
            return replica
    if unclean_enabled:
        return next((replica for replica in assignment if replica in live_replicas), None)
    return None


def reassign_partition_leader(
    reassignment: Sequence[int], isr: Collection[int], live_replicas: Collection[int]
) -> int | None:
    return next((r for r in reassignment if r in live_replicas and r in isr), None)


def preferred_replica_partition_leader(
    assignment: Sequence[int], isr: Collection[int], live_replicas: Collection[int]
) -> int | None:
    if assignment and assignment[0] in live_replicas and assignment[0] in isr:
        return assignment[0]
    return None


def controlled_shutdown_partition_leader(
    assignment: Sequence[int],
    isr: Collection[int],
    live_replicas: Collection[int],
    shutting_down_brokers: Collection[int],
) -> int | None:
    return next(
        (r for r in assignment if r in live_replicas and r in isr and r not in shutting_down_brokers),
        None,
    )


# ---------------------------------------------------------------------------------------------
# per-partition elections over the controller's view


def leader_for_offline(
    context: ControllerContext, partition: TopicPartition, current: LeaderAndIsr, unclean_enabled: bool
) -> ElectionResult:
    assignment = context.partition_replica_assignment(partition)
    live = tuple(r for r in assignment if context.is_replica_online(r, partition=partition))
    leader = offline_partition_leader(assignment, current.isr, live, unclean_enabled)
    if leader is None:
        return ElectionResult(partition, None, live)
    if leader in current.isr:
        new_isr = tuple(r for r in current.isr if context.is_replica_online(r, partition=partition))
        return ElectionResult(partition, current.new_leader_and_isr(leader, new_isr), live)
    return ElectionResult(partition, current.new_leader_and_isr(leader, (leader,)), live, unclean=True)


def leader_for_reassign(
    context: ControllerContext, partition: TopicPartition, current: LeaderAndIsr
) -> ElectionResult:
    targets = context.partition_full_replica_assignment(partition).target_replicas
    live = tuple(r for r in targets if context.is_replica_online(r, partition=partition))
    leader = reassign_partition_leader(targets, current.isr, live)
    return ElectionResult(partition, None if leader is None else current.new_leader(leader), targets)


def leader_for_preferred_replica(
    context: ControllerContext, partition: TopicPartition, current: LeaderAndIsr
) -> ElectionResult:
    assignment = context.partition_replica_assignment(partition)
    live = tuple(r for r in assignment if context.is_replica_online(r, partition=partition))
    leader = preferred_replica_partition_leader(assignment, current.isr, live)
    return ElectionResult(partition, None if leader is None else current.new_leader(leader), assignment)


def leader_for_controlled_shutdown(
    context: ControllerContext, partition: TopicPartition, current: LeaderAndIsr
) -> ElectionResult:
    assignment = context.partition_replica_assignment(partition)
    shutting_down = context.shutting_down_broker_ids
    live = tuple(
        r for r in assignment if context.is_replica_online(r, include_shutting_down=True, partition=partition)
    )
    leader = controlled_shutdown_partition_leader(assignment, current.isr, live, shutting_down)
    if leader is None:
        return ElectionResult(partition, None, live)
    new_isr = tuple(r for r in current.isr if r not in shutting_down)
    return ElectionResult(partition, current.new_leader_and_isr(leader, new_isr), live)


def elect_leader(
    context: ControllerContext,
    partition: TopicPartition,
    current: LeaderAndIsr,
    strategy: ElectionStrategy,
    unclean_by_default: bool = False,
) -> ElectionResult:
    """Run `strategy` for one partition. For the offline strategy unclean election applies only
    when no ISR member is live, and then if the strategy allows it or the topic's
    `unclean.leader.election.enable` (default `unclean_by_default`) is true."""
    match strategy:
        case OfflinePartitionLeaderElectionStrategy(allow_unclean):
            has_live_isr = any(context.is_replica_online(r, partition=partition) for r in current.isr)
            unclean = not has_live_isr and (
                allow_unclean or context.unclean_leader_election_enabled(partition.topic, unclean_by_default)
            )
            return leader_for_offline(context, partition, current, unclean)
        case ReassignPartitionLeaderElectionStrategy():
            return leader_for_reassign(context, partition, current)
        case PreferredReplicaPartitionLeaderElectionStrategy():
            return leader_for_preferred_replica(context, partition, current)
        case ControlledShutdownPartitionLeaderElectionStrategy():
            return leader_for_controlled_shutdown(context, partition, current)
    raise TypeError(f"not an election strategy: {strategy!r}")


def strategy_name(strategy: ElectionStrategy) -> str:
    return type(strategy).__name__
