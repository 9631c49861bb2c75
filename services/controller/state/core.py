"""`ControllerCore`: the active controller's reactions to cluster changes (Kafka 2.8's
KafkaController), over one context, both state machines and the topic deletion manager.

The controller service reads ZooKeeper, hands what it read to one of these methods from its
event thread, and carries out the returned effects:

    on_controller_failover(snapshot)   load the cluster and start both state machines
    on_controller_resignation()        forget everything
    on_broker_change(registered)       new, bounced and dead brokers
    on_broker_modification(broker)     changed endpoints or rack
    on_broker_log_dir_failure(ids)     see log_dir_failure
    on_leader_and_isr_response(id, e)  see log_dir_failure
    on_topic_change(topics, new)       topics created or gone
    on_partition_modifications(t, a)   partitions added to a topic
    on_topic_deletion(marked)          topics marked in /admin/delete_topics
    on_topic_config_change(t, c)       a topic's overrides (unclean election enabled)
    on_stop_replica_deletion_response  a broker deleted (or failed to delete) replicas
    on_controlled_shutdown(id, epoch)  see controlled_shutdown
    on_auto_leader_rebalance()         see leader_balance
    on_elect_leaders(...)              see leader_balance
    on_alter_isr / on_isr_change_notification   see isr_changes (a reassignment whose target
                                       replicas joined the ISR completes)
    on_alter_partition_reassignments   see reassignment (also for `/admin/reassign_partitions`)
    list_partition_reassignments       partitions being reassigned, with their replicas

A new controller resumes every reassignment recorded in the topics' assignments; a broker that
starts again resumes those with a target replica on it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from services.common.errors import Errors, KafkaError
from services.common.shared_types import BrokerInfo, ReplicaAssignment
from services.common.topic_partition import TopicPartition
from services.controller.state import log_dir_failure
from services.controller.state.config import ControllerConfig
from services.controller.state.context import ControllerContext
from services.controller.state.controlled_shutdown import ControlledShutdownOutcome, controlled_shutdown
from services.controller.state.effects import DeleteTopicDeletionMarkers, Outcome, UpdateTopicAssignment
from services.controller.state.election import OfflinePartitionLeaderElectionStrategy
from services.controller.state.events import ElectionTrigger, ElectionType
from services.controller.state.isr_changes import AlterIsrOutcome, alter_isr, isr_change_notification
from services.controller.state.leader_balance import ElectLeadersOutcome, auto_rebalance, elect_leaders
from services.controller.state.model import LeaderAndIsr, LeaderIsrAndControllerEpoch, PartitionAndReplica
from services.controller.state.partition_state_machine import PartitionStateMachine
from services.controller.state.reassignment import Fits, PartitionReassigner
from services.controller.state.records import (
    BrokersAdded,
    BrokersRemoved,
    BrokerUpdated,
    ContextReset,
    ControllerEpochChanged,
    LiveBrokersSet,
    PartitionAssignmentChanged,
    PartitionLeadershipChanged,
    Record,
    TopicAdded,
    TopicConfigChanged,
    TopicRemoved,
)
from services.controller.state.replica_state_machine import ReplicaStateMachine
from services.controller.state.request_batch import update_metadata_effects
from services.controller.state.states import PartitionState, ReplicaState
from services.controller.state.topic_deletion import TopicDeletionManager


@dataclass(frozen=True)
class TopicDescription:
    """A topic as read from `/brokers/topics/<t>` and `/config/topics/<t>`."""

    assignment: Mapping[int, ReplicaAssignment]
    topic_id: str | None = None
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ClusterSnapshot:
    """Everything a new controller reads from ZooKeeper before it starts."""

    epoch: int
    epoch_zk_version: int
    brokers: tuple[BrokerInfo, ...]
    topics: Mapping[str, TopicDescription]
    leaderships: Mapping[TopicPartition, LeaderIsrAndControllerEpoch]
    topics_to_be_deleted: frozenset[str] = frozenset()

    def records(self) -> list[Record]:
        records: list[Record] = [
            ContextReset(),
            ControllerEpochChanged(self.epoch, self.epoch_zk_version),
            LiveBrokersSet(self.brokers),
        ]
        for topic, description in sorted(self.topics.items()):
            records.append(TopicAdded(topic, description.topic_id))
            records.append(TopicConfigChanged.of(topic, description.configs))
            for partition_id, assignment in sorted(description.assignment.items()):
                records.append(PartitionAssignmentChanged(TopicPartition(topic, partition_id), assignment))
        for partition, leadership in sorted(self.leaderships.items()):
            records.append(PartitionLeadershipChanged(partition, leadership))
        return records


class ControllerCore:
    def __init__(self, config: ControllerConfig, controller_id: int = -1) -> None:
        self.config = config
        self.controller_id = controller_id
        self.context = ControllerContext()
        self.partition_state_machine = PartitionStateMachine(self.context, config, controller_id)
        self.replica_state_machine = ReplicaStateMachine(self.context, controller_id)
        self.topic_deletion_manager = TopicDeletionManager(
            self.context, config, self.partition_state_machine, self.replica_state_machine
        )
        self.reassigner = PartitionReassigner(
            self.context, self.partition_state_machine, self.replica_state_machine, self.topic_deletion_manager
        )

    # --- controllership -------------------------------------------------------------------

    def on_controller_failover(self, snapshot: ClusterSnapshot) -> Outcome:
        context = self.context
        outcome = Outcome()
        for record in snapshot.records():
            outcome.apply(context, record)
        offline_topics = {r.topic for r in context.online_and_offline_replicas()[1]}
        reassigning = {p.topic for p in self.reassigner.partitions_being_reassigned()}
        outcome.extend(self.topic_deletion_manager.init(snapshot.topics_to_be_deleted, offline_topics | reassigning))
        outcome.effects.extend(update_metadata_effects(context, context.live_or_shutting_down_broker_ids, []))
        outcome.extend(self.replica_state_machine.startup())
        outcome.extend(self.partition_state_machine.startup())
        outcome.extend(self.reassigner.resume())
        return outcome.extend(self.topic_deletion_manager.try_topic_deletion())

    def on_controller_resignation(self) -> Outcome:
        outcome = Outcome()
        outcome.apply(self.context, ContextReset())
        return outcome

    # --- brokers --------------------------------------------------------------------------

    def on_broker_change(self, registered: Iterable[BrokerInfo]) -> Outcome:
        context = self.context
        current = {b.broker_id: b for b in registered}
        known = context.live_or_shutting_down_broker_ids
        new = sorted(current.keys() - known)
        dead = sorted(known - current.keys())
        bounced = sorted(
            b for b in current.keys() & known if current[b].broker_epoch > context.broker_epoch(b)
        )
        outcome = Outcome()
        if new:
            outcome.apply(context, BrokersAdded(tuple(current[b] for b in new)))
            outcome.extend(self._on_broker_startup(new))
        if bounced:
            outcome.apply(context, BrokersRemoved(frozenset(bounced)))
            outcome.extend(self._on_broker_failure(bounced))
            outcome.apply(context, BrokersAdded(tuple(current[b] for b in bounced)))
            outcome.extend(self._on_broker_startup(bounced))
        if dead:
            outcome.apply(context, BrokersRemoved(frozenset(dead)))
            outcome.extend(self._on_broker_failure(dead))
        return outcome

    def on_broker_modification(self, broker: BrokerInfo) -> Outcome:
        outcome = Outcome()
        old = self.context.broker(broker.broker_id)
        if old is None or (old.endpoints, old.rack) == (broker.endpoints, broker.rack):
            return outcome
        outcome.apply(self.context, BrokerUpdated(broker))
        ids = self.context.live_or_shutting_down_broker_ids
        outcome.effects.extend(update_metadata_effects(self.context, ids, []))
        return outcome

    def _on_broker_startup(self, new_brokers: list[int]) -> Outcome:
        context = self.context
        outcome = Outcome()
        existing = context.live_or_shutting_down_broker_ids - set(new_brokers)
        outcome.effects.extend(update_metadata_effects(context, existing, []))
        outcome.effects.extend(
            update_metadata_effects(context, new_brokers, context.partitions_with_leaders())
        )
        replicas = context.replicas_on_brokers(new_brokers)
        outcome.extend(self.replica_state_machine.handle_state_changes(replicas, ReplicaState.ONLINE_REPLICA))
        outcome.extend(self.partition_state_machine.trigger_online_partition_state_change())
        # reassignments waiting for a target replica on these brokers go on
        started = set(new_brokers)
        outcome.extend(
            self.reassigner.restart(
                p
                for p in self.reassigner.partitions_being_reassigned()
                if started & set(context.partition_full_replica_assignment(p).target_replicas)
            )
        )
        deleting = {
            r.topic for r in replicas if self.topic_deletion_manager.is_topic_queued_for_deletion(r.topic)
        }
        if deleting:
            outcome.extend(self.topic_deletion_manager.resume_deletion_for_topics(deleting))
        return outcome

    def _on_broker_failure(self, dead_brokers: list[int]) -> Outcome:
        return self.on_replicas_become_offline(self.context.replicas_on_brokers(dead_brokers))

    def on_replicas_become_offline(self, replicas: Iterable[PartitionAndReplica]) -> Outcome:
        context = self.context
        deletion = self.topic_deletion_manager
        replicas = list(replicas)
        for_deletion = [r for r in replicas if deletion.is_topic_queued_for_deletion(r.topic)]
        others = [r for r in replicas if not deletion.is_topic_queued_for_deletion(r.topic)]
        offline_leader = context.partitions_with_offline_leader()
        psm = self.partition_state_machine
        outcome = Outcome().extend(psm.handle_state_changes(offline_leader, PartitionState.OFFLINE_PARTITION))
        outcome.extend(psm.trigger_online_partition_state_change())
        outcome.extend(self.replica_state_machine.handle_state_changes(others, ReplicaState.OFFLINE_REPLICA))
        if for_deletion:
            outcome.extend(deletion.fail_replica_deletion(for_deletion))
        if not offline_leader:
            outcome.effects.extend(
                update_metadata_effects(context, context.live_or_shutting_down_broker_ids, [])
            )
        return outcome

    def on_broker_log_dir_failure(self, broker_ids: Iterable[int]) -> Outcome:
        return log_dir_failure.on_broker_log_dir_failure(self.context, self.replica_state_machine, broker_ids)

    def on_leader_and_isr_response(self, broker_id: int, partition_errors: Mapping[TopicPartition, int]) -> Outcome:
        return log_dir_failure.on_storage_errors(
            self.context, broker_id, partition_errors, self.on_replicas_become_offline)

    # --- topics ---------------------------------------------------------------------------

    def on_topic_change(self, topics: Iterable[str], new_topics: Mapping[str, TopicDescription]) -> Outcome:
        """`topics`: every topic in ZooKeeper; `new_topics`: descriptions of those not yet known
        (`set(topics) - context.all_topics`)."""
        context = self.context
        current = set(topics)
        outcome = Outcome()
        for topic in sorted(context.all_topics - current):
            outcome.apply(context, TopicRemoved(topic))
        new_partitions: list[TopicPartition] = []
        for topic in sorted(current - context.all_topics):
            description = new_topics.get(topic, TopicDescription({}))
            outcome.apply(context, TopicAdded(topic, description.topic_id))
            if description.configs:
                outcome.apply(context, TopicConfigChanged.of(topic, description.configs))
            for partition_id, assignment in sorted(description.assignment.items()):
                partition = TopicPartition(topic, partition_id)
                outcome.apply(context, PartitionAssignmentChanged(partition, assignment))
                new_partitions.append(partition)
        return outcome.extend(self.on_new_partition_creation(new_partitions))

    def on_partition_modifications(self, topic: str, assignment: Mapping[int, ReplicaAssignment]) -> Outcome:
        context = self.context
        outcome = Outcome()
        to_add = {
            p: a
            for p, a in assignment.items()
            if not context.partition_replica_assignment(TopicPartition(topic, p))
        }
        if not to_add:
            return outcome
        if self.topic_deletion_manager.is_topic_queued_for_deletion(topic):
            outcome.effects.append(UpdateTopicAssignment(topic, context.topic_assignment(topic)))
            return outcome
        added = []
        for partition_id, replicas in sorted(to_add.items()):
            partition = TopicPartition(topic, partition_id)
            outcome.apply(context, PartitionAssignmentChanged(partition, replicas))
            added.append(partition)
        return outcome.extend(self.on_new_partition_creation(added))

    def on_new_partition_creation(self, partitions: list[TopicPartition]) -> Outcome:
        psm, rsm = self.partition_state_machine, self.replica_state_machine
        outcome = Outcome()
        if not partitions:
            return outcome
        outcome.extend(psm.handle_state_changes(partitions, PartitionState.NEW_PARTITION))
        replicas = self.context.replicas_for_partitions(partitions)
        outcome.extend(rsm.handle_state_changes(replicas, ReplicaState.NEW_REPLICA))
        strategy = OfflinePartitionLeaderElectionStrategy(False)
        outcome.extend(psm.handle_state_changes(partitions, PartitionState.ONLINE_PARTITION, strategy))
        return outcome.extend(rsm.handle_state_changes(replicas, ReplicaState.ONLINE_REPLICA))

    def on_topic_deletion(self, marked_topics: Iterable[str]) -> Outcome:
        context = self.context
        marked = set(marked_topics)
        outcome = Outcome()
        unknown = sorted(marked - context.all_topics)
        if unknown:
            outcome.effects.append(DeleteTopicDeletionMarkers(tuple(unknown), context.epoch_zk_version))
        marked -= set(unknown)
        if not self.config.delete_topic_enable:
            if marked:
                outcome.effects.append(
                    DeleteTopicDeletionMarkers(tuple(sorted(marked)), context.epoch_zk_version)
                )
            return outcome
        if marked:
            reassigning = {p.topic for p in self.reassigner.partitions_being_reassigned()} & marked
            outcome.extend(self.topic_deletion_manager.enqueue_topics_for_deletion(marked, reassigning))
        return outcome

    def on_topic_config_change(self, topic: str, configs: Mapping[str, str]) -> Outcome:
        outcome = Outcome()
        outcome.apply(self.context, TopicConfigChanged.of(topic, configs))
        if self.context.unclean_leader_election_enabled(topic, self.config.unclean_leader_election_enable):
            outcome.extend(self.partition_state_machine.trigger_online_partition_state_change(topic))
        return outcome

    def on_stop_replica_deletion_response(
        self, replica_id: int, request_error_code: int, partition_error_codes: Mapping[TopicPartition, int]
    ) -> Outcome:
        if request_error_code != Errors.NONE:
            in_error = set(partition_error_codes)
        else:
            in_error = {p for p, code in partition_error_codes.items() if code != Errors.NONE}
        deletion = self.topic_deletion_manager
        outcome = deletion.fail_replica_deletion(PartitionAndReplica(p, replica_id) for p in sorted(in_error))
        deleted = sorted(set(partition_error_codes) - in_error)
        if deleted:
            outcome.extend(
                deletion.complete_replica_deletion(PartitionAndReplica(p, replica_id) for p in deleted)
            )
        return outcome

    # --- leadership -----------------------------------------------------------------------

    def on_controlled_shutdown(self, broker_id: int, broker_epoch: int) -> ControlledShutdownOutcome:
        return controlled_shutdown(
            self.context, self.partition_state_machine, self.replica_state_machine, broker_id, broker_epoch
        )

    def on_auto_leader_rebalance(self) -> Outcome:
        return auto_rebalance(
            self.context, self.partition_state_machine, self.config, self.reassigner.partitions_being_reassigned()
        )

    def on_elect_leaders(
        self,
        partitions: Iterable[TopicPartition],
        election_type: ElectionType,
        trigger: ElectionTrigger = ElectionTrigger.ADMIN_CLIENT_TRIGGERED,
    ) -> ElectLeadersOutcome:
        return elect_leaders(self.context, self.partition_state_machine, partitions, election_type, trigger)

    def on_unclean_leader_election_enable(self, topic: str | None = None) -> Outcome:
        return self.partition_state_machine.trigger_online_partition_state_change(topic)

    def on_alter_isr(
        self, broker_id: int, broker_epoch: int, isrs_to_alter: Mapping[TopicPartition, LeaderAndIsr]
    ) -> AlterIsrOutcome:
        outcome = alter_isr(self.context, broker_id, broker_epoch, isrs_to_alter)
        changed = [p for p, r in outcome.results.items() if isinstance(r, LeaderAndIsr)]
        outcome.extend(self.reassigner.on_isr_change(changed))
        return outcome

    def on_isr_change_notification(
        self, leaderships: Mapping[TopicPartition, LeaderIsrAndControllerEpoch]
    ) -> Outcome:
        outcome = isr_change_notification(self.context, leaderships)
        return outcome.extend(self.reassigner.on_isr_change(leaderships))

    # --- reassignments --------------------------------------------------------------------

    def on_alter_partition_reassignments(
        self,
        reassignments: Mapping[TopicPartition, Sequence[int] | None],
        from_zk: bool = False,
        fits: Fits | None = None,
    ) -> tuple[Outcome, dict[TopicPartition, KafkaError | None]]:
        """Start (a target) or cancel (None) reassignments; each partition's error or None."""
        return self.reassigner.alter(reassignments, from_zk, fits)

    def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, ReplicaAssignment]:
        """The partitions (of `partitions`, or all) being reassigned, with their assignments."""
        context = self.context
        candidates = context.all_partitions() if partitions is None else sorted(set(partitions))
        found = {p: context.partition_full_replica_assignment(p) for p in candidates}
        return {p: a for p, a in found.items() if a.is_being_reassigned}
