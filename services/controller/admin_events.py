"""`AdminEventHandlers`: requests that callers wait for (CreateTopics, DeleteTopics,
CreatePartitions, ControlledShutdown, AlterIsr, leader elections, partition reassignments) and
the periodic leader imbalance check, on the event thread. It extends `ClusterEventHandlers`, whose handlers of topic,
partition and deletion changes it runs right after its own writes.

Topic administration follows Kafka's plans (`state.topic_admin`): checks against the context,
then the ZooKeeper write, then (unlike Kafka, which waits for the watch) the resulting topic,
partition or deletion change is processed at once, so by the time the caller is answered new
partitions have leaders and deletions have started. Each callback gets the result, or a
`KafkaError` for the whole request.

Reassignments (`state.reassignment`) come from AlterPartitionReassignments and from
`/admin/reassign_partitions`; partitions of that znode the controller refuses are taken out of
it, and a partition already moving to the target it names is left alone (the znode's watch fires
again when the controller itself rewrites it).
"""

from __future__ import annotations

import logging
from typing import Any

from services.common.errors import Errors, KafkaError
from services.common.topic_partition import TopicPartition
from services.common.zk import ZnodeFormatError
from services.controller.cluster_events import ClusterEventHandlers
from services.controller.executor import Retry, sample
from services.controller.state.effects import Outcome, PartitionStateChangeOutcome, RemoveFromZkReassignment
from services.controller.state.election import (
    ControlledShutdownPartitionLeaderElectionStrategy,
    ElectionStrategy,
    OfflinePartitionLeaderElectionStrategy,
    PreferredReplicaPartitionLeaderElectionStrategy,
)
from services.controller.state.events import (
    AlterIsrReceived,
    ApiPartitionReassignment,
    AutoPreferredReplicaLeaderElection,
    ControlledShutdown,
    CreatePartitions,
    CreateTopics,
    DeleteTopics,
    ElectionTrigger,
    ElectionType,
    ListPartitionReassignments,
    PartitionModifications,
    ReplicaLeaderElection,
    TopicChange,
    TopicDeletion,
    ZkPartitionReassignment,
)
from services.controller.state.isr_changes import AlterIsrOutcome
from services.controller.state.model import LeaderAndIsr, PartitionAndReplica
from services.controller.state.states import PartitionState, ReplicaState
from services.controller.state.topic_admin import (
    PartitionCreation,
    TopicCreation,
    plan_partition_creations,
    plan_topic_creations,
    plan_topic_deletions,
)

logger = logging.getLogger(__name__)

AUTO_REBALANCE_KEY = "auto-leader-rebalance"
FIRST_REBALANCE_DELAY_S = 5.0


class AdminEventHandlers(ClusterEventHandlers):
    # --- topics ------------------------------------------------------------------------------

    def _on_create_topics(self, event: CreateTopics) -> None:
        results: dict[str, TopicCreation | KafkaError] = plan_topic_creations(
            event.topics, self.context, self.config
        )
        self._check_sizes(results)
        if not event.validate_only:
            created = []
            for name, plan in results.items():
                if isinstance(plan, TopicCreation):
                    try:
                        self.executor.create_topic(plan.effect())
                        created.append(name)
                    except KafkaError as e:
                        results[name] = e
            if created:
                logger.info("Created topics %s", created)
                self._on_topic_change(TopicChange())
        self._answer(event, results)

    def _check_sizes(self, plans: dict[str, Any]) -> None:
        """Plans whose znodes would be too large for ZooKeeper become INVALID_REQUEST."""
        for name, plan in plans.items():
            if isinstance(plan, TopicCreation | PartitionCreation):
                try:
                    self.executor.check_topic_size(plan.effect())
                except KafkaError as e:
                    plans[name] = e

    def _on_delete_topics(self, event: DeleteTopics) -> None:
        results: dict[str, None | KafkaError] = {}
        marked = False
        for topic, plan in plan_topic_deletions(event.topics, self.context, self.config).items():
            if isinstance(plan, KafkaError):
                results[topic] = plan
                continue
            self.zk.request_topic_deletion(topic)
            results[topic] = None
            marked = True
        if marked:
            self._on_topic_deletion(TopicDeletion())
        self._answer(event, results)

    def _on_create_partitions(self, event: CreatePartitions) -> None:
        results: dict[str, PartitionCreation | KafkaError] = plan_partition_creations(
            event.topics, self.context
        )
        self._check_sizes(results)
        if not event.validate_only:
            for name, plan in results.items():
                if not isinstance(plan, PartitionCreation):
                    continue
                try:
                    self.executor.update_topic_assignment(plan.effect())
                except KafkaError as e:
                    results[name] = e
                    continue
                logger.info("Added partitions %s to topic %s", sorted(plan.new_assignment), name)
                self._on_partition_modifications(PartitionModifications(name))
        self._answer(event, results)

    # --- brokers and ISRs --------------------------------------------------------------------

    def _on_controlled_shutdown(self, event: ControlledShutdown) -> None:
        try:
            outcome = self.core.on_controlled_shutdown(event.broker_id, event.broker_epoch)
        except KafkaError as e:
            self._answer(event, e)
            return
        self._execute(outcome, self._controlled_shutdown_retry(event.broker_id))
        remaining = self.context.partition_leaders_on_broker(event.broker_id)
        logger.info("Controlled shutdown of broker %d: %d partitions remain", event.broker_id, len(remaining))
        self._answer(event, remaining)

    def _controlled_shutdown_retry(self, broker_id: int) -> Retry:
        def retry(partitions: list[TopicPartition]) -> Outcome:
            led, followed = [], []
            for partition in partitions:
                leadership = self.context.partition_leadership(partition)
                if leadership is None:
                    continue
                (led if leadership.leader_and_isr.leader == broker_id else followed).append(partition)
            outcome = Outcome().extend(
                self.core.partition_state_machine.handle_state_changes(
                    led, PartitionState.ONLINE_PARTITION, ControlledShutdownPartitionLeaderElectionStrategy()
                )
            )
            replicas = [PartitionAndReplica(p, broker_id) for p in followed]
            return outcome.extend(
                self.core.replica_state_machine.handle_state_changes(replicas, ReplicaState.OFFLINE_REPLICA)
            )

        return retry

    def _on_alter_isr(self, event: AlterIsrReceived) -> None:
        try:
            outcome = self.core.on_alter_isr(event.broker_id, event.broker_epoch, event.isrs_to_alter)
        except KafkaError as e:
            self._answer(event, e)
            return

        def retry(partitions: list[TopicPartition]) -> Outcome:
            requested = {p: event.isrs_to_alter[p] for p in partitions if p in event.isrs_to_alter}
            try:
                return self.core.on_alter_isr(event.broker_id, event.broker_epoch, requested)
            except KafkaError as e:
                return AlterIsrOutcome(results=dict.fromkeys(partitions, e))

        execution = self._execute(outcome, retry)
        results: dict[TopicPartition, LeaderAndIsr | KafkaError] = dict(outcome.results)
        for later in execution.retries:
            if isinstance(later, AlterIsrOutcome):
                results.update(later.results)
        for partition in execution.missing:
            results[partition] = KafkaError(error=Errors.UNKNOWN_TOPIC_OR_PARTITION)
        for partition in execution.conflicted:
            results[partition] = KafkaError(error=Errors.INVALID_UPDATE_VERSION)
        self._answer(event, results)

    # --- reassignments -----------------------------------------------------------------------

    def _on_api_partition_reassignment(self, event: ApiPartitionReassignment) -> None:
        outcome, results = self.core.on_alter_partition_reassignments(
            event.reassignments, fits=self.executor.topic_fits
        )
        self._execute(outcome, self._reassignment_retry)
        self._answer(event, results)

    def _on_zk_partition_reassignment(self, _event: ZkPartitionReassignment) -> None:
        """Kafka's processZkPartitionReassignment."""
        try:
            requested = self.reader.partition_reassignment()
        except ZnodeFormatError as e:
            logger.error("Ignoring /admin/reassign_partitions: %s", e)
            self.zk.delete_partition_reassignment(epoch_zk_version=self.context.epoch_zk_version)
            return
        if not requested:
            return
        context = self.context
        new = {}
        for partition, target in requested.items():
            current = context.partition_full_replica_assignment(partition)
            if not (current.is_being_reassigned and list(current.target_replicas) == target):
                new[partition] = tuple(target)
        if not new:
            return
        outcome, results = self.core.on_alter_partition_reassignments(new, from_zk=True, fits=self.executor.topic_fits)
        refused = sorted(p for p, e in results.items() if e is not None)
        for partition in refused:
            logger.warning(
                "Refused the reassignment of %s in /admin/reassign_partitions: %s", partition, results[partition]
            )
        if refused:
            outcome.effects.append(
                RemoveFromZkReassignment(tuple((p, None) for p in refused), context.epoch_zk_version)
            )
        self._execute(outcome, self._reassignment_retry)

    def _reassignment_retry(self, partitions: list[TopicPartition]) -> Outcome:
        """Announce again the reassignments of partitions whose state znode write conflicted."""
        return self.core.reassigner.restart(partitions)

    def _on_list_partition_reassignments(self, event: ListPartitionReassignments) -> None:
        self._answer(event, self.core.list_partition_reassignments(event.partitions))

    # --- leader elections --------------------------------------------------------------------

    def _on_replica_leader_election(self, event: ReplicaLeaderElection) -> None:
        """Elect for `event.partitions`; None means those of `/admin/preferred_replica_election`
        when ZooKeeper triggered the event, and every partition when an admin asked."""
        partitions = event.partitions
        from_znode = partitions is None and event.trigger == ElectionTrigger.ZK_TRIGGERED
        if from_znode:
            requested = self.reader.preferred_replica_election()
            if requested is None:
                return
            partitions = frozenset(requested)
        elif partitions is None:
            partitions = frozenset(self.context.all_partitions())
        outcome = self.core.on_elect_leaders(partitions, event.election_type, event.trigger)
        strategy, failure = _election_strategy(event.election_type, event.trigger)
        execution = self._execute(outcome, self._election_retry(strategy))
        leaders: dict[TopicPartition, int | KafkaError] = dict(outcome.leaders)
        for later in execution.retries:
            if isinstance(later, PartitionStateChangeOutcome):
                for partition, result in later.results.items():
                    leaders[partition] = (
                        result.leader
                        if isinstance(result, LeaderAndIsr)
                        else KafkaError(str(result), error=failure)
                    )
        for partition in execution.missing | execution.conflicted:
            leaders[partition] = KafkaError(f"Could not elect a leader for {partition}", error=failure)
        if from_znode:
            self.zk.delete_preferred_replica_election(epoch_zk_version=self.context.epoch_zk_version)
        self._answer(event, leaders)

    def _on_auto_rebalance(self, _event: AutoPreferredReplicaLeaderElection) -> None:
        """Kafka's checkAndTriggerAutoLeaderRebalance, then the next check is scheduled."""
        if not self.config.auto_leader_rebalance_enable:
            return
        try:
            outcome = self.core.on_auto_leader_rebalance()
            moved = outcome.successes() if isinstance(outcome, PartitionStateChangeOutcome) else {}
            if moved:
                logger.info(
                    "Moved leadership of %d partitions back to preferred replicas: %s", len(moved), sample(moved)
                )
            self._execute(outcome, self._election_retry(PreferredReplicaPartitionLeaderElectionStrategy()))
        finally:
            self._schedule_auto_rebalance(self.config.leader_imbalance_check_interval_seconds)

    def _schedule_auto_rebalance(self, delay_s: float) -> None:
        if self.config.auto_leader_rebalance_enable:
            self.scheduler.schedule(AUTO_REBALANCE_KEY, delay_s, AutoPreferredReplicaLeaderElection())


def _election_strategy(election_type: ElectionType, trigger: ElectionTrigger) -> tuple[ElectionStrategy, Errors]:
    """The strategy the core used for an election request, and its failure's error name."""
    if election_type == ElectionType.PREFERRED:
        return PreferredReplicaPartitionLeaderElectionStrategy(), Errors.PREFERRED_LEADER_NOT_AVAILABLE
    allow_unclean = trigger == ElectionTrigger.ADMIN_CLIENT_TRIGGERED
    return OfflinePartitionLeaderElectionStrategy(allow_unclean), Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE
