"""ControllerService protos to and from the core's types, and the one place errors become codes.

Requests become the core's inputs (`NewTopic`, `NewPartitions`, AlterIsr's leader/ISR per
partition, election partitions, reassignment targets); results (per topic or partition: a value or a `KafkaError`)
become responses in Kafka's shape. `kafka_error` maps any exception to the Kafka error answered
for it. Pure functions.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from services.common.errors import Errors, KafkaError
from services.common.pb.odradek.controller.v1 import controller_pb2 as pb
from services.common.shared_types import ReplicaAssignment
from services.common.topic_partition import TopicPartition
from services.controller.broker_requests import node
from services.controller.state.events import ElectionType
from services.controller.state.model import LeaderAndIsr
from services.controller.state.topic_admin import NewPartitions, NewTopic, TopicCreation
from services.controller.view import ControllerView

logger = logging.getLogger(__name__)


def kafka_error(error: BaseException) -> KafkaError:
    """The Kafka error to answer for `error` (an unexpected one is UNKNOWN_SERVER_ERROR, logged)."""
    if isinstance(error, KafkaError):
        return error
    if isinstance(error, TimeoutError):
        return KafkaError(str(error) or "The request timed out.", error=Errors.REQUEST_TIMED_OUT)
    logger.error("Unexpected error answering a controller request", exc_info=error)
    return KafkaError(f"Unexpected error: {error!r}")


def _error_fields(result: Any) -> tuple[int, str]:
    if isinstance(result, BaseException):
        error = kafka_error(result)
        return error.code, str(error.args[0]) if error.args else ""
    return Errors.NONE, ""


def _unique(names: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(names))


# --- topics -----------------------------------------------------------------------------------


def new_topics(request: pb.CreateTopicsRequest) -> tuple[NewTopic, ...]:
    return tuple(
        NewTopic(
            name=t.name,
            num_partitions=t.num_partitions,
            replication_factor=t.replication_factor,
            assignments={a.partition_index: tuple(a.broker_ids) for a in t.assignments},
            configs={c.name: c.value if c.HasField("value") else None for c in t.configs},
        )
        for t in request.topics
    )


def create_topics_response(
    names: Sequence[str], results: Mapping[str, TopicCreation | KafkaError]
) -> pb.CreateTopicsResponse:
    response = pb.CreateTopicsResponse()
    for name in _unique(names):
        result = results.get(name, KafkaError("No result for this topic."))
        code, message = _error_fields(result)
        entry = response.topics.add(name=name, error_code=code, error_message=message)
        if isinstance(result, TopicCreation):
            entry.num_partitions = result.num_partitions
            entry.replication_factor = result.replication_factor
        else:
            entry.num_partitions = -1
            entry.replication_factor = -1
    return response


def delete_topics_response(names: Sequence[str], results: Mapping[str, Any]) -> pb.DeleteTopicsResponse:
    response = pb.DeleteTopicsResponse()
    for name in _unique(names):
        code, message = _error_fields(results.get(name))
        response.responses.add(name=name, error_code=code, error_message=message)
    return response


def new_partitions(request: pb.CreatePartitionsRequest) -> tuple[NewPartitions, ...]:
    return tuple(
        NewPartitions(
            name=t.name,
            count=t.count,
            assignments=[tuple(a.broker_ids) for a in t.assignments] if t.assignments else None,
        )
        for t in request.topics
    )


def create_partitions_response(
    names: Sequence[str], results: Mapping[str, Any]
) -> pb.CreatePartitionsResponse:
    response = pb.CreatePartitionsResponse()
    for name in _unique(names):
        code, message = _error_fields(results.get(name, KafkaError("No result for this topic.")))
        response.results.add(name=name, error_code=code, error_message=message)
    return response


# --- cluster, brokers, ISRs -------------------------------------------------------------------


def describe_cluster_response(view: ControllerView) -> pb.DescribeClusterResponse:
    return pb.DescribeClusterResponse(
        cluster_id=view.cluster_id,
        controller_id=view.active_controller_id,
        brokers=[node(b) for b in view.brokers],
    )


def controlled_shutdown_response(remaining: Iterable[TopicPartition]) -> pb.ControlledShutdownResponse:
    response = pb.ControlledShutdownResponse()
    for partition in sorted(remaining):
        response.remaining_partitions.add(topic_name=partition.topic, partition_index=partition.partition)
    return response


def isrs_to_alter(request: pb.AlterIsrRequest) -> dict[TopicPartition, LeaderAndIsr]:
    """Each partition's requested state: the asking leader, its leader epoch, the new ISR and the
    state znode version it last saw."""
    return {
        TopicPartition(t.name, p.partition_index): LeaderAndIsr(
            request.broker_id, p.leader_epoch, tuple(p.new_isr), p.current_isr_version
        )
        for t in request.topics
        for p in t.partitions
    }


def alter_isr_response(results: Mapping[TopicPartition, LeaderAndIsr | KafkaError]) -> pb.AlterIsrResponse:
    response = pb.AlterIsrResponse()
    by_topic: dict[str, Any] = {}
    for partition, result in sorted(results.items()):
        topic = by_topic.get(partition.topic)
        if topic is None:
            topic = by_topic[partition.topic] = response.topics.add(name=partition.topic)
        code, _ = _error_fields(result)
        entry = topic.partitions.add(partition_index=partition.partition, error_code=code)
        if isinstance(result, LeaderAndIsr):
            entry.leader_id = result.leader
            entry.leader_epoch = result.leader_epoch
            entry.isr.extend(result.isr)
            entry.current_isr_version = result.zk_version
    return response


# --- leader elections -------------------------------------------------------------------------


def election_type(request: pb.ElectLeadersRequest) -> ElectionType:
    return ElectionType.UNCLEAN if request.election_type == pb.UNCLEAN else ElectionType.PREFERRED


def election_partitions(request: pb.ElectLeadersRequest) -> frozenset[TopicPartition] | None:
    """The partitions asked for; None for every partition (`all_partitions`)."""
    if request.all_partitions:
        return None
    return frozenset(TopicPartition(t.topic, p) for t in request.topic_partitions for p in t.partitions)


def elect_leaders_response(results: Mapping[TopicPartition, int | KafkaError]) -> pb.ElectLeadersResponse:
    response = pb.ElectLeadersResponse()
    by_topic: dict[str, Any] = {}
    for partition, result in sorted(results.items()):
        topic = by_topic.get(partition.topic)
        if topic is None:
            topic = by_topic[partition.topic] = response.replica_election_results.add(topic=partition.topic)
        code, message = _error_fields(result)
        topic.partition_result.add(partition_id=partition.partition, error_code=code, error_message=message)
    return response


# --- partition reassignments ------------------------------------------------------------------


def reassignments(request: pb.AlterPartitionReassignmentsRequest) -> dict[TopicPartition, tuple[int, ...] | None]:
    """Partition -> target replicas, or None to cancel."""
    return {
        TopicPartition(t.name, p.partition_index): None if p.cancel else tuple(p.replicas)
        for t in request.topics
        for p in t.partitions
    }


def alter_partition_reassignments_response(
    results: Mapping[TopicPartition, KafkaError | None],
) -> pb.AlterPartitionReassignmentsResponse:
    response = pb.AlterPartitionReassignmentsResponse()
    by_topic: dict[str, Any] = {}
    for partition, result in sorted(results.items()):
        topic = by_topic.get(partition.topic)
        if topic is None:
            topic = by_topic[partition.topic] = response.responses.add(name=partition.topic)
        code, message = _error_fields(result)
        topic.partitions.add(partition_index=partition.partition, error_code=code, error_message=message)
    return response


def listed_partitions(request: pb.ListPartitionReassignmentsRequest) -> frozenset[TopicPartition] | None:
    """The partitions asked about; None for all (`all_topics`)."""
    if request.all_topics:
        return None
    return frozenset(TopicPartition(t.name, p) for t in request.topics for p in t.partition_indexes)


def list_partition_reassignments_response(
    ongoing: Mapping[TopicPartition, ReplicaAssignment],
) -> pb.ListPartitionReassignmentsResponse:
    response = pb.ListPartitionReassignmentsResponse()
    by_topic: dict[str, Any] = {}
    for partition, assignment in sorted(ongoing.items()):
        topic = by_topic.get(partition.topic)
        if topic is None:
            topic = by_topic[partition.topic] = response.topics.add(name=partition.topic)
        topic.partitions.add(
            partition_index=partition.partition,
            replicas=assignment.replicas,
            adding_replicas=assignment.adding_replicas,
            removing_replicas=assignment.removing_replicas,
        )
    return response
