"""The partition state machine (Kafka 2.8's ZkPartitionStateMachine, decisions only).

    NonExistent -> New             record the state
    New -> Online                  leader = first live replica of the assignment, ISR = live
                                   replicas (leader epoch 0); create the state znode; LeaderAndIsr
                                   (is_new) to the ISR, UpdateMetadata to every live broker. With
                                   no live replica the partition stays New and the change fails.
    Online/Offline -> Online       elect with the given strategy; set the state znode
                                   (conditional on its version); LeaderAndIsr to the strategy's
                                   recipients, UpdateMetadata to every live broker. A failed
                                   election leaves the state as it was.
    New/Online/Offline -> Offline  record the state
    Offline -> NonExistent         record the state

An invalid transition is logged and skipped. Each partition's change is logged at DEBUG (a line per
partition costs seconds at thousands of partitions); each call logs one INFO summary. Leadership
is read from the context (which the controller keeps in step with the state znodes); one written
by a newer controller epoch aborts that partition's change.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from services.common.topic_partition import TopicPartition
from services.controller.state.config import ControllerConfig
from services.controller.state.context import ControllerContext
from services.controller.state.effects import (
    CreatePartitionState,
    PartitionStateChangeOutcome,
    StateChangeFailed,
    UpdatePartitionState,
)
from services.controller.state.election import (
    ElectionStrategy,
    OfflinePartitionLeaderElectionStrategy,
    elect_leader,
    strategy_name,
)
from services.controller.state.model import LeaderAndIsr, LeaderIsrAndControllerEpoch
from services.controller.state.records import PartitionLeadershipChanged, PartitionStateChanged
from services.controller.state.request_batch import RequestBatch
from services.controller.state.states import PartitionState

logger = logging.getLogger(__name__)

NEW = PartitionState.NEW_PARTITION
ONLINE = PartitionState.ONLINE_PARTITION
OFFLINE = PartitionState.OFFLINE_PARTITION
NON_EXISTENT = PartitionState.NON_EXISTENT_PARTITION


class PartitionStateMachine:
    def __init__(self, context: ControllerContext, config: ControllerConfig, controller_id: int = -1) -> None:
        self._context = context
        self._config = config
        self._controller_id = controller_id

    def startup(self) -> PartitionStateChangeOutcome:
        """On failover: set every partition's state from its leadership, then bring New and
        Offline partitions online."""
        outcome = PartitionStateChangeOutcome()
        context = self._context
        for partition in context.all_partitions():
            leadership = context.partition_leadership(partition)
            if leadership is None:
                state = NEW
            elif context.is_replica_online(leadership.leader_and_isr.leader, partition=partition):
                state = ONLINE
            else:
                state = OFFLINE
            outcome.apply(context, PartitionStateChanged(partition, state))
        return outcome.extend(self.trigger_online_partition_state_change())

    def trigger_online_partition_state_change(self, topic: str | None = None) -> PartitionStateChangeOutcome:
        """Try to bring every New or Offline partition (of `topic`, or all) online with the offline
        strategy, skipping topics queued for deletion."""
        candidates = self._context.partitions_in_states({OFFLINE, NEW}, topic)
        partitions = [p for p in candidates if not self._context.is_topic_queued_for_deletion(p.topic)]
        return self.handle_state_changes(partitions, ONLINE, OfflinePartitionLeaderElectionStrategy(False))

    def handle_state_changes(
        self,
        partitions: Iterable[TopicPartition],
        target_state: PartitionState,
        strategy: ElectionStrategy | None = None,
    ) -> PartitionStateChangeOutcome:
        partitions = list(partitions)
        outcome = PartitionStateChangeOutcome()
        if not partitions:
            return outcome
        context = self._context
        valid = []
        for partition in partitions:
            if target_state.can_follow(context.partition_state(partition)):
                valid.append(partition)
            else:
                outcome.invalid.append(partition)
                self._log_invalid_transition(outcome, partition, target_state)
        batch = RequestBatch(context)
        if target_state == ONLINE:
            uninitialized = [p for p in valid if context.partition_state(p) == NEW]
            to_elect = [p for p in valid if context.partition_state(p) in (OFFLINE, ONLINE)]
            if to_elect and strategy is None:
                raise ValueError("an election strategy is required to move partitions to OnlinePartition")
            self._initialize_leader_and_isr(uninitialized, outcome, batch)
            if to_elect:
                assert strategy is not None
                self._elect_leaders(to_elect, strategy, outcome, batch)
        else:
            for partition in valid:
                self._log_change(partition, target_state)
                outcome.apply(context, PartitionStateChanged(partition, target_state))
        outcome.effects.extend(batch.build())
        failed = len(outcome.failures)
        logger.info(
            "Moved %d of %d partitions to %s (%d failed), e.g. %s",
            len(valid) - failed,
            len(partitions),
            target_state,
            failed,
            partitions[0],
        )
        return outcome

    def _initialize_leader_and_isr(
        self, partitions: list[TopicPartition], outcome: PartitionStateChangeOutcome, batch: RequestBatch
    ) -> None:
        context = self._context
        for partition in partitions:
            assignment = context.partition_full_replica_assignment(partition)
            live = [r for r in assignment.replicas if context.is_replica_online(r, partition=partition)]
            if not live:
                error = StateChangeFailed(
                    f"Controller {self._controller_id} epoch {context.epoch} encountered error during "
                    f"state change of partition {partition} from New to Online, assigned replicas are "
                    f"[{','.join(map(str, assignment.replicas))}], live brokers are "
                    f"[{','.join(map(str, sorted(context.live_broker_ids)))}]. No assigned replica is alive."
                )
                self._fail(outcome, partition, NEW, ONLINE, error)
                continue
            leader_and_isr = LeaderAndIsr.initial(live[0], live)
            leadership = LeaderIsrAndControllerEpoch(leader_and_isr, context.epoch)
            outcome.effects.append(
                CreatePartitionState(partition, leader_and_isr, context.epoch, context.epoch_zk_version)
            )
            outcome.apply(context, PartitionLeadershipChanged(partition, leadership))
            batch.add_leader_and_isr(leader_and_isr.isr, partition, leadership, assignment, is_new=True)
            self._log_change(partition, ONLINE, leader_and_isr)
            outcome.apply(context, PartitionStateChanged(partition, ONLINE))
            outcome.results[partition] = leader_and_isr

    def _elect_leaders(
        self,
        partitions: list[TopicPartition],
        strategy: ElectionStrategy,
        outcome: PartitionStateChangeOutcome,
        batch: RequestBatch,
    ) -> None:
        context = self._context
        for partition in partitions:
            current_state = context.partition_state(partition)
            leadership = context.partition_leadership(partition)
            if leadership is None:
                error = StateChangeFailed(
                    f"LeaderAndIsr information doesn't exist for partition {partition} "
                    f"in {current_state} state"
                )
            elif leadership.controller_epoch > context.epoch:
                error = StateChangeFailed(
                    f"Aborted leader election for partition {partition} since the LeaderAndIsr path was "
                    f"already written by another controller. This probably means that the current "
                    f"controller {self._controller_id} went through a soft failure and another controller "
                    f"was elected with epoch {leadership.controller_epoch}."
                )
            else:
                current = leadership.leader_and_isr
                result = elect_leader(
                    context, partition, current, strategy, self._config.unclean_leader_election_enable
                )
                if result.leader_and_isr is not None:
                    self._write_election(
                        partition, current, result.leader_and_isr, result.recipients, outcome, batch
                    )
                    if result.unclean:
                        logger.warning(
                            "Unclean leader election for partition %s: %s", partition, result.leader_and_isr
                        )
                    continue
                error = StateChangeFailed(
                    f"Failed to elect leader for partition {partition} "
                    f"under strategy {strategy_name(strategy)}"
                )
            self._fail(outcome, partition, current_state, ONLINE, error)

    def _write_election(
        self,
        partition: TopicPartition,
        current: LeaderAndIsr,
        elected: LeaderAndIsr,
        recipients: tuple[int, ...],
        outcome: PartitionStateChangeOutcome,
        batch: RequestBatch,
    ) -> None:
        context = self._context
        written = elected.with_zk_version(current.zk_version + 1)
        outcome.effects.append(
            UpdatePartitionState(
                partition, written, context.epoch, context.epoch_zk_version, current.zk_version
            )
        )
        leadership = LeaderIsrAndControllerEpoch(written, context.epoch)
        outcome.apply(context, PartitionLeadershipChanged(partition, leadership))
        assignment = context.partition_full_replica_assignment(partition)
        batch.add_leader_and_isr(recipients, partition, leadership, assignment, is_new=False)
        self._log_change(partition, ONLINE, written)
        outcome.apply(context, PartitionStateChanged(partition, ONLINE))
        outcome.results[partition] = written

    # -----------------------------------------------------------------------------------------
    # state change log

    def _log_change(
        self, partition: TopicPartition, target: PartitionState, leader_and_isr: LeaderAndIsr | None = None
    ) -> None:
        current = self._context.partition_state(partition)
        suffix = f" with state {leader_and_isr}" if leader_and_isr is not None else ""
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("Changed partition %s from %s to %s%s", partition, current, target, suffix)

    def _log_invalid_transition(
        self, outcome: PartitionStateChangeOutcome, partition: TopicPartition, target: PartitionState
    ) -> None:
        current = self._context.partition_state(partition)
        allowed = ",".join(sorted(str(s) for s in target.valid_previous_states))
        error = StateChangeFailed(
            f"Partition {partition} should be in one of {allowed} states before moving to {target} state. "
            f"Instead it is in {current} state"
        )
        self._fail(outcome, partition, current, target, error, is_result=False)

    def _fail(
        self,
        outcome: PartitionStateChangeOutcome,
        partition: TopicPartition,
        current: PartitionState,
        target: PartitionState,
        error: StateChangeFailed,
        is_result: bool = True,
    ) -> None:
        outcome.failures.append((partition, error))
        if is_result:
            outcome.results[partition] = error
        logger.error(
            "Controller %s epoch %s failed to change state for partition %s from %s to %s: %s",
            self._controller_id,
            self._context.epoch,
            partition,
            current,
            target,
            error,
        )
