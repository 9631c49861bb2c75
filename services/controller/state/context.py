"""`ControllerContext`: the active controller's view of the cluster, changed only by records.

It holds the live brokers (endpoints, rack, broker epoch), those shutting down and the replicas each
holds in offline log dirs, the topics with
their ids, config overrides and replica assignments, each partition's leadership (the partition
state znode content and version), the partition and replica states, the topics queued for (or
ineligible for) deletion, and the controller epoch with its znode version. `apply(record)` is
the only mutator; everything else reads.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from services.common.shared_types import INITIAL_CONTROLLER_EPOCH, BrokerInfo, ReplicaAssignment
from services.common.topic_partition import TopicPartition
from services.controller.state import records as r
from services.controller.state.model import (
    INITIAL_CONTROLLER_EPOCH_ZK_VERSION,
    LeaderIsrAndControllerEpoch,
    PartitionAndReplica,
)
from services.controller.state.states import PartitionState, ReplicaState

UNCLEAN_LEADER_ELECTION_ENABLE = "unclean.leader.election.enable"


class ControllerContext:
    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.revision = 0  # records applied since the reset: what was derived at one revision holds
        self.epoch = INITIAL_CONTROLLER_EPOCH
        self.epoch_zk_version = INITIAL_CONTROLLER_EPOCH_ZK_VERSION
        self._live_brokers: dict[int, BrokerInfo] = {}
        self._shutting_down: set[int] = set()
        self._replicas_on_offline_dirs: dict[int, frozenset[TopicPartition]] = {}
        self._topics: set[str] = set()
        self._topic_ids: dict[str, str] = {}
        self._topic_configs: dict[str, dict[str, str]] = {}
        self._assignments: dict[str, dict[int, ReplicaAssignment]] = {}
        self._leadership: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        self._partition_states: dict[TopicPartition, PartitionState] = {}
        self._replica_states: dict[PartitionAndReplica, ReplicaState] = {}
        self._topics_to_be_deleted: set[str] = set()
        self._topics_with_deletion_started: set[str] = set()
        self._topics_ineligible_for_deletion: set[str] = set()

    # -----------------------------------------------------------------------------------------
    # the mutator

    def apply(self, record: r.Record) -> None:
        self.revision += 1
        match record:
            case r.ContextReset():
                self._reset()
            case r.ControllerEpochChanged(epoch, zk_version):
                self.epoch, self.epoch_zk_version = epoch, zk_version
            case r.LiveBrokersSet(brokers):
                self._live_brokers = {b.broker_id: b for b in brokers}
                self._shutting_down.clear()
                self._replicas_on_offline_dirs.clear()
            case r.BrokersAdded(brokers):
                self._live_brokers.update({b.broker_id: b for b in brokers})
                for broker in brokers:
                    self._replicas_on_offline_dirs.pop(broker.broker_id, None)
            case r.BrokersRemoved(ids):
                for broker_id in ids:
                    self._live_brokers.pop(broker_id, None)
                    self._shutting_down.discard(broker_id)
                    self._replicas_on_offline_dirs.pop(broker_id, None)
            case r.BrokerUpdated(broker):
                old = self._live_brokers.get(broker.broker_id)
                if old is not None:
                    self._live_brokers[broker.broker_id] = replace(broker, broker_epoch=old.broker_epoch)
            case r.BrokerShuttingDown(broker_id):
                self._shutting_down.add(broker_id)
            case r.ReplicasOnOfflineDirsAdded(broker_id, partitions):
                if broker_id in self._live_brokers:
                    known = self._replicas_on_offline_dirs.get(broker_id, frozenset())
                    self._replicas_on_offline_dirs[broker_id] = known | partitions
            case r.TopicAdded(topic, topic_id):
                self._topics.add(topic)
                if topic_id is not None:
                    self._topic_ids[topic] = topic_id
            case r.TopicRemoved(topic):
                self._remove_topic(topic)
            case r.TopicConfigChanged(topic, configs):
                self._topic_configs[topic] = dict(configs)
            case r.PartitionAssignmentChanged(partition, assignment):
                self._assignments.setdefault(partition.topic, {})[partition.partition] = assignment
            case r.PartitionLeadershipChanged(partition, leadership):
                self._leadership[partition] = leadership
            case r.PartitionStateChanged(partition, state):
                self._partition_states[partition] = state
            case r.ReplicaStateChanged(replica, state):
                self._replica_states[replica] = state
            case r.ReplicaStateRemoved(replica):
                self._replica_states.pop(replica, None)
            case r.TopicDeletionQueued(topics):
                self._topics_to_be_deleted |= topics
            case r.TopicDeletionStarted(topics):
                self._topics_with_deletion_started |= topics
            case r.TopicDeletionIneligible(topics):
                self._topics_ineligible_for_deletion |= topics & self._topics_to_be_deleted
            case r.TopicDeletionResumed(topics):
                self._topics_ineligible_for_deletion -= topics
            case _:
                raise TypeError(f"not a controller record: {record!r}")

    def apply_all(self, records: Iterable[r.Record]) -> None:
        for record in records:
            self.apply(record)

    def _remove_topic(self, topic: str) -> None:
        self._topics.discard(topic)
        self._topic_ids.pop(topic, None)
        self._topic_configs.pop(topic, None)
        self._topics_to_be_deleted.discard(topic)
        self._topics_with_deletion_started.discard(topic)
        self._topics_ineligible_for_deletion.discard(topic)
        for partition_id in self._assignments.pop(topic, {}):
            partition = TopicPartition(topic, partition_id)
            self._leadership.pop(partition, None)
            self._partition_states.pop(partition, None)
        for replica in [rep for rep in self._replica_states if rep.topic == topic]:
            del self._replica_states[replica]

    # -----------------------------------------------------------------------------------------
    # brokers

    @property
    def live_broker_ids(self) -> frozenset[int]:
        """Registered brokers that are not shutting down."""
        return frozenset(self._live_brokers.keys() - self._shutting_down)

    @property
    def live_or_shutting_down_broker_ids(self) -> frozenset[int]:
        return frozenset(self._live_brokers)

    @property
    def shutting_down_broker_ids(self) -> frozenset[int]:
        return frozenset(self._shutting_down)

    def live_or_shutting_down_brokers(self) -> tuple[BrokerInfo, ...]:
        return tuple(self._live_brokers[i] for i in sorted(self._live_brokers))

    def broker(self, broker_id: int) -> BrokerInfo | None:
        return self._live_brokers.get(broker_id)

    def broker_epoch(self, broker_id: int) -> int | None:
        broker = self._live_brokers.get(broker_id)
        return None if broker is None else broker.broker_epoch

    def is_replica_online(
        self, broker_id: int, include_shutting_down: bool = False, partition: TopicPartition | None = None
    ) -> bool:
        """Whether the broker is live (and, unless included, not shutting down) and, for a
        partition, its replica there is not in an offline log dir."""
        if broker_id not in self._live_brokers:
            return False
        if partition is not None and partition in self._replicas_on_offline_dirs.get(broker_id, ()):
            return False
        return include_shutting_down or broker_id not in self._shutting_down

    def replicas_on_offline_dirs(self, broker_id: int) -> frozenset[TopicPartition]:
        """Partitions whose replica on `broker_id` is in an offline log dir."""
        return self._replicas_on_offline_dirs.get(broker_id, frozenset())

    # -----------------------------------------------------------------------------------------
    # topics and assignments

    @property
    def all_topics(self) -> frozenset[str]:
        return frozenset(self._topics)

    def topic_id(self, topic: str) -> str | None:
        return self._topic_ids.get(topic)

    def topic_name(self, topic_id: str) -> str | None:
        return next((t for t, i in self._topic_ids.items() if i == topic_id), None)

    def topic_config(self, topic: str) -> dict[str, str]:
        return dict(self._topic_configs.get(topic, {}))

    def unclean_leader_election_enabled(self, topic: str, default: bool) -> bool:
        """The topic's `unclean.leader.election.enable` override, else `default`."""
        value = self._topic_configs.get(topic, {}).get(UNCLEAN_LEADER_ELECTION_ENABLE)
        return default if value is None else value.strip().lower() == "true"

    def partition_replica_assignment(self, partition: TopicPartition) -> tuple[int, ...]:
        return self.partition_full_replica_assignment(partition).replicas

    def partition_full_replica_assignment(self, partition: TopicPartition) -> ReplicaAssignment:
        found = self._assignments.get(partition.topic, {}).get(partition.partition)
        return found if found is not None else ReplicaAssignment(())

    def topic_assignment(self, topic: str) -> dict[int, tuple[int, ...]]:
        """Partition id -> replicas of one topic (empty if unknown)."""
        return {p: a.replicas for p, a in sorted(self._assignments.get(topic, {}).items())}

    def all_partitions(self) -> list[TopicPartition]:
        return sorted(TopicPartition(t, p) for t, parts in self._assignments.items() for p in parts)

    def partitions_for_topic(self, topic: str) -> list[TopicPartition]:
        return [TopicPartition(topic, p) for p in sorted(self._assignments.get(topic, {}))]

    def partitions_on_broker(self, broker_id: int) -> list[TopicPartition]:
        """Partitions with a replica assigned to `broker_id`."""
        return [p for p in self.all_partitions() if broker_id in self.partition_replica_assignment(p)]

    def replicas_on_brokers(self, broker_ids: Iterable[int]) -> list[PartitionAndReplica]:
        ids = sorted(set(broker_ids))
        partitions = [(p, self.partition_replica_assignment(p)) for p in self.all_partitions()]
        return [PartitionAndReplica(p, b) for b in ids for p, replicas in partitions if b in replicas]

    def replicas_for_topic(self, topic: str) -> list[PartitionAndReplica]:
        return self.replicas_for_partitions(self.partitions_for_topic(topic))

    def replicas_for_partitions(self, partitions: Iterable[TopicPartition]) -> list[PartitionAndReplica]:
        return [
            PartitionAndReplica(p, replica)
            for p in partitions
            for replica in self.partition_replica_assignment(p)
        ]

    def online_and_offline_replicas(self) -> tuple[list[PartitionAndReplica], list[PartitionAndReplica]]:
        online: list[PartitionAndReplica] = []
        offline: list[PartitionAndReplica] = []
        for replica in self.replicas_for_partitions(self.all_partitions()):
            online_here = self.is_replica_online(replica.replica, partition=replica.partition)
            (online if online_here else offline).append(replica)
        return online, offline

    # -----------------------------------------------------------------------------------------
    # leadership

    def partition_leadership(self, partition: TopicPartition) -> LeaderIsrAndControllerEpoch | None:
        return self._leadership.get(partition)

    def partitions_with_leaders(self) -> list[TopicPartition]:
        """Partitions with a state znode, except those of topics queued for deletion."""
        return sorted(p for p in self._leadership if not self.is_topic_queued_for_deletion(p.topic))

    def partitions_with_offline_leader(self) -> list[TopicPartition]:
        return sorted(
            p
            for p, lead in self._leadership.items()
            if not self.is_replica_online(lead.leader_and_isr.leader, partition=p)
            and not self.is_topic_queued_for_deletion(p.topic)
        )

    def partitions_led_by(self, broker_id: int) -> list[TopicPartition]:
        """Every partition whose current leader is `broker_id`."""
        return sorted(p for p, lead in self._leadership.items() if lead.leader_and_isr.leader == broker_id)

    def partition_leaders_on_broker(self, broker_id: int) -> list[TopicPartition]:
        """Partitions led by `broker_id` that could move (replication factor > 1, not being deleted)."""
        return [
            p
            for p in self.partitions_led_by(broker_id)
            if not self.is_topic_queued_for_deletion(p.topic)
            and len(self.partition_replica_assignment(p)) > 1
        ]

    def has_preferred_leader(self, partition: TopicPartition) -> bool:
        """True if the partition is led by the first replica of its assignment (or has no leadership).

        A preferred replica that a reassignment is still adding counts as in balance until it
        joins the ISR, as in Kafka.
        """
        leadership = self._leadership.get(partition)
        assignment = self.partition_full_replica_assignment(partition)
        if leadership is None or not assignment.replicas:
            return True
        preferred = assignment.replicas[0]
        if assignment.is_being_reassigned and preferred in assignment.adding_replicas:
            return preferred not in leadership.leader_and_isr.isr
        return leadership.leader_and_isr.leader == preferred

    # -----------------------------------------------------------------------------------------
    # partition and replica states

    def partition_state(self, partition: TopicPartition) -> PartitionState:
        return self._partition_states.get(partition, PartitionState.NON_EXISTENT_PARTITION)

    def partitions_in_states(
        self, states: Iterable[PartitionState], topic: str | None = None
    ) -> list[TopicPartition]:
        wanted = set(states)
        candidates = self.partitions_for_topic(topic) if topic is not None else sorted(self._partition_states)
        return [p for p in candidates if self.partition_state(p) in wanted]

    def replica_state(self, replica: PartitionAndReplica) -> ReplicaState:
        return self._replica_states.get(replica, ReplicaState.NON_EXISTENT_REPLICA)

    def has_replica_state(self, replica: PartitionAndReplica) -> bool:
        return replica in self._replica_states

    def replicas_in_state(self, topic: str, state: ReplicaState) -> list[PartitionAndReplica]:
        return [rep for rep in self.replicas_for_topic(topic) if self.replica_state(rep) == state]

    def are_all_replicas_in_state(self, topic: str, state: ReplicaState) -> bool:
        return all(self.replica_state(rep) == state for rep in self.replicas_for_topic(topic))

    def is_any_replica_in_state(self, topic: str, state: ReplicaState) -> bool:
        return any(self.replica_state(rep) == state for rep in self.replicas_for_topic(topic))

    # -----------------------------------------------------------------------------------------
    # topic deletion

    @property
    def topics_to_be_deleted(self) -> frozenset[str]:
        return frozenset(self._topics_to_be_deleted)

    @property
    def topics_with_deletion_started(self) -> frozenset[str]:
        return frozenset(self._topics_with_deletion_started)

    @property
    def topics_ineligible_for_deletion(self) -> frozenset[str]:
        return frozenset(self._topics_ineligible_for_deletion)

    def is_topic_queued_for_deletion(self, topic: str) -> bool:
        return topic in self._topics_to_be_deleted

    def is_topic_deletion_started(self, topic: str) -> bool:
        return topic in self._topics_with_deletion_started

    # -----------------------------------------------------------------------------------------
    # gauges

    def offline_partition_count(self) -> int:
        """Partitions in OfflinePartition, not counting topics whose deletion has started."""
        return sum(
            1
            for p, s in self._partition_states.items()
            if s == PartitionState.OFFLINE_PARTITION and not self.is_topic_deletion_started(p.topic)
        )

    def online_partition_count(self) -> int:
        return sum(1 for s in self._partition_states.values() if s == PartitionState.ONLINE_PARTITION)

    def global_partition_count(self) -> int:
        """Partitions with leadership (a state znode)."""
        return len(self._leadership)

    def preferred_replica_imbalance_count(self) -> int:
        """Partitions not led by their preferred replica, topics queued for deletion excluded."""
        return sum(
            1
            for p in self._leadership
            if not self.is_topic_queued_for_deletion(p.topic) and not self.has_preferred_leader(p)
        )

    def preferred_replica_imbalance_per_broker(self) -> dict[int, tuple[list[TopicPartition], int]]:
        """For each preferred replica (first of an assignment): partitions it should lead but does
        not (having leadership), and how many it is preferred for. Topics queued for deletion are
        left out, as Kafka's auto rebalance does."""
        result: dict[int, tuple[list[TopicPartition], int]] = {}
        for partition in self.all_partitions():
            replicas = self.partition_replica_assignment(partition)
            if not replicas or self.is_topic_queued_for_deletion(partition.topic):
                continue
            not_preferred, total = result.get(replicas[0], ([], 0))
            leadership = self._leadership.get(partition)
            if leadership is not None and leadership.leader_and_isr.leader != replicas[0]:
                not_preferred.append(partition)
            result[replicas[0]] = (not_preferred, total + 1)
        return result
