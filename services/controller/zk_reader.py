"""`ClusterReader`: what the controller reads from ZooKeeper, as the core's types, with the watches
that keep it informed set by the same reads (Kafka registers its handlers as it reads).

Every watch is one of `WatchBridge`'s callbacks, so a notification only enqueues an event; the
event thread rereads (and so re-registers) when it processes it. Reads go through
`OdradekZkClient`, which owns every znode's format; per-znode existence watches of many topics or
brokers are set pipelined.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kazoo.protocol.states import ZnodeStat

from services.common.shared_types import BrokerInfo, ReplicaAssignment
from services.common.topic_partition import TopicPartition
from services.common.zk import ControllerEpoch, ControllerInfo, OdradekZkClient
from services.common.zk.access import Watch
from services.common.zk.brokers import broker_path
from services.common.zk.controller import CONTROLLER_PATH
from services.common.zk.topics import topic_path
from services.controller import watches
from services.controller.state.core import ClusterSnapshot, TopicDescription
from services.controller.state.model import LeaderIsrAndControllerEpoch
from services.controller.zk_convert import (
    assignment_from_zk,
    leadership_from_zk,
)


class ClusterReader:
    def __init__(self, zk: OdradekZkClient, watch: Callable[[str], Watch]) -> None:
        self._zk = zk
        self._watch = watch

    # --- controllership ----------------------------------------------------------------------

    def controller_stat(self) -> ZnodeStat | None:
        """`/controller`'s stat (its ephemeral owner says which session holds it), watching it."""
        return self._zk.zk.exists(CONTROLLER_PATH, watch=self._watch(watches.CONTROLLER))

    def controller(self) -> ControllerInfo | None:
        """The active controller, watching `/controller`."""
        return self._zk.get_controller(watch=self._watch(watches.CONTROLLER))

    def controller_epoch(self) -> ControllerEpoch | None:
        return self._zk.get_controller_epoch()

    def snapshot(self, epoch: ControllerEpoch) -> ClusterSnapshot:
        """Everything a new controller loads (Kafka's initializeControllerContext)."""
        brokers = self.brokers()
        topics = self.topics()
        descriptions = self.topic_descriptions(topics)
        partitions = [
            TopicPartition(topic, partition_id)
            for topic, description in descriptions.items()
            for partition_id in description.assignment
        ]
        return ClusterSnapshot(
            epoch=epoch.epoch,
            epoch_zk_version=epoch.zk_version,
            brokers=brokers,
            topics=descriptions,
            leaderships=self.partition_leaderships(partitions),
            topics_to_be_deleted=frozenset(self.topic_deletions()),
        )

    # --- brokers -----------------------------------------------------------------------------

    def brokers(self) -> tuple[BrokerInfo, ...]:
        """Registered brokers with their epochs, watching `/brokers/ids` and each registration."""
        self._zk.get_live_broker_ids(watch=self._watch(watches.BROKER_CHANGE))
        found = self._zk.get_all_brokers()
        self._watch_each(watches.BROKER_MODIFICATION, (broker_path(b) for b in found))
        return tuple(found[b] for b in sorted(found))

    def broker(self, broker_id: int) -> BrokerInfo | None:
        """One registration, watching it for changes."""
        self._watch_each(watches.BROKER_MODIFICATION, [broker_path(broker_id)])
        return self._zk.get_broker(broker_id)

    # --- topics ------------------------------------------------------------------------------

    def topics(self) -> list[str]:
        return self._zk.get_all_topics(watch=self._watch(watches.TOPIC_CHANGE))

    def topic_descriptions(self, names: Iterable[str]) -> dict[str, TopicDescription]:
        """Assignments, ids and config overrides of topics, watching each topic's znode."""
        names = sorted(names)
        self._watch_each(watches.PARTITION_MODIFICATIONS, (topic_path(t) for t in names))
        found = self._zk.get_topic_assignments(names)
        return {
            topic: TopicDescription(
                assignment_from_zk(versioned.value),
                versioned.value.topic_id,
                self._zk.get_topic_config(topic),
            )
            for topic, versioned in sorted(found.items())
        }

    def topic_assignment(self, topic: str) -> dict[int, ReplicaAssignment] | None:
        """A topic's assignment, watching its znode (partition modifications)."""
        found = self._zk.get_topic_assignment(topic, watch=self._watch(watches.PARTITION_MODIFICATIONS))
        return None if found is None else assignment_from_zk(found.value)

    def topic_config(self, topic: str) -> dict[str, str]:
        return self._zk.get_topic_config(topic)

    def topic_deletions(self) -> list[str]:
        return self._zk.get_topic_deletions(watch=self._watch(watches.TOPIC_DELETION))

    def partition_leaderships(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        found = self._zk.get_partition_states(partitions)
        return {tp: leadership_from_zk(v) for tp, v in found.items()}

    # --- notifications and admin requests ----------------------------------------------------

    def isr_change_notifications(self) -> list[str]:
        return self._zk.get_isr_change_notifications(watch=self._watch(watches.ISR_CHANGE))

    def isr_change_partitions(self, sequence_numbers: Iterable[str]) -> set[TopicPartition]:
        return self._zk.get_isr_change_partitions(sequence_numbers)

    def log_dir_event_notifications(self) -> list[str]:
        return self._zk.get_log_dir_event_notifications(watch=self._watch(watches.LOG_DIR_EVENT))

    def log_dir_event_brokers(self, sequence_numbers: Iterable[str]) -> set[int]:
        return self._zk.get_log_dir_event_brokers(sequence_numbers)

    def preferred_replica_election(self) -> set[TopicPartition] | None:
        found = self._zk.get_preferred_replica_election(watch=self._watch(watches.PREFERRED_REPLICA_ELECTION))
        return None if found is None else set(found)

    def partition_reassignment(self) -> dict[TopicPartition, list[int]] | None:
        """`/admin/reassign_partitions`, watching it (also for its creation)."""
        return self._zk.get_partition_reassignment(watch=self._watch(watches.REASSIGN_PARTITIONS))

    def config_changes(self) -> list[str]:
        return self._zk.get_config_change_notifications(watch=self._watch(watches.CONFIG_CHANGE))

    def config_change_entity(self, name: str) -> str | None:
        return self._zk.get_config_change(name)

    # -----------------------------------------------------------------------------------------

    def _watch_each(self, kind: str, paths: Iterable[str]) -> None:
        """Existence watches of one kind on many znodes, pipelined."""
        watch = self._watch(kind)
        pending = [self._zk.zk.exists_async(path, watch=watch) for path in paths]
        for result in pending:
            result.get()
