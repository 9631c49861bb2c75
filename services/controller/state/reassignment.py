"""Partition reassignment (Kafka 2.8's onPartitionReassignment and KIP-455), decisions only.

For a partition with current replicas RS, original replicas ORS and target replicas TRS, adding
AR = TRS - ORS and removing RR = ORS - TRS:

  start     the assignment becomes RS = ORS + TRS with AR and RR recorded (written to
            `/brokers/topics/<t>`); replicas a previous reassignment was adding that the new one
            does not want are stopped and deleted; then, unless TRS is already in the ISR, the
            leader epoch goes up (conditional state znode write), every replica of RS gets
            LeaderAndIsr with the full RS, and AR replicas go NewReplica (they start fetching).
  complete  once TRS is in the ISR (checked again whenever the ISR changes): AR replicas go
            OnlineReplica; the assignment becomes TRS; a leader outside TRS (or not alive) is
            replaced by the first live ISR member of TRS (ReassignPartitionLeaderElectionStrategy),
            otherwise the leader epoch goes up; RR replicas go OfflineReplica, ReplicaDeletionStarted
            (StopReplica with delete), ReplicaDeletionSuccessful and NonExistentReplica; the final
            assignment is written; the partition leaves `/admin/reassign_partitions`; every broker
            gets UpdateMetadata.
  cancel    a reassignment to ORS: the AR replicas are stopped and deleted.

While a topic has a partition being reassigned its deletion waits. Requests are validated as
Kafka's: an unknown partition, or one of a topic queued for deletion, is
UNKNOWN_TOPIC_OR_PARTITION; an empty target, a broker listed twice or a broker that is not
registered is INVALID_REPLICA_ASSIGNMENT; cancelling where nothing is in progress is
NO_REASSIGNMENT_IN_PROGRESS. Reassignments that would make a topic's assignment too large for its
znode (the caller's `fits` says) are INVALID_REQUEST, before anything changes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence

from services.common.errors import Errors, KafkaError
from services.common.shared_types import ReplicaAssignment
from services.common.topic_partition import TopicPartition
from services.controller.state.context import ControllerContext
from services.controller.state.effects import (
    Outcome,
    RemoveFromZkReassignment,
    StateChangeFailed,
    UpdatePartitionState,
    UpdateTopicAssignment,
)
from services.controller.state.election import ReassignPartitionLeaderElectionStrategy
from services.controller.state.model import LeaderIsrAndControllerEpoch, PartitionAndReplica
from services.controller.state.partition_state_machine import PartitionStateMachine
from services.controller.state.records import PartitionAssignmentChanged, PartitionLeadershipChanged
from services.controller.state.replica_state_machine import ReplicaStateMachine
from services.controller.state.request_batch import RequestBatch, update_metadata_effects
from services.controller.state.states import PartitionState, ReplicaState
from services.controller.state.topic_deletion import TopicDeletionManager

logger = logging.getLogger(__name__)

# Whether a topic's full assignment (partition id -> replicas) fits in its znode.
Fits = Callable[[str, Mapping[int, ReplicaAssignment]], bool]


def reassign_to(current: ReplicaAssignment, target: Sequence[int]) -> ReplicaAssignment:
    """The assignment that moves `current` (perhaps itself mid-reassignment) to `target`: the
    original replicas stay the original ones."""
    origin = current.origin_replicas
    full = tuple(dict.fromkeys((*target, *origin)))
    return ReplicaAssignment(
        full,
        tuple(r for r in full if r not in origin),
        tuple(r for r in full if r not in target),
    )


def validate_target(
    context: ControllerContext, partition: TopicPartition, target: Sequence[int] | None
) -> KafkaError | None:
    """Why a reassignment of `partition` to `target` (None: cancel) is refused, or None."""
    if not context.partition_replica_assignment(partition) or context.is_topic_queued_for_deletion(partition.topic):
        return KafkaError("The partition does not exist.", error=Errors.UNKNOWN_TOPIC_OR_PARTITION)
    if target is None:
        if not context.partition_full_replica_assignment(partition).is_being_reassigned:
            return KafkaError(f"No reassignment in progress for {partition}.", error=Errors.NO_REASSIGNMENT_IN_PROGRESS)
        return None
    if not target:
        return KafkaError(
            f"Empty replica list specified in partition reassignment for {partition}.",
            error=Errors.INVALID_REPLICA_ASSIGNMENT,
        )
    if len(set(target)) != len(target):
        return KafkaError(
            f"Duplicate replica ids in partition reassignment replica list: {list(target)}",
            error=Errors.INVALID_REPLICA_ASSIGNMENT,
        )
    registered = context.live_or_shutting_down_broker_ids
    if any(r < 0 or r not in registered for r in target):
        return KafkaError(
            f"Replica assignment has brokers that are not alive. Replica list: {list(target)}, "
            f"live broker list: {sorted(registered)}",
            error=Errors.INVALID_REPLICA_ASSIGNMENT,
        )
    return None


def _last_topic_writes(effects: list) -> list:
    """The effects with only the last of each topic's assignment writes (it holds the earlier
    ones' changes): one request reassigning many partitions of a topic rewrites its znode once."""
    last = {e.topic: i for i, e in enumerate(effects) if isinstance(e, UpdateTopicAssignment)}
    return [e for i, e in enumerate(effects) if not isinstance(e, UpdateTopicAssignment) or last[e.topic] == i]


class PartitionReassigner:
    def __init__(
        self,
        context: ControllerContext,
        partition_state_machine: PartitionStateMachine,
        replica_state_machine: ReplicaStateMachine,
        topic_deletion_manager: TopicDeletionManager,
    ) -> None:
        self._context = context
        self._psm = partition_state_machine
        self._rsm = replica_state_machine
        self._deletion = topic_deletion_manager

    # --- entry points ----------------------------------------------------------------------

    def alter(
        self,
        reassignments: Mapping[TopicPartition, Sequence[int] | None],
        from_zk: bool = False,
        fits: Fits | None = None,
    ) -> tuple[Outcome, dict[TopicPartition, KafkaError | None]]:
        """Start (or cancel, for None) reassignments; each partition's error or None. Partitions
        reassigned through the API leave `/admin/reassign_partitions` (unless `from_zk`)."""
        outcome = Outcome()
        results: dict[TopicPartition, KafkaError | None] = {}
        context = self._context
        planned: dict[TopicPartition, ReplicaAssignment] = {}
        for partition, target in sorted(reassignments.items()):
            error = validate_target(context, partition, target)
            results[partition] = error
            if error is None:
                current = context.partition_full_replica_assignment(partition)
                wanted = current.origin_replicas if target is None else tuple(target)
                planned[partition] = reassign_to(current, wanted)
        if fits is not None:
            for topic in sorted({p.topic for p in planned}):
                prospective = {
                    p.partition: planned.get(p, context.partition_full_replica_assignment(p))
                    for p in context.partitions_for_topic(topic)
                }
                if not fits(topic, prospective):
                    for partition in [p for p in planned if p.topic == topic]:
                        del planned[partition]
                        results[partition] = KafkaError(
                            f"The assignment of topic {topic} would be too large for ZooKeeper.",
                            error=Errors.INVALID_REQUEST,
                        )
        for partition, reassignment in planned.items():
            outcome.extend(self.on_partition_reassignment(partition, reassignment))
        outcome.effects = _last_topic_writes(outcome.effects)
        accepted = [p for p, e in results.items() if e is None]
        if accepted and not from_zk:
            outcome.effects.append(
                RemoveFromZkReassignment(tuple((p, None) for p in accepted), context.epoch_zk_version)
            )
        return outcome, results

    def resume(self) -> Outcome:
        """On failover: carry on with every partition whose assignment records a reassignment."""
        outcome = Outcome()
        for partition in self.partitions_being_reassigned():
            outcome.extend(
                self.on_partition_reassignment(partition, self._context.partition_full_replica_assignment(partition))
            )
        return outcome

    def restart(self, partitions: Iterable[TopicPartition]) -> Outcome:
        """Carry on with these partitions' reassignments (after a state znode conflict, or when a
        broker holding a target replica starts again)."""
        outcome = Outcome()
        context = self._context
        for partition in sorted(set(partitions)):
            assignment = context.partition_full_replica_assignment(partition)
            if assignment.is_being_reassigned:
                outcome.extend(self.on_partition_reassignment(partition, assignment))
        return outcome

    def on_isr_change(self, partitions: Iterable[TopicPartition]) -> Outcome:
        """Complete the reassignments whose target replicas have all joined the ISR."""
        outcome = Outcome()
        for partition in sorted(set(partitions)):
            assignment = self._context.partition_full_replica_assignment(partition)
            if assignment.is_being_reassigned and self._is_complete(partition, assignment):
                logger.info(
                    "Target replicas %s have all caught up with the leader of %s", assignment.target_replicas, partition
                )
                outcome.extend(self.on_partition_reassignment(partition, assignment))
        return outcome

    def partitions_being_reassigned(self) -> list[TopicPartition]:
        context = self._context
        return [p for p in context.all_partitions() if context.partition_full_replica_assignment(p).is_being_reassigned]

    # --- the steps ---------------------------------------------------------------------------

    def on_partition_reassignment(self, partition: TopicPartition, reassignment: ReplicaAssignment) -> Outcome:
        outcome = self._deletion.mark_topic_ineligible_for_deletion({partition.topic}, "topic reassignment in progress")
        outcome.extend(self._update_current_reassignment(partition, reassignment))
        if not self._is_complete(partition, reassignment):
            outcome.extend(self._update_leader_epoch_and_send(partition, reassignment))
            outcome.extend(self._start_new_replicas(partition, reassignment.adding_replicas))
            return outcome
        return outcome.extend(self._complete(partition, reassignment))

    def _complete(self, partition: TopicPartition, reassignment: ReplicaAssignment) -> Outcome:
        context = self._context
        outcome = Outcome()
        adding = [PartitionAndReplica(partition, r) for r in reassignment.adding_replicas]
        outcome.extend(self._rsm.handle_state_changes(adding, ReplicaState.ONLINE_REPLICA))
        completed = ReplicaAssignment.of(reassignment.target_replicas)
        outcome.apply(context, PartitionAssignmentChanged(partition, completed))
        outcome.extend(self._move_leader_if_required(partition, completed))
        outcome.extend(self._stop_removed_replicas(partition, reassignment.removing_replicas))
        outcome.effects.append(UpdateTopicAssignment(partition.topic, context.topic_assignment(partition.topic)))
        outcome.effects.append(RemoveFromZkReassignment(((partition, completed.replicas),), context.epoch_zk_version))
        outcome.effects.extend(update_metadata_effects(context, context.live_or_shutting_down_broker_ids, [partition]))
        logger.info("Reassignment of %s to %s completed", partition, list(completed.replicas))
        if not any(
            context.partition_full_replica_assignment(p).is_being_reassigned
            for p in context.partitions_for_topic(partition.topic)
        ):
            outcome.extend(self._deletion.resume_deletion_for_topics({partition.topic}))
        return outcome

    def _is_complete(self, partition: TopicPartition, reassignment: ReplicaAssignment) -> bool:
        leadership = self._context.partition_leadership(partition)
        if leadership is None:
            return False
        return set(reassignment.target_replicas) <= set(leadership.leader_and_isr.isr)

    def _update_current_reassignment(self, partition: TopicPartition, reassignment: ReplicaAssignment) -> Outcome:
        context = self._context
        outcome = Outcome()
        current = context.partition_full_replica_assignment(partition)
        if current == reassignment:
            return outcome
        outcome.apply(context, PartitionAssignmentChanged(partition, reassignment))
        outcome.effects.append(UpdateTopicAssignment(partition.topic, context.topic_assignment(partition.topic)))
        unneeded = [r for r in current.replicas if r not in reassignment.replicas]
        if unneeded:
            outcome.extend(self._stop_removed_replicas(partition, unneeded))
        return outcome

    def _update_leader_epoch_and_send(self, partition: TopicPartition, reassignment: ReplicaAssignment) -> Outcome:
        """A new leader epoch (same leader and ISR) announced to every replica of `reassignment`."""
        context = self._context
        outcome = Outcome()
        leadership = context.partition_leadership(partition)
        if leadership is None or leadership.controller_epoch > context.epoch:
            error = StateChangeFailed(
                f"Failed to send LeaderAndIsr request with new assigned replica list "
                f"{list(reassignment.replicas)} to leader of {partition}: its leadership is "
                + ("unknown" if leadership is None else "written by a newer controller")
            )
            logger.error("%s", error)
            outcome.failures.append((partition, error))
            return outcome
        current = leadership.leader_and_isr
        updated = current.new_epoch().with_zk_version(current.zk_version + 1)
        outcome.effects.append(
            UpdatePartitionState(partition, updated, context.epoch, context.epoch_zk_version, current.zk_version)
        )
        new_leadership = LeaderIsrAndControllerEpoch(updated, context.epoch)
        outcome.apply(context, PartitionLeadershipChanged(partition, new_leadership))
        batch = RequestBatch(context)
        batch.add_leader_and_isr(reassignment.replicas, partition, new_leadership, reassignment, is_new=False)
        outcome.effects.extend(batch.build())
        return outcome

    def _start_new_replicas(self, partition: TopicPartition, adding: Iterable[int]) -> Outcome:
        context = self._context
        new = [
            replica
            for replica in (PartitionAndReplica(partition, r) for r in adding)
            if context.replica_state(replica) == ReplicaState.NON_EXISTENT_REPLICA
        ]
        return self._rsm.handle_state_changes(new, ReplicaState.NEW_REPLICA)

    def _move_leader_if_required(self, partition: TopicPartition, completed: ReplicaAssignment) -> Outcome:
        context = self._context
        leadership = context.partition_leadership(partition)
        leader = None if leadership is None else leadership.leader_and_isr.leader
        online = leader is not None and context.is_replica_online(leader, partition=partition)
        if leader in completed.replicas and online:
            return self._update_leader_epoch_and_send(partition, completed)
        if context.partition_state(partition) not in (
            PartitionState.ONLINE_PARTITION,
            PartitionState.OFFLINE_PARTITION,
        ):
            return Outcome()
        return self._psm.handle_state_changes(
            [partition], PartitionState.ONLINE_PARTITION, ReassignPartitionLeaderElectionStrategy()
        )

    def _stop_removed_replicas(self, partition: TopicPartition, removing: Iterable[int]) -> Outcome:
        replicas = [PartitionAndReplica(partition, r) for r in removing]
        rsm = self._rsm
        outcome = rsm.handle_state_changes(replicas, ReplicaState.OFFLINE_REPLICA)
        outcome.extend(rsm.handle_state_changes(replicas, ReplicaState.REPLICA_DELETION_STARTED))
        outcome.extend(rsm.handle_state_changes(replicas, ReplicaState.REPLICA_DELETION_SUCCESSFUL))
        return outcome.extend(rsm.handle_state_changes(replicas, ReplicaState.NON_EXISTENT_REPLICA))
