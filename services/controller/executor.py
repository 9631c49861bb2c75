"""`EffectsExecutor`: carries out a decision's effects, ZooKeeper writes first, then requests.

Writes go in list order through the fenced `OdradekZkClient` operations (consecutive partition
state writes of distinct partitions are pipelined, or created in one transaction). The core has
already applied every effect to its context as if it succeeded, so a write that fails needs
repair (Kafka's retry loop in electLeaderForPartitions and removeReplicasFromIsr):

  - a conditional write that finds another version (or a create that finds the znode) is a
    conflict: later writes of that partition in the same decision are skipped, its requests are
    dropped (`without_partitions`), its state znode is reloaded into the context (a
    `PartitionLeadershipChanged` record) and `retry` runs the same change again for those
    partitions; the new decision is executed the same way, at most `max_attempts` times in all;
  - a state znode that is gone (its topic was deleted) drops that partition's requests;
  - `ControllerMovedError` (the controller-epoch check failed) and ZooKeeper's own errors
    (connection loss, timeout) propagate at once, before any request is sent: the controller
    resigns;
  - any other failure of a write (one ZooKeeper would refuse as too large, a znode it cannot
    decode) concerns that write's topic alone: it is logged, counted in `failed_writes` (the
    `odradek_controller_failed_zk_writes_total` metric), its partitions' requests are dropped,
    and the other writes and requests of the decision go on. It is not retried: the next
    controller failover, which rereads ZooKeeper, tries again.

Requests left go to `send`, in order.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from kazoo.exceptions import KazooException, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from services.common.errors import Errors, KafkaError
from services.common.shared_types import ReplicaAssignment
from services.common.topic_partition import TopicPartition
from services.common.zk import (
    ControllerMovedError,
    PartitionStateUpdates,
    PartitionStateZnode,
    TopicAssignment,
    Versioned,
)
from services.common.zk.topics import new_topic_id
from services.controller.state.context import ControllerContext
from services.controller.state.effects import (
    BrokerRequest,
    CreatePartitionState,
    CreateTopic,
    CreateTopicDeletionMarker,
    DeleteTopic,
    DeleteTopicDeletionMarkers,
    Effect,
    Outcome,
    RemoveFromZkReassignment,
    SendLeaderAndIsr,
    SendStopReplica,
    SendUpdateMetadata,
    UpdatePartitionState,
    UpdateTopicAssignment,
    without_partitions,
)
from services.controller.state.records import PartitionLeadershipChanged, Record
from services.controller.zk_convert import (
    leadership_from_zk,
    partition_state_to_zk,
    topic_assignment_to_zk,
)

logger = logging.getLogger(__name__)

DEFAULT_MAX_ATTEMPTS = 5
ZOOKEEPER_ERRORS = (KazooException, KazooTimeoutError)
REQUEST_TYPES = (SendLeaderAndIsr, SendUpdateMetadata, SendStopReplica)

Retry = Callable[[list[TopicPartition]], Outcome]
PartitionWrite = CreatePartitionState | UpdatePartitionState


class ZkWriter(Protocol):
    """The `OdradekZkClient` operations the executor uses."""

    def create_partition_states(
        self, states: Mapping[TopicPartition, PartitionStateZnode], *, epoch_zk_version: int
    ) -> PartitionStateUpdates: ...

    def set_partition_states(
        self, updates: Mapping[TopicPartition, Versioned[PartitionStateZnode]], *, epoch_zk_version: int
    ) -> PartitionStateUpdates: ...

    def get_partition_states(
        self, tps: Iterable[TopicPartition]
    ) -> dict[TopicPartition, Versioned[PartitionStateZnode]]: ...

    def check_topic_size(
        self, assignment: TopicAssignment, config: Mapping[str, str] | None = None
    ) -> tuple[bytes, bytes]: ...

    def create_topic(self, assignment: TopicAssignment, config: Mapping[str, str] | None = None) -> None: ...

    def set_topic_assignment(
        self, assignment: TopicAssignment, *, epoch_zk_version: int | None, expected_version: int = -1
    ) -> int: ...

    def request_topic_deletion(self, topic: str) -> bool: ...

    def delete_topic_deletions(self, names: Iterable[str], *, epoch_zk_version: int) -> None: ...

    def delete_topic(self, topic: str, *, epoch_zk_version: int) -> None: ...

    def remove_from_partition_reassignment(
        self, partitions: Iterable[tuple[TopicPartition, list[int] | None]], *, epoch_zk_version: int
    ) -> None: ...


@dataclass
class Execution:
    """What carrying out one decision took: the first outcome and those of its retries, the
    partitions whose state znode vanished, those still conflicting after the last attempt, and
    the records that reloaded conflicting state znodes into the context."""

    outcomes: list[Outcome]
    missing: set[TopicPartition] = field(default_factory=set)
    conflicted: set[TopicPartition] = field(default_factory=set)
    reloads: list[Record] = field(default_factory=list)

    @property
    def retries(self) -> list[Outcome]:
        return self.outcomes[1:]


@dataclass
class _Writes:
    conflicts: set[TopicPartition] = field(default_factory=set)
    missing: set[TopicPartition] = field(default_factory=set)

    @property
    def skipped(self) -> set[TopicPartition]:
        return self.conflicts | self.missing


class EffectsExecutor:
    def __init__(
        self,
        zk: ZkWriter,
        context: ControllerContext,
        send: Callable[[list[BrokerRequest]], None],
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    ) -> None:
        self._zk = zk
        self._context = context
        self._send = send
        self._max_attempts = max(1, max_attempts)
        self.failed_writes = 0

    def execute(self, outcome: Outcome, retry: Retry | None = None) -> Execution:
        execution = Execution([outcome])
        current = outcome
        for attempt in range(1, self._max_attempts + 1):
            writes = self._write(current.effects)
            execution.missing |= writes.missing
            requests = [
                e for e in without_partitions(current.effects, writes.skipped) if isinstance(e, REQUEST_TYPES)
            ]
            if requests:
                self._send(requests)
            if not writes.conflicts:
                return execution
            reloaded = self._reload(writes.conflicts, execution)
            execution.missing |= writes.conflicts - reloaded
            if retry is None or not reloaded or attempt == self._max_attempts:
                if reloaded:
                    logger.warning(
                        "Giving up on %d partitions after %d attempts: %s", len(reloaded), attempt, sample(reloaded)
                    )
                execution.conflicted |= reloaded
                return execution
            logger.info(
                "Retrying the state change of %d partitions after version conflicts: %s",
                len(reloaded),
                sample(reloaded),
            )
            current = retry(sorted(reloaded))
            execution.outcomes.append(current)
        return execution

    # --- single writes the admin requests make -----------------------------------------------

    def check_topic_size(self, effect: CreateTopic | UpdateTopicAssignment) -> None:
        """INVALID_REQUEST, before anything is written, if the topic's assignment or config znode
        would be too large for ZooKeeper."""
        if isinstance(effect, CreateTopic):
            assignment = TopicAssignment.of(effect.topic, effect.assignment, new_topic_id())
            self._zk.check_topic_size(assignment, dict(effect.configs))
        else:
            self._zk.check_topic_size(topic_assignment_to_zk(effect.topic, effect.assignment, self._context))

    def topic_fits(self, topic: str, partitions: Mapping[int, ReplicaAssignment]) -> bool:
        """Whether the topic's assignment `partitions` would fit in its znode."""
        try:
            self._zk.check_topic_size(TopicAssignment(topic, dict(partitions), self._context.topic_id(topic)))
        except KafkaError:
            return False
        return True

    def create_topic(self, effect: CreateTopic) -> None:
        """Create the topic's znodes with a new topic id; TOPIC_ALREADY_EXISTS if it exists."""
        assignment = TopicAssignment.of(effect.topic, effect.assignment, new_topic_id())
        self._zk.create_topic(assignment, dict(effect.configs))

    def update_topic_assignment(self, effect: UpdateTopicAssignment) -> None:
        """Rewrite a topic's assignment (fenced); UNKNOWN_TOPIC_OR_PARTITION if it is gone."""
        assignment = topic_assignment_to_zk(effect.topic, effect.assignment, self._context)
        try:
            self._zk.set_topic_assignment(assignment, epoch_zk_version=self._context.epoch_zk_version)
        except NoNodeError as e:
            raise KafkaError(
                f"Topic {effect.topic} no longer exists", error=Errors.UNKNOWN_TOPIC_OR_PARTITION
            ) from e

    # -----------------------------------------------------------------------------------------

    def _write(self, effects: Iterable[Effect]) -> _Writes:
        writes = _Writes()
        group = _Group()
        for effect in effects:
            if isinstance(effect, REQUEST_TYPES):
                continue
            if not isinstance(effect, CreatePartitionState | UpdatePartitionState):
                self._isolated(group.take(), writes)
                self._isolated(effect, writes)
                continue
            if not group.joins(effect):
                self._isolated(group.take(), writes)
            if effect.partition not in writes.conflicts and effect.partition not in writes.missing:
                group.add(effect)
        self._isolated(group.take(), writes)
        return writes

    def _isolated(self, what: list[PartitionWrite] | Effect, writes: _Writes) -> None:
        """Writes a group of partition states or one other effect; a failure other than the
        controller's move or ZooKeeper's own is that write's alone: logged, counted, and its
        partitions' requests dropped."""
        try:
            if isinstance(what, list):
                self._flush(what, writes)
            else:
                self._write_one(what)
        except (ControllerMovedError, *ZOOKEEPER_ERRORS):
            raise
        except Exception:
            self.failed_writes += 1
            partitions = {e.partition for e in what} if isinstance(what, list) else set()
            writes.missing |= partitions
            topics = sorted({p.topic for p in partitions} or {str(getattr(what, "topic", what))})
            logger.exception("ZooKeeper write for topics %s failed; going on without it", topics)

    def _flush(self, group: list[PartitionWrite], writes: _Writes) -> None:
        skipped = writes.skipped
        group = [e for e in group if e.partition not in skipped]
        if not group:
            return
        epoch_zk_version = group[0].controller_epoch_zk_version
        if isinstance(group[0], CreatePartitionState):
            self._create_states(group, epoch_zk_version, writes)
            return
        updates = {
            e.partition: Versioned(
                partition_state_to_zk(e.leader_and_isr, e.controller_epoch), e.expected_zk_version
            )
            for e in group
            if isinstance(e, UpdatePartitionState)
        }
        result = self._zk.set_partition_states(updates, epoch_zk_version=epoch_zk_version)
        writes.conflicts |= set(result.retry)
        writes.missing |= set(result.failed)
        for tp, error in result.failed.items():
            logger.warning("Could not write the state of partition %s: %r", tp, error)

    def _create_states(self, group: list[PartitionWrite], epoch_zk_version: int, writes: _Writes) -> None:
        states = {
            e.partition: partition_state_to_zk(e.leader_and_isr, e.controller_epoch) for e in group
        }
        result = self._zk.create_partition_states(states, epoch_zk_version=epoch_zk_version)
        for tp in result.retry:
            logger.warning("State znode of new partition %s already exists", tp)
        for tp in result.failed:
            logger.warning("Topic of new partition %s no longer exists", tp)
        writes.conflicts |= set(result.retry)
        writes.missing |= set(result.failed)

    def _write_one(self, effect: Effect) -> None:
        match effect:
            case CreateTopic():
                try:
                    self.create_topic(effect)
                except KafkaError as e:
                    logger.warning("Could not create topic %s: %s", effect.topic, e)
            case UpdateTopicAssignment():
                try:
                    self.update_topic_assignment(effect)
                except KafkaError as e:
                    logger.warning("Could not update the assignment of %s: %s", effect.topic, e)
            case CreateTopicDeletionMarker():
                self._zk.request_topic_deletion(effect.topic)
            case DeleteTopicDeletionMarkers():
                self._zk.delete_topic_deletions(
                    effect.topics, epoch_zk_version=effect.controller_epoch_zk_version
                )
            case DeleteTopic():
                try:
                    self._zk.delete_topic(effect.topic, epoch_zk_version=effect.controller_epoch_zk_version)
                except NoNodeError:
                    logger.warning("Znodes of topic %s vanished while it was being deleted", effect.topic)
            case RemoveFromZkReassignment():
                self._zk.remove_from_partition_reassignment(
                    [(tp, None if r is None else list(r)) for tp, r in effect.partitions],
                    epoch_zk_version=effect.controller_epoch_zk_version,
                )
            case _:
                raise TypeError(f"not a ZooKeeper write: {effect!r}")

    def _reload(self, partitions: set[TopicPartition], execution: Execution) -> set[TopicPartition]:
        """Read the conflicting state znodes into the context; the partitions that still have one."""
        found = self._zk.get_partition_states(sorted(partitions))
        for tp, versioned in sorted(found.items()):
            record = PartitionLeadershipChanged(tp, leadership_from_zk(versioned))
            self._context.apply(record)
            execution.reloads.append(record)
        return set(found)


def sample(partitions: Iterable[TopicPartition], shown: int = 20) -> str:
    """The first partitions by name, and how many more: a log line stays short at any scale."""
    names = sorted(map(str, partitions))
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


class _Group:
    """Consecutive partition writes to make together: of one kind and fencing, each partition once."""

    def __init__(self) -> None:
        self._writes: list[PartitionWrite] = []
        self._partitions: set[TopicPartition] = set()

    def joins(self, effect: PartitionWrite) -> bool:
        if not self._writes:
            return True
        first = self._writes[0]
        return (
            type(effect) is type(first)
            and effect.controller_epoch_zk_version == first.controller_epoch_zk_version
            and effect.partition not in self._partitions
        )

    def add(self, effect: PartitionWrite) -> None:
        self._writes.append(effect)
        self._partitions.add(effect.partition)

    def take(self) -> list[PartitionWrite]:
        writes, self._writes, self._partitions = self._writes, [], set()
        return writes
