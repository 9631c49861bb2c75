"""`ClusterEventHandlers`: the active controller's reactions to what ZooKeeper reports (Kafka's
BrokerChange, BrokerModifications, TopicChange, PartitionModifications, TopicDeletion,
IsrChangeNotification and LogDirEventNotification processing, plus topic config changes) and to
brokers' answers (a LeaderAndIsr answer's KAFKA_STORAGE_ERROR marks that replica offline).

Each handler rereads the znodes its event is about (re-registering the one-shot watch), hands
what it read to the core and executes the outcome. Handlers run on the event thread only while
this instance is active.
"""

from __future__ import annotations

import logging

from services.common.zk.configs import TOPIC_ENTITY_TYPE
from services.controller.handler_base import HandlerBase
from services.controller.service_events import ConfigChangeNotification
from services.controller.state.events import (
    BrokerChange,
    BrokerModifications,
    IsrChangeNotification,
    LeaderAndIsrResponseReceived,
    LogDirEventNotification,
    PartitionModifications,
    TopicChange,
    TopicDeletion,
    TopicDeletionStopReplicaResponseReceived,
    TopicUncleanLeaderElectionEnable,
    UncleanLeaderElectionEnable,
    UpdateMetadataResponseReceived,
)
from services.controller.state.records import PartitionLeadershipChanged

logger = logging.getLogger(__name__)

TOPIC_ENTITY_PREFIX = f"{TOPIC_ENTITY_TYPE}/"


class ClusterEventHandlers(HandlerBase):
    last_config_change: str

    # --- brokers -----------------------------------------------------------------------------

    def _on_broker_change(self, _event: BrokerChange) -> None:
        brokers = self.reader.brokers()
        before = self.context.live_or_shutting_down_broker_ids
        self._refresh_leaderships_on(before - set(brokers))
        outcome = self.core.on_broker_change(brokers)
        after = self.context.live_or_shutting_down_broker_ids
        if before != after:
            logger.info(
                "Broker change: new %s, dead %s, live %s",
                sorted(after - before),
                sorted(before - after),
                sorted(after),
            )
        self._execute(outcome)

    def _refresh_leaderships_on(self, dead_broker_ids) -> None:
        """Partition leaders change their ISR in ZooKeeper without the controller; before deciding
        about dead brokers, read the current state of the partitions they host (as Kafka rereads
        it before removing replicas from ISRs)."""
        if not dead_broker_ids:
            return
        partitions = sorted({p for b in dead_broker_ids for p in self.context.partitions_on_broker(b)})
        for partition, leadership in sorted(self.reader.partition_leaderships(partitions).items()):
            self.context.apply(PartitionLeadershipChanged(partition, leadership))

    def _on_broker_modifications(self, event: BrokerModifications) -> None:
        if event.broker_id not in self.context.live_or_shutting_down_broker_ids:
            return
        broker = self.reader.broker(event.broker_id)
        if broker is not None:
            self._execute(self.core.on_broker_modification(broker))

    # --- topics ------------------------------------------------------------------------------

    def _on_topic_change(self, _event: TopicChange) -> None:
        topics = self.reader.topics()
        new_topics = self.reader.topic_descriptions(set(topics) - self.context.all_topics)
        if new_topics:
            logger.info("New topics: %s", sorted(new_topics))
        self._execute(self.core.on_topic_change(topics, new_topics))

    def _on_partition_modifications(self, event: PartitionModifications) -> None:
        if event.topic not in self.context.all_topics:
            return
        assignment = self.reader.topic_assignment(event.topic)
        if assignment is not None:
            self._execute(self.core.on_partition_modifications(event.topic, assignment))

    def _on_topic_deletion(self, _event: TopicDeletion) -> None:
        marked = self.reader.topic_deletions()
        if marked:
            logger.info("Topics marked for deletion: %s", marked)
        self._execute(self.core.on_topic_deletion(marked))

    def _on_stop_replica_response(self, event: TopicDeletionStopReplicaResponseReceived) -> None:
        outcome = self.core.on_stop_replica_deletion_response(
            event.replica_id, event.request_error_code, event.partition_error_codes
        )
        self._execute(outcome)

    # --- ISR and configs ---------------------------------------------------------------------

    def _on_isr_change_notification(self, _event: IsrChangeNotification) -> None:
        sequence_numbers = self.reader.isr_change_notifications()
        if not sequence_numbers:
            return
        known = set(self.context.all_partitions())
        partitions = sorted(p for p in self.reader.isr_change_partitions(sequence_numbers) if p in known)
        leaderships = self.reader.partition_leaderships(partitions)
        self._execute(self.core.on_isr_change_notification(leaderships))
        self.zk.delete_isr_change_notifications(
            sequence_numbers, epoch_zk_version=self.context.epoch_zk_version
        )

    def _on_log_dir_event_notification(self, _event: LogDirEventNotification) -> None:
        """Brokers whose log dirs failed are sent LeaderAndIsr for all their replicas; their
        answers say which replicas are offline (`_on_leader_and_isr_response`)."""
        sequence_numbers = self.reader.log_dir_event_notifications()
        if not sequence_numbers:
            return
        brokers = self.reader.log_dir_event_brokers(sequence_numbers)
        logger.info("Log dir failure reported by brokers %s", sorted(brokers))
        self._execute(self.core.on_broker_log_dir_failure(brokers))
        self.zk.delete_log_dir_event_notifications(
            sequence_numbers, epoch_zk_version=self.context.epoch_zk_version
        )

    def _on_config_change_notification(self, _event: ConfigChangeNotification) -> None:
        """Topic config overrides changed: give the core each changed topic's new overrides."""
        names = [n for n in self.reader.config_changes() if n > self.last_config_change]
        for name in names:
            entity = self.reader.config_change_entity(name)
            self.last_config_change = name
            if entity is None or not entity.startswith(TOPIC_ENTITY_PREFIX):
                continue
            topic = entity[len(TOPIC_ENTITY_PREFIX) :]
            if topic in self.context.all_topics:
                configs = self.reader.topic_config(topic)
                self._execute(self.core.on_topic_config_change(topic, configs))

    def _on_unclean_leader_election_enable(self, _event: UncleanLeaderElectionEnable) -> None:
        self._execute(self.core.on_unclean_leader_election_enable())

    def _on_topic_unclean_leader_election_enable(self, event: TopicUncleanLeaderElectionEnable) -> None:
        if event.topic in self.context.all_topics:
            self._execute(self.core.on_unclean_leader_election_enable(event.topic))

    # --- broker answers ----------------------------------------------------------------------

    def _on_leader_and_isr_response(self, event: LeaderAndIsrResponseReceived) -> None:
        errors = {p: c for p, c in event.partition_error_codes.items() if c}
        if event.error_code or errors:
            logger.warning(
                "LeaderAndIsr to broker %d failed: error %d, partitions %s",
                event.broker_id,
                event.error_code,
                {str(p): c for p, c in errors.items()},
            )
        if not event.error_code and errors:
            self._execute(self.core.on_leader_and_isr_response(event.broker_id, errors))

    def _on_update_metadata_response(self, event: UpdateMetadataResponseReceived) -> None:
        if event.error_code:
            logger.warning("UpdateMetadata to broker %d failed: error %d", event.broker_id, event.error_code)
