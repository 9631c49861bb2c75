"""The replica state machine (Kafka 2.8's ZkReplicaStateMachine, decisions only).

    NonExistent -> New              LeaderAndIsr (is_new) with the current leadership to the
                                    replica; refused if the replica is the partition's leader
    New -> Online                   add the replica to the assignment if missing
    Online/Offline/Ineligible -> Online
                                    LeaderAndIsr with the current leadership to the replica
    New/Online/Offline/Ineligible -> Offline
                                    StopReplica (keep the log) to the replica; take it out of the
                                    ISR (a new leader epoch; no leader if it led; an ISR of one is
                                    kept) with a conditional state znode write; LeaderAndIsr to the
                                    other replicas unless the topic is being deleted. Already out
                                    of the ISR (a partition just re-elected without it): no write
                                    and no second LeaderAndIsr at the same leader epoch, only
                                    UpdateMetadata. Without leadership: UpdateMetadata to every
                                    broker.
    Offline -> DeletionStarted      StopReplica with delete_partition to the replica
    DeletionStarted -> DeletionSuccessful, Offline/DeletionStarted -> DeletionIneligible
                                    record the state
    DeletionSuccessful -> NonExistent
                                    drop the replica from the assignment and forget its state

Invalid transitions are logged and skipped. Replicas are handled broker by broker; a replica's
change is logged at DEBUG, each call logs one INFO summary.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable

from services.common.shared_types import NO_LEADER
from services.controller.state.context import ControllerContext
from services.controller.state.effects import Outcome, StateChangeFailed, UpdatePartitionState
from services.controller.state.model import LeaderIsrAndControllerEpoch, PartitionAndReplica
from services.controller.state.records import (
    PartitionAssignmentChanged,
    PartitionLeadershipChanged,
    ReplicaStateChanged,
    ReplicaStateRemoved,
)
from services.controller.state.request_batch import RequestBatch
from services.controller.state.states import ReplicaState

logger = logging.getLogger(__name__)

NEW = ReplicaState.NEW_REPLICA
ONLINE = ReplicaState.ONLINE_REPLICA
OFFLINE = ReplicaState.OFFLINE_REPLICA
DELETION_STARTED = ReplicaState.REPLICA_DELETION_STARTED
DELETION_SUCCESSFUL = ReplicaState.REPLICA_DELETION_SUCCESSFUL
DELETION_INELIGIBLE = ReplicaState.REPLICA_DELETION_INELIGIBLE
NON_EXISTENT = ReplicaState.NON_EXISTENT_REPLICA


class ReplicaStateMachine:
    def __init__(self, context: ControllerContext, controller_id: int = -1) -> None:
        self._context = context
        self._controller_id = controller_id

    def startup(self) -> Outcome:
        """On failover: replicas on live brokers are Online, others DeletionIneligible; then move
        them to Online and Offline (announcing the leadership to each)."""
        outcome = Outcome()
        context = self._context
        for replica in context.replicas_for_partitions(context.all_partitions()):
            online = context.is_replica_online(replica.replica, partition=replica.partition)
            state = ONLINE if online else DELETION_INELIGIBLE
            outcome.apply(context, ReplicaStateChanged(replica, state))
        online, offline = context.online_and_offline_replicas()
        outcome.extend(self.handle_state_changes(online, ONLINE))
        return outcome.extend(self.handle_state_changes(offline, OFFLINE))

    def handle_state_changes(
        self, replicas: Iterable[PartitionAndReplica], target_state: ReplicaState
    ) -> Outcome:
        outcome = Outcome()
        replicas = list(replicas)
        if not replicas:
            return outcome
        batch = RequestBatch(self._context)
        by_broker = itertools.groupby(sorted(replicas, key=lambda r: r.replica), key=lambda r: r.replica)
        for broker_id, group in by_broker:
            self._handle_for_broker(broker_id, list(group), target_state, outcome, batch)
        outcome.effects.extend(batch.build())
        logger.info(
            "Moved %d of %d replicas to %s (%d failed), e.g. %s",
            len(replicas) - len(outcome.failures),
            len(replicas),
            target_state,
            len(outcome.failures),
            replicas[0],
        )
        return outcome

    def _handle_for_broker(
        self,
        broker_id: int,
        replicas: list[PartitionAndReplica],
        target: ReplicaState,
        outcome: Outcome,
        batch: RequestBatch,
    ) -> None:
        context = self._context
        for replica in replicas:
            if not context.has_replica_state(replica):
                outcome.apply(context, ReplicaStateChanged(replica, NON_EXISTENT))
        valid = []
        for replica in replicas:
            if target.can_follow(context.replica_state(replica)):
                valid.append(replica)
            else:
                allowed = ",".join(sorted(str(s) for s in target.valid_previous_states))
                self._fail(
                    outcome,
                    replica,
                    target,
                    f"Replica {replica} should be in the {allowed} states before moving to {target} state. "
                    f"Instead it is in {context.replica_state(replica)} state",
                )
        if target == NEW:
            self._to_new(broker_id, valid, outcome, batch)
        elif target == ONLINE:
            self._to_online(broker_id, valid, outcome, batch)
        elif target == OFFLINE:
            self._to_offline(broker_id, valid, outcome, batch)
        elif target == NON_EXISTENT:
            for replica in valid:
                assignment = context.partition_full_replica_assignment(replica.partition)
                outcome.apply(
                    context,
                    PartitionAssignmentChanged(replica.partition, assignment.remove_replica(broker_id)),
                )
                outcome.apply(context, ReplicaStateRemoved(replica))
        else:
            for replica in valid:
                outcome.apply(context, ReplicaStateChanged(replica, target))
                if target == DELETION_STARTED:
                    batch.add_stop_replica([broker_id], replica.partition, delete_partition=True)

    def _to_new(
        self, broker_id: int, replicas: list[PartitionAndReplica], outcome: Outcome, batch: RequestBatch
    ) -> None:
        context = self._context
        for replica in replicas:
            leadership = context.partition_leadership(replica.partition)
            if leadership is not None:
                if leadership.leader_and_isr.leader == broker_id:
                    self._fail(
                        outcome,
                        replica,
                        NEW,
                        f"Replica {broker_id} for partition {replica.partition} cannot be moved to "
                        "NewReplica state as it is being requested to become leader",
                    )
                    continue
                assignment = context.partition_full_replica_assignment(replica.partition)
                batch.add_leader_and_isr([broker_id], replica.partition, leadership, assignment, is_new=True)
            outcome.apply(context, ReplicaStateChanged(replica, NEW))

    def _to_online(
        self, broker_id: int, replicas: list[PartitionAndReplica], outcome: Outcome, batch: RequestBatch
    ) -> None:
        context = self._context
        for replica in replicas:
            partition = replica.partition
            assignment = context.partition_full_replica_assignment(partition)
            if context.replica_state(replica) == NEW:
                if broker_id not in assignment.replicas:
                    logger.error(
                        "Adding replica (%s) that is not part of the assignment %s", broker_id, assignment
                    )
                    outcome.apply(
                        context, PartitionAssignmentChanged(partition, assignment.add_replica(broker_id))
                    )
            else:
                leadership = context.partition_leadership(partition)
                if leadership is not None:
                    batch.add_leader_and_isr([broker_id], partition, leadership, assignment, is_new=False)
            outcome.apply(context, ReplicaStateChanged(replica, ONLINE))

    def _to_offline(
        self, broker_id: int, replicas: list[PartitionAndReplica], outcome: Outcome, batch: RequestBatch
    ) -> None:
        context = self._context
        for replica in replicas:
            batch.add_stop_replica([broker_id], replica.partition, delete_partition=False)
        for replica in replicas:
            partition = replica.partition
            leadership = context.partition_leadership(partition)
            if leadership is None:
                batch.add_update_metadata(context.live_or_shutting_down_broker_ids, [partition])
                outcome.apply(context, ReplicaStateChanged(replica, OFFLINE))
                continue
            if leadership.controller_epoch > context.epoch:
                self._fail(
                    outcome,
                    replica,
                    OFFLINE,
                    "Leader and isr path written by another controller. This probably means the "
                    f"current controller with epoch {context.epoch} went through a soft failure and "
                    f"another controller was elected with epoch {leadership.controller_epoch}. "
                    "Aborting state change by this controller",
                )
                continue
            current = leadership.leader_and_isr
            if broker_id not in current.isr:
                # the ISR is already without it (the partition was re-elected without it, or it
                # had fallen out): the other replicas hold this leader epoch, and would refuse it
                # again as stale; only the metadata changes, the replica now being offline
                batch.add_update_metadata(context.live_or_shutting_down_broker_ids, [partition])
                outcome.apply(context, ReplicaStateChanged(replica, OFFLINE))
                continue
            new_leader = NO_LEADER if current.leader == broker_id else current.leader
            new_isr = current.isr if len(current.isr) == 1 else tuple(r for r in current.isr if r != broker_id)
            updated = current.new_leader_and_isr(new_leader, new_isr).with_zk_version(current.zk_version + 1)
            outcome.effects.append(
                UpdatePartitionState(partition, updated, context.epoch, context.epoch_zk_version, current.zk_version)
            )
            new_leadership = LeaderIsrAndControllerEpoch(updated, context.epoch)
            outcome.apply(context, PartitionLeadershipChanged(partition, new_leadership))
            if logger.isEnabledFor(logging.DEBUG):
                logger.debug(
                    "Partition %s state changed to %s after removing replica %s from the ISR as part of "
                    "transition to OfflineReplica",
                    partition,
                    updated,
                    broker_id,
                )
            if not context.is_topic_queued_for_deletion(partition.topic):
                assignment = context.partition_full_replica_assignment(partition)
                recipients = [r for r in assignment.replicas if r != broker_id]
                batch.add_leader_and_isr(recipients, partition, new_leadership, assignment, is_new=False)
            outcome.apply(context, ReplicaStateChanged(replica, OFFLINE))

    def _fail(
        self, outcome: Outcome, replica: PartitionAndReplica, target: ReplicaState, message: str
    ) -> None:
        error = StateChangeFailed(message)
        current = self._context.replica_state(replica)
        outcome.failures.append((replica, error))
        logger.error(
            "Controller %s epoch %s initiated state change of replica %s for partition %s "
            "from %s to %s failed: %s",
            self._controller_id,
            self._context.epoch,
            replica.replica,
            replica.partition,
            current,
            target,
            error,
        )
