"""Preferred leader balance: the periodic auto rebalance and requested leader elections.

Auto rebalance (Kafka's checkAndTriggerAutoLeaderRebalance), every
`leader.imbalance.check.interval.seconds` while `auto.leader.rebalance.enable`: for each broker,
its imbalance ratio is the share of the partitions it is the preferred replica for (first in the
assignment) that another broker leads. Above `leader.imbalance.per.broker.percentage` / 100, those
partitions go back to it by the preferred-replica election, unless a reassignment is in
progress, the topic is queued for deletion or gone, or the preferred replica is not live and in
the ISR.

Requested elections (ElectLeaders, `/admin/preferred_replica_election`): unknown partitions are
UNKNOWN_TOPIC_OR_PARTITION, those of topics being deleted INVALID_TOPIC_EXCEPTION; a partition
already led by its preferred replica (preferred) or by a live broker (unclean) is
ELECTION_NOT_NEEDED; a failed election is PREFERRED_LEADER_NOT_AVAILABLE or
ELIGIBLE_LEADERS_NOT_AVAILABLE. Unclean election goes outside the ISR only when an admin asked.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from services.common.errors import Errors, KafkaError
from services.common.shared_types import NO_LEADER
from services.common.topic_partition import TopicPartition
from services.controller.state.config import ControllerConfig
from services.controller.state.context import ControllerContext
from services.controller.state.effects import PartitionStateChangeOutcome
from services.controller.state.election import (
    OfflinePartitionLeaderElectionStrategy,
    PreferredReplicaPartitionLeaderElectionStrategy,
    preferred_replica_partition_leader,
)
from services.controller.state.events import ElectionTrigger, ElectionType
from services.controller.state.partition_state_machine import PartitionStateMachine
from services.controller.state.states import PartitionState


def leader_imbalance_ratios(context: ControllerContext) -> dict[int, float]:
    """Preferred replica -> share of its preferred partitions led by another broker."""
    return {
        broker: len(not_preferred) / total
        for broker, (not_preferred, total) in context.preferred_replica_imbalance_per_broker().items()
    }


def can_preferred_replica_be_leader(context: ControllerContext, partition: TopicPartition) -> bool:
    assignment = context.partition_replica_assignment(partition)
    leadership = context.partition_leadership(partition)
    if leadership is None:
        return False
    live = [r for r in assignment if context.is_replica_online(r, partition=partition)]
    return preferred_replica_partition_leader(assignment, leadership.leader_and_isr.isr, live) is not None


def partitions_to_rebalance(
    context: ControllerContext,
    config: ControllerConfig,
    partitions_being_reassigned: Iterable[TopicPartition] = (),
) -> dict[int, list[TopicPartition]]:
    """Per imbalanced broker, the partitions to move back to it (empty brokers left out)."""
    threshold = config.leader_imbalance_per_broker_percentage / 100
    reassigning = bool(list(partitions_being_reassigned))
    result: dict[int, list[TopicPartition]] = {}
    for broker, (not_preferred, total) in sorted(context.preferred_replica_imbalance_per_broker().items()):
        if len(not_preferred) / total <= threshold:
            continue
        candidates = [
            p
            for p in not_preferred
            if not reassigning
            and not context.is_topic_queued_for_deletion(p.topic)
            and p.topic in context.all_topics
            and can_preferred_replica_be_leader(context, p)
        ]
        if candidates:
            result[broker] = candidates
    return result


def auto_rebalance(
    context: ControllerContext,
    partition_state_machine: PartitionStateMachine,
    config: ControllerConfig,
    partitions_being_reassigned: Iterable[TopicPartition] = (),
) -> PartitionStateChangeOutcome:
    """Run the preferred-replica election for every partition `partitions_to_rebalance` picks."""
    outcome = PartitionStateChangeOutcome()
    for partitions in partitions_to_rebalance(context, config, partitions_being_reassigned).values():
        outcome.extend(
            partition_state_machine.handle_state_changes(
                partitions, PartitionState.ONLINE_PARTITION, PreferredReplicaPartitionLeaderElectionStrategy()
            )
        )
    return outcome


@dataclass
class ElectLeadersOutcome(PartitionStateChangeOutcome):
    """`leaders`: partition -> new leader id or the KafkaError to answer."""

    leaders: dict[TopicPartition, int | KafkaError] = field(default_factory=dict)


def elect_leaders(
    context: ControllerContext,
    partition_state_machine: PartitionStateMachine,
    partitions: Iterable[TopicPartition],
    election_type: ElectionType,
    trigger: ElectionTrigger = ElectionTrigger.ADMIN_CLIENT_TRIGGERED,
) -> ElectLeadersOutcome:
    outcome = ElectLeadersOutcome()
    if election_type == ElectionType.PREFERRED:
        strategy = PreferredReplicaPartitionLeaderElectionStrategy()
        failure_error = Errors.PREFERRED_LEADER_NOT_AVAILABLE
    else:
        strategy = OfflinePartitionLeaderElectionStrategy(trigger == ElectionTrigger.ADMIN_CLIENT_TRIGGERED)
        failure_error = Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE
    known = set(context.all_partitions())
    electable: list[TopicPartition] = []
    for partition in sorted(set(partitions)):
        if partition not in known:
            outcome.leaders[partition] = KafkaError(
                "The partition does not exist.", error=Errors.UNKNOWN_TOPIC_OR_PARTITION
            )
        elif context.is_topic_queued_for_deletion(partition.topic):
            outcome.leaders[partition] = KafkaError(
                "The topic is being deleted", error=Errors.INVALID_TOPIC_EXCEPTION
            )
        elif context.partition_leadership(partition) is None:
            outcome.leaders[partition] = KafkaError(
                f"Partition {partition} has no leadership yet", error=failure_error
            )
        elif _election_needed(context, partition, election_type):
            electable.append(partition)
        else:
            outcome.leaders[partition] = KafkaError(error=Errors.ELECTION_NOT_NEEDED)
    changes = partition_state_machine.handle_state_changes(
        electable, PartitionState.ONLINE_PARTITION, strategy
    )
    outcome.extend(changes)
    for partition, result in changes.results.items():
        if isinstance(result, Exception):
            outcome.leaders[partition] = KafkaError(str(result), error=failure_error)
        else:
            outcome.leaders[partition] = result.leader
    for partition in changes.invalid:
        outcome.leaders[partition] = KafkaError(
            f"Partition {partition} cannot be elected", error=failure_error
        )
    return outcome


def _election_needed(
    context: ControllerContext, partition: TopicPartition, election_type: ElectionType
) -> bool:
    leadership = context.partition_leadership(partition)
    assert leadership is not None
    leader = leadership.leader_and_isr.leader
    if election_type == ElectionType.PREFERRED:
        return leader != context.partition_replica_assignment(partition)[0]
    return leader == NO_LEADER or leader not in context.live_broker_ids
