"""In-memory stand-ins for the controller service's ZooKeeper wrappers (`OdradekZkClient` and
`ClusterReader`), its channel manager and its scheduler, for unit tests of the adapters.

`FakeZooKeeper` keeps partition state znodes with versions, topics, brokers and the controller
znode. Its writes check the controller-epoch fence and versions as ZooKeeper would; `bump`
rewrites a state znode behind the controller's back (as a leader's ISR change does), and every
call is recorded in `calls`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import SimpleNamespace

from kazoo.exceptions import NoNodeError

from services.common.errors import Errors, KafkaError
from services.common.shared_types import BrokerInfo, EndPoint
from services.common.topic_partition import TopicPartition
from services.common.zk import (
    ControllerEpoch,
    ControllerInfo,
    ControllerMovedError,
    PartitionStateUpdates,
    PartitionStateZnode,
    TopicAssignment,
    Versioned,
)
from services.common.zk.client_topics import TopicOps
from services.controller.state.core import ClusterSnapshot, TopicDescription
from services.controller.zk_convert import assignment_from_zk, leadership_from_zk

SESSION_ID = 0x1234


def broker(broker_id: int, epoch: int | None = None) -> BrokerInfo:
    return BrokerInfo(
        broker_id, (EndPoint(f"broker{broker_id}", 9092),), None, 100 + broker_id if epoch is None else epoch
    )


class FakeZooKeeper:
    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []
        self.states: dict[TopicPartition, Versioned[PartitionStateZnode]] = {}
        self.topics: dict[str, TopicAssignment] = {}
        self.configs: dict[str, dict[str, str]] = {}
        self.brokers: dict[int, BrokerInfo] = {}
        self.deletions: set[str] = set()
        self.epoch = ControllerEpoch(0, 0)
        self.controller: ControllerInfo | None = None
        self.controller_owner = SESSION_ID
        self.reassignment: dict[TopicPartition, list[int]] | None = None
        self.log_dir_events: dict[str, int] = {}  # sequence number -> broker id

    # --- test setup ---------------------------------------------------------------------------

    def add_topic(self, topic: str, assignment: Mapping[int, tuple[int, ...]]) -> None:
        self.topics[topic] = TopicAssignment.of(topic, assignment, None)

    def set_state(
        self,
        topic: str,
        partition: int,
        leader: int,
        isr: Iterable[int],
        leader_epoch: int = 0,
        controller_epoch: int = 1,
        version: int = 0,
    ) -> None:
        state = PartitionStateZnode(leader, leader_epoch, tuple(isr), controller_epoch)
        self.states[TopicPartition(topic, partition)] = Versioned(state, version)

    def bump(self, topic: str, partition: int, isr: Iterable[int]) -> None:
        """Another writer (a partition leader) changes a state znode: its version goes up."""
        tp = TopicPartition(topic, partition)
        old = self.states[tp]
        state = PartitionStateZnode(
            old.value.leader, old.value.leader_epoch, tuple(isr), old.value.controller_epoch
        )
        self.states[tp] = Versioned(state, old.version + 1)

    def elect_other(self, controller_id: int) -> None:
        """Another controller wins: the epoch and its version go up."""
        self.epoch = ControllerEpoch(self.epoch.epoch + 1, self.epoch.zk_version + 1)
        self.controller = ControllerInfo(controller_id, 0, "elsewhere:9093")
        self.controller_owner = SESSION_ID + 1

    def leadership(self, topic: str, partition: int):
        return leadership_from_zk(self.states[TopicPartition(topic, partition)])

    def _fence(self, epoch_zk_version: int) -> None:
        if epoch_zk_version != self.epoch.zk_version:
            raise ControllerMovedError("fenced")

    # --- OdradekZkClient writes ---------------------------------------------------------------

    def elect_controller(self, controller_id: int, endpoint: str | None = None) -> ControllerEpoch:
        self.calls.append(("elect_controller", controller_id))
        if self.controller is not None:
            raise ControllerMovedError("lost")
        self.epoch = ControllerEpoch(self.epoch.epoch + 1, self.epoch.zk_version + 1)
        self.controller = ControllerInfo(controller_id, 0, endpoint)
        self.controller_owner = SESSION_ID
        return self.epoch

    def delete_controller(self, *, epoch_zk_version: int) -> None:
        self.calls.append(("delete_controller", epoch_zk_version))
        self._fence(epoch_zk_version)
        self.controller = None

    def create_partition_states(
        self, states: Mapping[TopicPartition, PartitionStateZnode], *, epoch_zk_version: int
    ) -> PartitionStateUpdates:
        self.calls.append(("create_partition_states", sorted(states)))
        self._fence(epoch_zk_version)
        result = PartitionStateUpdates()
        for tp, state in sorted(states.items()):
            if tp.topic not in self.topics:
                result.failed[tp] = NoNodeError(str(tp))
            elif tp in self.states:
                result.retry.append(tp)
            else:
                self.states[tp] = Versioned(state, 0)
                result.updated[tp] = 0
        return result

    def set_partition_states(
        self, updates: Mapping[TopicPartition, Versioned[PartitionStateZnode]], *, epoch_zk_version: int
    ) -> PartitionStateUpdates:
        self.calls.append(("set_partition_states", sorted(updates)))
        self._fence(epoch_zk_version)
        result = PartitionStateUpdates()
        for tp, update in updates.items():
            current = self.states.get(tp)
            if current is None:
                result.failed[tp] = NoNodeError(str(tp))
            elif current.version != update.version:
                result.retry.append(tp)
            else:
                self.states[tp] = Versioned(update.value, current.version + 1)
                result.updated[tp] = current.version + 1
        return result

    def get_partition_states(
        self, tps: Iterable[TopicPartition]
    ) -> dict[TopicPartition, Versioned[PartitionStateZnode]]:
        return {tp: self.states[tp] for tp in tps if tp in self.states}

    check_topic_size = staticmethod(TopicOps.check_topic_size)

    def create_topic(self, assignment: TopicAssignment, config: Mapping[str, str] | None = None) -> None:
        self.calls.append(("create_topic", assignment.topic))
        if assignment.topic in self.topics:
            raise KafkaError("exists", error=Errors.TOPIC_ALREADY_EXISTS)
        self.topics[assignment.topic] = assignment
        self.configs[assignment.topic] = dict(config or {})

    def set_topic_assignment(
        self, assignment: TopicAssignment, *, epoch_zk_version: int | None, expected_version: int = -1
    ) -> int:
        self.calls.append(("set_topic_assignment", assignment.topic))
        if epoch_zk_version is not None:
            self._fence(epoch_zk_version)
        if assignment.topic not in self.topics:
            raise NoNodeError(assignment.topic)
        self.topics[assignment.topic] = assignment
        return 1

    def request_topic_deletion(self, topic: str) -> bool:
        self.calls.append(("request_topic_deletion", topic))
        new = topic not in self.deletions
        self.deletions.add(topic)
        return new

    def delete_topic_deletions(self, names: Iterable[str], *, epoch_zk_version: int) -> None:
        names = list(names)
        self.calls.append(("delete_topic_deletions", names))
        self._fence(epoch_zk_version)
        self.deletions -= set(names)

    def delete_topic(self, topic: str, *, epoch_zk_version: int) -> None:
        self.calls.append(("delete_topic", topic))
        self._fence(epoch_zk_version)
        self.topics.pop(topic, None)
        self.configs.pop(topic, None)
        self.deletions.discard(topic)
        for tp in [tp for tp in self.states if tp.topic == topic]:
            del self.states[tp]

    def delete_isr_change_notifications(
        self, sequence_numbers: Iterable[str], *, epoch_zk_version: int
    ) -> None:
        self._fence(epoch_zk_version)

    def delete_log_dir_event_notifications(
        self, sequence_numbers: Iterable[str], *, epoch_zk_version: int
    ) -> None:
        self._fence(epoch_zk_version)
        for sequence in sequence_numbers:
            self.log_dir_events.pop(sequence, None)

    def delete_preferred_replica_election(self, *, epoch_zk_version: int) -> None:
        self._fence(epoch_zk_version)

    def delete_partition_reassignment(self, *, epoch_zk_version: int) -> None:
        self._fence(epoch_zk_version)
        self.reassignment = None

    def remove_from_partition_reassignment(
        self, partitions: Iterable[tuple[TopicPartition, list[int] | None]], *, epoch_zk_version: int
    ) -> None:
        self._fence(epoch_zk_version)
        self.calls.append(("remove_from_partition_reassignment", list(partitions)))
        if self.reassignment is None:
            return
        for tp, replicas in list(partitions):
            if tp in self.reassignment and (replicas is None or self.reassignment[tp] == replicas):
                del self.reassignment[tp]
        if not self.reassignment:
            self.reassignment = None

    # --- ClusterReader ------------------------------------------------------------------------

    def controller_stat(self):
        return None if self.controller is None else SimpleNamespace(ephemeralOwner=self.controller_owner)

    def controller_epoch(self) -> ControllerEpoch:
        return self.epoch

    def snapshot(self, epoch: ControllerEpoch) -> ClusterSnapshot:
        return ClusterSnapshot(
            epoch=epoch.epoch,
            epoch_zk_version=epoch.zk_version,
            brokers=tuple(self.brokers[b] for b in sorted(self.brokers)),
            topics=self.topic_descriptions(self.topics),
            leaderships={tp: leadership_from_zk(v) for tp, v in self.states.items()},
            topics_to_be_deleted=frozenset(self.deletions),
        )

    def brokers_list(self) -> tuple[BrokerInfo, ...]:
        return tuple(self.brokers[b] for b in sorted(self.brokers))

    def broker(self, broker_id: int) -> BrokerInfo | None:
        return self.brokers.get(broker_id)

    def topic_names(self) -> list[str]:
        return sorted(self.topics)

    def topic_descriptions(self, names: Iterable[str]) -> dict[str, TopicDescription]:
        return {
            t: TopicDescription(
                assignment_from_zk(self.topics[t]), self.topics[t].topic_id, self.configs.get(t, {})
            )
            for t in sorted(names)
            if t in self.topics
        }

    def topic_assignment(self, topic: str):
        return assignment_from_zk(self.topics[topic]) if topic in self.topics else None

    def topic_config(self, topic: str) -> dict[str, str]:
        return dict(self.configs.get(topic, {}))

    def topic_deletions(self) -> list[str]:
        return sorted(self.deletions)

    def partition_leaderships(self, partitions: Iterable[TopicPartition]):
        return {
            p: leadership_from_zk(self.states[p]) for p in partitions if p in self.states
        }

    def isr_change_notifications(self) -> list[str]:
        return []

    def isr_change_partitions(self, sequence_numbers: Iterable[str]) -> set[TopicPartition]:
        return set()

    def log_dir_event_notifications(self) -> list[str]:
        return sorted(self.log_dir_events)

    def log_dir_event_brokers(self, sequence_numbers: Iterable[str]) -> set[int]:
        return {self.log_dir_events[s] for s in sequence_numbers if s in self.log_dir_events}

    def preferred_replica_election(self) -> None:
        return None

    def partition_reassignment(self) -> dict[TopicPartition, list[int]] | None:
        return None if self.reassignment is None else dict(self.reassignment)

    def config_changes(self) -> list[str]:
        return []

    def config_change_entity(self, name: str) -> str | None:
        return None


class FakeReader:
    """`ClusterReader`'s interface over a FakeZooKeeper (its `brokers()`/`topics()` names)."""

    def __init__(self, zk: FakeZooKeeper) -> None:
        self._zk = zk

    def __getattr__(self, name: str):
        return getattr(self._zk, name)

    def controller(self) -> ControllerInfo | None:
        return self._zk.controller

    def brokers(self) -> tuple[BrokerInfo, ...]:
        return self._zk.brokers_list()

    def topics(self) -> list[str]:
        return self._zk.topic_names()


@dataclass
class FakeChannels:
    """Records what the controller would send and to which brokers it keeps channels."""

    sent: list = field(default_factory=list)
    broker_ids: frozenset[int] = frozenset()
    shutdowns: int = 0

    def update_brokers(self, brokers: Iterable[BrokerInfo]) -> None:
        self.broker_ids = frozenset(b.broker_id for b in brokers)

    def send(self, requests) -> None:
        self.sent.extend(requests)

    def shutdown(self) -> None:
        self.broker_ids = frozenset()
        self.shutdowns += 1


@dataclass
class FakeScheduler:
    scheduled: dict = field(default_factory=dict)

    def schedule(self, key: str, delay_s: float, event) -> None:
        self.scheduled[key] = (delay_s, event)

    def cancel(self, key: str) -> None:
        self.scheduled.pop(key, None)
