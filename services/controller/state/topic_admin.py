"""CreateTopics, CreatePartitions and DeleteTopics: Kafka 2.8's checks and the resulting writes.

Each request topic gets either a plan (the assignment and the ZooKeeper write to make) or a
`KafkaError` with Kafka's error name. The controller itself reacts to the written znodes later
(TopicChange, PartitionModifications, TopicDeletion events), as Kafka's does.

CreateTopics: a name given twice is INVALID_REQUEST; -1 partitions / replication factor take
`num.partitions` / `default.replication.factor`; giving them together with an explicit assignment
is INVALID_REQUEST; then the name, the assignment (rack-aware over the registered brokers) and
the configs are checked. CreatePartitions: the topic must exist, not be queued for deletion
(INVALID_TOPIC_EXCEPTION) nor being reassigned (REASSIGNMENT_IN_PROGRESS), and grow. DeleteTopics:
TOPIC_DELETION_DISABLED unless `delete.topic.enable`; unknown topics are UNKNOWN_TOPIC_OR_PARTITION;
a topic already marked for deletion succeeds again.

A CreateTopics or CreatePartitions request that would add more than `MAX_PARTITIONS_PER_REQUEST`
partitions in all fails whole with POLICY_VIOLATION, as Kafka's KRaft controller refuses it, before
any assignment is computed: a typo of 2**31 - 1 partitions is refused at once instead of holding
the controller while it assigns them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from services.common.errors import Errors, KafkaError
from services.common.replica_assignment import (
    RandomSource,
    assign_replicas_to_brokers,
    broker_metadatas,
    new_partitions_assignment,
    validate_topic_assignment,
)
from services.controller.state.config import ControllerConfig
from services.controller.state.context import ControllerContext
from services.controller.state.effects import CreateTopic, CreateTopicDeletionMarker, UpdateTopicAssignment
from services.controller.state.topics import (
    reject_null_configs,
    validate_new_topic_name,
    validate_topic_configs,
)

NO_NUM_PARTITIONS = -1
NO_REPLICATION_FACTOR = -1
MAX_PARTITIONS_PER_REQUEST = 10_000


def _check_request_partitions(new_partitions: int) -> None:
    if new_partitions > MAX_PARTITIONS_PER_REQUEST:
        raise KafkaError(
            f"Excessively large number of partitions per request: {new_partitions} new partitions, "
            f"at most {MAX_PARTITIONS_PER_REQUEST}.",
            error=Errors.POLICY_VIOLATION,
        )


@dataclass(frozen=True)
class NewTopic:
    name: str
    num_partitions: int = NO_NUM_PARTITIONS
    replication_factor: int = NO_REPLICATION_FACTOR
    assignments: Mapping[int, Sequence[int]] = field(default_factory=dict)
    configs: Mapping[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class TopicCreation:
    topic: str
    assignment: dict[int, tuple[int, ...]]
    configs: dict[str, str]

    @property
    def num_partitions(self) -> int:
        return len(self.assignment)

    @property
    def replication_factor(self) -> int:
        return len(self.assignment[0])

    def effect(self) -> CreateTopic:
        return CreateTopic(self.topic, self.assignment, self.configs)


@dataclass(frozen=True)
class NewPartitions:
    """Grow `name` to `count` partitions; `assignments` lists the new partitions' replicas."""

    name: str
    count: int
    assignments: Sequence[Sequence[int]] | None = None


@dataclass(frozen=True)
class PartitionCreation:
    topic: str
    new_assignment: dict[int, tuple[int, ...]]
    full_assignment: dict[int, tuple[int, ...]]

    def effect(self) -> UpdateTopicAssignment:
        return UpdateTopicAssignment(self.topic, self.full_assignment)


def plan_topic_creations(
    topics: Sequence[NewTopic],
    context: ControllerContext,
    config: ControllerConfig,
    rand: RandomSource | None = None,
) -> dict[str, TopicCreation | KafkaError]:
    """Check each topic of a CreateTopics request; topics planned earlier in the same request count
    as existing for the later ones."""
    counts = Counter(t.name for t in topics)
    try:
        _check_request_partitions(sum(
            len(t.assignments) if t.assignments
            else config.num_partitions if t.num_partitions == NO_NUM_PARTITIONS else max(t.num_partitions, 0)
            for t in topics))
    except KafkaError as e:
        return {t.name: e for t in topics}
    existing = set(context.all_topics)
    results: dict[str, TopicCreation | KafkaError] = {}
    for topic in topics:
        if counts[topic.name] > 1:
            results[topic.name] = KafkaError(
                "Found multiple entries for this topic.", error=Errors.INVALID_REQUEST
            )
            continue
        try:
            plan = plan_topic_creation(topic, context, config, rand, existing)
        except KafkaError as e:
            results[topic.name] = e
            continue
        results[topic.name] = plan
        existing.add(topic.name)
    return results


def plan_topic_creation(
    topic: NewTopic,
    context: ControllerContext,
    config: ControllerConfig,
    rand: RandomSource | None = None,
    existing_topics: Iterable[str] | None = None,
) -> TopicCreation:
    existing = set(context.all_topics if existing_topics is None else existing_topics)
    if topic.name in existing:
        raise KafkaError(f"Topic '{topic.name}' already exists.", error=Errors.TOPIC_ALREADY_EXISTS)
    reject_null_configs(topic.configs)
    explicit = bool(topic.assignments)
    if explicit and (
        topic.num_partitions != NO_NUM_PARTITIONS or topic.replication_factor != NO_REPLICATION_FACTOR
    ):
        raise KafkaError(
            "Both numPartitions or replicationFactor and replicasAssignments were set. "
            "Both cannot be used at the same time.",
            error=Errors.INVALID_REQUEST,
        )
    if explicit:
        assignment = {p: tuple(replicas) for p, replicas in sorted(topic.assignments.items())}
    else:
        num_partitions = (
            config.num_partitions if topic.num_partitions == NO_NUM_PARTITIONS else topic.num_partitions
        )
        replication_factor = (
            config.default_replication_factor
            if topic.replication_factor == NO_REPLICATION_FACTOR
            else topic.replication_factor
        )
        brokers = broker_metadatas(context.live_or_shutting_down_brokers())
        assignment = assign_replicas_to_brokers(brokers, num_partitions, replication_factor, rand=rand)
    validate_new_topic_name(topic.name, existing)
    validate_topic_assignment(assignment)
    return TopicCreation(topic.name, assignment, validate_topic_configs(topic.configs))


def plan_partition_creations(
    requests: Sequence[NewPartitions], context: ControllerContext, rand: RandomSource | None = None
) -> dict[str, PartitionCreation | KafkaError]:
    counts = Counter(r.name for r in requests)
    try:
        _check_request_partitions(sum(
            max(r.count - len(context.topic_assignment(r.name)), 0) for r in requests))
    except KafkaError as e:
        return {r.name: e for r in requests}
    results: dict[str, PartitionCreation | KafkaError] = {}
    for request in requests:
        if counts[request.name] > 1:
            results[request.name] = KafkaError("Duplicate topic in request.", error=Errors.INVALID_REQUEST)
            continue
        try:
            results[request.name] = plan_partition_creation(request, context, rand)
        except KafkaError as e:
            results[request.name] = e
    return results


def plan_partition_creation(
    request: NewPartitions, context: ControllerContext, rand: RandomSource | None = None
) -> PartitionCreation:
    topic = request.name
    if context.is_topic_queued_for_deletion(topic):
        raise KafkaError("The topic is queued for deletion.", error=Errors.INVALID_TOPIC_EXCEPTION)
    partitions = context.partitions_for_topic(topic)
    if not partitions:
        raise KafkaError(f"The topic '{topic}' does not exist.", error=Errors.UNKNOWN_TOPIC_OR_PARTITION)
    if any(context.partition_full_replica_assignment(p).is_being_reassigned for p in partitions):
        raise KafkaError(
            f"A partition reassignment is in progress for the topic '{topic}'.",
            error=Errors.REASSIGNMENT_IN_PROGRESS,
        )
    existing = context.topic_assignment(topic)
    increment = request.count - len(existing)
    if increment < 0:
        raise KafkaError(
            f"Topic currently has {len(existing)} partitions, "
            f"which is higher than the requested {request.count}.",
            error=Errors.INVALID_PARTITIONS,
        )
    if increment == 0:
        raise KafkaError(f"Topic already has {len(existing)} partitions.", error=Errors.INVALID_PARTITIONS)
    brokers = broker_metadatas(context.live_or_shutting_down_brokers())
    explicit: dict[int, Sequence[int]] | None = None
    if request.assignments is not None:
        broker_ids = {b.broker_id for b in brokers}
        unknown = sorted({b for replicas in request.assignments for b in replicas} - broker_ids)
        if unknown:
            raise KafkaError(
                f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}.",
                error=Errors.INVALID_REPLICA_ASSIGNMENT,
            )
        if len(request.assignments) != increment:
            raise KafkaError(
                f"Increasing the number of partitions by {increment} but {len(request.assignments)} "
                "assignments provided.",
                error=Errors.INVALID_REPLICA_ASSIGNMENT,
            )
        explicit = {len(existing) + i: replicas for i, replicas in enumerate(request.assignments)}
    new = new_partitions_assignment(topic, existing, brokers, request.count, explicit, rand)
    return PartitionCreation(topic, new, {**existing, **new})


def plan_topic_deletions(
    topics: Iterable[str], context: ControllerContext, config: ControllerConfig
) -> dict[str, CreateTopicDeletionMarker | KafkaError]:
    results: dict[str, CreateTopicDeletionMarker | KafkaError] = {}
    for topic in topics:
        if not config.delete_topic_enable:
            results[topic] = KafkaError("Topic deletion is disabled.", error=Errors.TOPIC_DELETION_DISABLED)
        elif topic not in context.all_topics:
            results[topic] = KafkaError(
                f"Topic `{topic}` to delete does not exist", error=Errors.UNKNOWN_TOPIC_OR_PARTITION
            )
        else:
            results[topic] = CreateTopicDeletionMarker(topic)
    return results
