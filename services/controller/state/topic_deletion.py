"""Topic deletion (Kafka 2.8's TopicDeletionManager, decisions only).

A topic marked in `/admin/delete_topics` is queued. Deletion of a queued topic starts when no
replica of it is being deleted and it is not ineligible: its partitions go Offline then
NonExistent (once), brokers get UpdateMetadata (leader -2), replicas on dead brokers go
ReplicaDeletionIneligible (and the topic ineligible), live replicas go Offline then
ReplicaDeletionStarted (StopReplica with delete_partition). A topic with a partition being
reassigned waits (ineligible) until the reassignments end. Broker answers come back through
`complete_replica_deletion` / `fail_replica_deletion`. When every replica is
ReplicaDeletionSuccessful the replicas become NonExistent, the topic's znodes are deleted and the
topic is forgotten. An ineligible topic is retried when a broker holding its replicas comes back
(`resume_deletion_for_topics`). With `delete.topic.enable` false nothing is queued and
markers are deleted.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from services.controller.state.config import ControllerConfig
from services.controller.state.context import ControllerContext
from services.controller.state.effects import DeleteTopic, DeleteTopicDeletionMarkers, Outcome
from services.controller.state.model import PartitionAndReplica
from services.controller.state.partition_state_machine import PartitionStateMachine
from services.controller.state.records import (
    TopicDeletionIneligible,
    TopicDeletionQueued,
    TopicDeletionResumed,
    TopicDeletionStarted,
    TopicRemoved,
)
from services.controller.state.replica_state_machine import ReplicaStateMachine
from services.controller.state.request_batch import update_metadata_effects
from services.controller.state.states import PartitionState, ReplicaState

logger = logging.getLogger(__name__)


class TopicDeletionManager:
    def __init__(
        self,
        context: ControllerContext,
        config: ControllerConfig,
        partition_state_machine: PartitionStateMachine,
        replica_state_machine: ReplicaStateMachine,
    ) -> None:
        self._context = context
        self._enabled = config.delete_topic_enable
        self._psm = partition_state_machine
        self._rsm = replica_state_machine

    def init(self, topics_to_be_deleted: Iterable[str], topics_ineligible: Iterable[str]) -> Outcome:
        """On failover, with the topics marked for deletion and those that cannot be deleted now."""
        outcome = Outcome()
        topics = frozenset(topics_to_be_deleted)
        if self._enabled:
            outcome.apply(self._context, TopicDeletionQueued(topics))
            outcome.apply(self._context, TopicDeletionIneligible(frozenset(topics_ineligible) & topics))
        elif topics:
            logger.info("Removing %s since delete topic is disabled", sorted(topics))
            outcome.effects.append(
                DeleteTopicDeletionMarkers(tuple(sorted(topics)), self._context.epoch_zk_version)
            )
        return outcome

    def is_topic_queued_for_deletion(self, topic: str) -> bool:
        return self._enabled and self._context.is_topic_queued_for_deletion(topic)

    def try_topic_deletion(self) -> Outcome:
        return self._resume_deletions() if self._enabled else Outcome()

    def enqueue_topics_for_deletion(self, topics: Iterable[str], being_reassigned: Iterable[str] = ()) -> Outcome:
        """Queue `topics`; those of them `being_reassigned` wait until their reassignments end."""
        if not self._enabled:
            return Outcome()
        outcome = Outcome()
        outcome.apply(self._context, TopicDeletionQueued(frozenset(topics)))
        outcome.extend(self.mark_topic_ineligible_for_deletion(being_reassigned, "topic reassignment in progress"))
        return outcome.extend(self._resume_deletions())

    def resume_deletion_for_topics(self, topics: Iterable[str]) -> Outcome:
        outcome = Outcome()
        resumed = frozenset(topics) & self._context.topics_to_be_deleted
        if self._enabled and resumed:
            outcome.apply(self._context, TopicDeletionResumed(resumed))
            outcome.extend(self._resume_deletions())
        return outcome

    def fail_replica_deletion(self, replicas: Iterable[PartitionAndReplica]) -> Outcome:
        outcome = Outcome()
        if not self._enabled:
            return outcome
        failed = [r for r in replicas if self._context.is_topic_queued_for_deletion(r.topic)]
        if failed:
            outcome.extend(self._rsm.handle_state_changes(failed, ReplicaState.REPLICA_DELETION_INELIGIBLE))
            outcome.extend(
                self.mark_topic_ineligible_for_deletion({r.topic for r in failed}, "replica deletion failure")
            )
            outcome.extend(self._resume_deletions())
        return outcome

    def mark_topic_ineligible_for_deletion(self, topics: Iterable[str], reason: str) -> Outcome:
        outcome = Outcome()
        halted = frozenset(topics) & self._context.topics_to_be_deleted
        if self._enabled and halted:
            outcome.apply(self._context, TopicDeletionIneligible(halted))
            logger.info("Halted deletion of topics %s due to %s", ",".join(sorted(halted)), reason)
        return outcome

    def complete_replica_deletion(self, replicas: Iterable[PartitionAndReplica]) -> Outcome:
        done = [r for r in replicas if self.is_topic_queued_for_deletion(r.topic)]
        outcome = self._rsm.handle_state_changes(done, ReplicaState.REPLICA_DELETION_SUCCESSFUL)
        return outcome.extend(self._resume_deletions())

    # -----------------------------------------------------------------------------------------

    def _is_eligible(self, topic: str) -> bool:
        context = self._context
        return (
            context.is_topic_queued_for_deletion(topic)
            and not context.is_any_replica_in_state(topic, ReplicaState.REPLICA_DELETION_STARTED)
            and topic not in context.topics_ineligible_for_deletion
        )

    def _resume_deletions(self) -> Outcome:
        context = self._context
        outcome = Outcome()
        retry: list[str] = []
        eligible: list[str] = []
        for topic in sorted(context.topics_to_be_deleted):
            if context.are_all_replicas_in_state(topic, ReplicaState.REPLICA_DELETION_SUCCESSFUL):
                outcome.extend(self._complete_delete_topic(topic))
                logger.info("Deletion of topic %s successfully completed", topic)
            elif not context.is_any_replica_in_state(topic, ReplicaState.REPLICA_DELETION_STARTED):
                if context.is_any_replica_in_state(topic, ReplicaState.REPLICA_DELETION_INELIGIBLE):
                    retry.append(topic)
            if self._is_eligible(topic):
                logger.info("Deletion of topic %s (re)started", topic)
                eligible.append(topic)
        if retry:
            failed = [
                r
                for t in retry
                for r in context.replicas_in_state(t, ReplicaState.REPLICA_DELETION_INELIGIBLE)
            ]
            outcome.extend(self._rsm.handle_state_changes(failed, ReplicaState.OFFLINE_REPLICA))
        if eligible:
            outcome.extend(self._on_topic_deletion(eligible))
        return outcome

    def _complete_delete_topic(self, topic: str) -> Outcome:
        context = self._context
        replicas = context.replicas_in_state(topic, ReplicaState.REPLICA_DELETION_SUCCESSFUL)
        outcome = self._rsm.handle_state_changes(replicas, ReplicaState.NON_EXISTENT_REPLICA)
        outcome.effects.append(DeleteTopic(topic, context.epoch_zk_version))
        outcome.apply(context, TopicRemoved(topic))
        return outcome

    def _on_topic_deletion(self, topics: list[str]) -> Outcome:
        context = self._context
        outcome = Outcome()
        unseen = [t for t in topics if not context.is_topic_deletion_started(t)]
        if unseen:
            partitions = [p for t in unseen for p in context.partitions_for_topic(t)]
            outcome.extend(self._psm.handle_state_changes(partitions, PartitionState.OFFLINE_PARTITION))
            outcome.extend(self._psm.handle_state_changes(partitions, PartitionState.NON_EXISTENT_PARTITION))
            outcome.apply(context, TopicDeletionStarted(frozenset(unseen)))
        all_partitions = [p for t in topics for p in context.partitions_for_topic(t)]
        outcome.effects.extend(
            update_metadata_effects(context, context.live_or_shutting_down_broker_ids, all_partitions)
        )
        return outcome.extend(self._on_partition_deletion(topics))

    def _on_partition_deletion(self, topics: list[str]) -> Outcome:
        context = self._context
        dead: list[PartitionAndReplica] = []
        retry: list[PartitionAndReplica] = []
        ineligible: set[str] = set()
        for topic in topics:
            succeeded = set(context.replicas_in_state(topic, ReplicaState.REPLICA_DELETION_SUCCESSFUL))
            for replica in context.replicas_for_topic(topic):
                if not context.is_replica_online(replica.replica, partition=replica.partition):
                    dead.append(replica)
                    ineligible.add(topic)
                elif replica not in succeeded:
                    retry.append(replica)
        outcome = self._rsm.handle_state_changes(dead, ReplicaState.REPLICA_DELETION_INELIGIBLE)
        outcome.extend(self._rsm.handle_state_changes(retry, ReplicaState.OFFLINE_REPLICA))
        outcome.extend(self._rsm.handle_state_changes(retry, ReplicaState.REPLICA_DELETION_STARTED))
        if ineligible:
            outcome.extend(self.mark_topic_ineligible_for_deletion(ineligible, "offline replicas"))
        return outcome
