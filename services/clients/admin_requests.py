"""The controller's admin requests (CreateTopics, DeleteTopics, CreatePartitions, DescribeCluster,
ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments, DescribeConfigs, AlterConfigs,
IncrementalAlterConfigs): building them from the admin client's types (`admin_types`) and reading
their answers back into them.

An answer about several topics or config resources is read as `Answers`: {name: (error code,
error message, value on success)}, so the admin client can send again the names a standby
controller answered NOT_CONTROLLER and return or raise the others. An error the controller put on
a whole answer is raised by `checked`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from services.clients.admin_types import (
    OP_DELETE,
    OP_SET,
    ClusterDescription,
    ConfigEntry,
    ConfigSynonym,
    CreateTopicResult,
    NewPartitions,
    NewTopic,
)
from services.clients.cluster import Node
from services.common.config import INT_MAX, SHORT_MAX
from services.common.errors import Errors, KafkaError
from services.common.pb.odradek.controller.v1 import controller_pb2 as pb
from services.common.shared_types import ReplicaAssignment
from services.common.topic_partition import TopicPartition

# One answer per name: (error code, error message, value on success).
Answers = Mapping[Any, tuple[int, str, Any]]


def checked(response: Any) -> Any:
    """The controller's answer; raises the KafkaError it carries for the request as a whole."""
    if response.error_code != Errors.NONE:
        raise KafkaError.from_code(response.error_code, response.error_message)
    return response


# --------------------------------------------------------------------------------------------- topics

def create_topics_request(topics: Iterable[NewTopic], timeout_ms: int,
                          validate_only: bool = False) -> pb.CreateTopicsRequest:
    return pb.CreateTopicsRequest(topics=[_creatable(t) for t in topics], timeout_ms=timeout_ms,
                                  validate_only=validate_only)


def _creatable(topic: NewTopic) -> pb.CreateTopicsRequest.CreatableTopic:
    if not -1 <= topic.num_partitions <= INT_MAX:
        raise KafkaError(f"{topic.name}: {topic.num_partitions} partitions is out of range",
                         error=Errors.INVALID_PARTITIONS)
    if not -1 <= topic.replication_factor <= SHORT_MAX:
        raise KafkaError(f"{topic.name}: replication factor {topic.replication_factor} is out of range",
                         error=Errors.INVALID_REPLICATION_FACTOR)
    creatable = pb.CreateTopicsRequest.CreatableTopic(
        name=topic.name, num_partitions=topic.num_partitions, replication_factor=topic.replication_factor)
    for partition, broker_ids in sorted((topic.replica_assignment or {}).items()):
        creatable.assignments.add(partition_index=partition, broker_ids=list(broker_ids))
    for key, value in (topic.configs or {}).items():
        entry = creatable.configs.add(name=key)
        if value is not None:
            entry.value = str(value)
    return creatable


def parse_create_topics(response: pb.CreateTopicsResponse) -> Answers:
    return {t.name: (t.error_code, t.error_message, CreateTopicResult(t.name, t.num_partitions, t.replication_factor))
            for t in response.topics}


def delete_topics_request(names: Sequence[str], timeout_ms: int) -> pb.DeleteTopicsRequest:
    return pb.DeleteTopicsRequest(topic_names=list(names), timeout_ms=timeout_ms)


def parse_delete_topics(response: pb.DeleteTopicsResponse) -> Answers:
    return {t.name: (t.error_code, t.error_message, None) for t in response.responses}


def create_partitions_request(partitions: Mapping[str, NewPartitions], timeout_ms: int,
                              validate_only: bool = False) -> pb.CreatePartitionsRequest:
    """Grows each named topic to its `NewPartitions.total_count`, placing new partitions when given."""
    topic = pb.CreatePartitionsRequest.CreatePartitionsTopic
    assignment = pb.CreatePartitionsRequest.CreatePartitionsAssignment
    topics = [topic(name=name, count=new.total_count,
                    assignments=[assignment(broker_ids=list(ids)) for ids in new.new_assignments or ()])
              for name, new in partitions.items()]
    return pb.CreatePartitionsRequest(topics=topics, timeout_ms=timeout_ms, validate_only=validate_only)


def parse_create_partitions(response: pb.CreatePartitionsResponse) -> Answers:
    return {t.name: (t.error_code, t.error_message, None) for t in response.results}


# --------------------------------------------------------------------------------------------- cluster

def describe_cluster_request() -> pb.DescribeClusterRequest:
    return pb.DescribeClusterRequest()


def parse_describe_cluster(response: pb.DescribeClusterResponse, controller: Node | None) -> ClusterDescription:
    """The cluster as the controller describes it; `controller` is the node that answered."""
    nodes = tuple(sorted((Node.from_proto(b) for b in response.brokers), key=lambda n: n.node_id))
    return ClusterDescription(response.cluster_id or None, controller, nodes, response.controller_id)


# --------------------------------------------------------------------------------------------- leaders

def elect_leaders_request(election_type: int, partitions: Mapping[str, Sequence[int]] | None,
                          timeout_ms: int) -> pb.ElectLeadersRequest:
    """An election (0 preferred, 1 unclean) for the given partitions of each topic, or for every
    partition when `partitions` is None."""
    if partitions is None:
        return pb.ElectLeadersRequest(election_type=election_type, all_partitions=True, timeout_ms=timeout_ms)
    topics = [pb.ElectLeadersRequest.TopicPartitions(topic=topic, partitions=list(indexes))
              for topic, indexes in partitions.items()]
    return pb.ElectLeadersRequest(election_type=election_type, topic_partitions=topics, timeout_ms=timeout_ms)


def parse_elect_leaders(response: pb.ElectLeadersResponse) -> Answers:
    """{TopicPartition: (error code, message, None)}; ELECTION_NOT_NEEDED where the preferred replica leads."""
    return {TopicPartition(r.topic, p.partition_id): (p.error_code, p.error_message, None)
            for r in response.replica_election_results for p in r.partition_result}


# --------------------------------------------------------------------------------------------- reassignments

def alter_partition_reassignments_request(targets: Mapping[TopicPartition, Sequence[int] | None],
                                          timeout_ms: int) -> pb.AlterPartitionReassignmentsRequest:
    """A target replica list per partition, or None to cancel its reassignment."""
    request = pb.AlterPartitionReassignmentsRequest(timeout_ms=timeout_ms)
    by_topic: dict[str, Any] = {}
    for tp, replicas in sorted(targets.items()):
        topic = by_topic.get(tp.topic)
        if topic is None:
            topic = by_topic[tp.topic] = request.topics.add(name=tp.topic)
        if replicas is None:
            topic.partitions.add(partition_index=tp.partition, cancel=True)
        else:
            topic.partitions.add(partition_index=tp.partition, replicas=list(replicas))
    return request


def parse_alter_partition_reassignments(response: pb.AlterPartitionReassignmentsResponse) -> Answers:
    """{TopicPartition: (error code, message, None)}."""
    return {TopicPartition(t.name, p.partition_index): (p.error_code, p.error_message, None)
            for t in response.responses for p in t.partitions}


def list_partition_reassignments_request(partitions: Iterable[TopicPartition] | None,
                                         timeout_ms: int) -> pb.ListPartitionReassignmentsRequest:
    """For these partitions, or every one when `partitions` is None."""
    if partitions is None:
        return pb.ListPartitionReassignmentsRequest(all_topics=True, timeout_ms=timeout_ms)
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(set(partitions)):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    topics = [pb.ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics(name=t, partition_indexes=p)
              for t, p in by_topic.items()]
    return pb.ListPartitionReassignmentsRequest(topics=topics, timeout_ms=timeout_ms)


def parse_list_partition_reassignments(
        response: pb.ListPartitionReassignmentsResponse) -> dict[TopicPartition, ReplicaAssignment]:
    return {TopicPartition(t.name, p.partition_index):
            ReplicaAssignment(tuple(p.replicas), tuple(p.adding_replicas), tuple(p.removing_replicas))
            for t in response.topics for p in t.partitions}


# --------------------------------------------------------------------------------------------- configs

def describe_configs_request(resource_type: int, names: Iterable[str], keys: Sequence[str] = (),
                             include_synonyms: bool = False,
                             include_documentation: bool = False) -> pb.DescribeConfigsRequest:
    resource = pb.DescribeConfigsRequest.DescribeConfigsResource
    return pb.DescribeConfigsRequest(
        resources=[resource(resource_type=resource_type, resource_name=n, configuration_keys=list(keys))
                   for n in names],
        include_synonyms=include_synonyms, include_documentation=include_documentation)


def parse_describe_configs(response: pb.DescribeConfigsResponse, resource_type: int) -> Answers:
    """{resource name: (error code, message, {config name: ConfigEntry})} of the resources of `resource_type`."""
    return {r.resource_name: (r.error_code, r.error_message, {c.name: _config_entry(c) for c in r.configs})
            for r in response.results if r.resource_type == resource_type}


def _config_entry(c: pb.DescribeConfigsResponse.DescribeConfigsResourceResult) -> ConfigEntry:
    synonyms = tuple(ConfigSynonym(s.name, s.value if s.HasField("value") else None, s.source)
                     for s in c.synonyms)
    return ConfigEntry(c.name, c.value if c.HasField("value") else None, c.config_source, c.read_only,
                       c.is_sensitive, c.config_type,
                       c.documentation if c.HasField("documentation") else None, synonyms)


def alter_configs_request(resource_type: int, name: str, configs: Mapping[str, str | None],
                          validate_only: bool = False) -> pb.AlterConfigsRequest:
    """Replaces the resource's whole set of dynamic configs; a None value sends the key without one."""
    config = pb.AlterConfigsRequest.AlterableConfig
    entries = [config(name=k, value=v) if v is not None else config(name=k) for k, v in configs.items()]
    resource = pb.AlterConfigsRequest.AlterConfigsResource(resource_type=resource_type, resource_name=name,
                                                           configs=entries)
    return pb.AlterConfigsRequest(resources=[resource], validate_only=validate_only)


def incremental_alter_configs_request(resource_type: int, name: str, changes: Mapping[str, str | None],
                                      validate_only: bool = False) -> pb.IncrementalAlterConfigsRequest:
    """Sets each key to its value, or deletes it where the value is None."""
    return config_operations_request(
        resource_type, name, [(k, OP_SET, v) if v is not None else (k, OP_DELETE, None) for k, v in changes.items()],
        validate_only)


def config_operations_request(resource_type: int, name: str, operations: Iterable[tuple[str, int, str | None]],
                              validate_only: bool = False) -> pb.IncrementalAlterConfigsRequest:
    """An incremental alter of one resource: (key, operation, value) each, operations as `admin_types`'
    OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT."""
    config = pb.IncrementalAlterConfigsRequest.AlterableConfig
    entries = [config(name=k, config_operation=op, value=v) if v is not None else config(name=k, config_operation=op)
               for k, op, v in operations]
    resource = pb.IncrementalAlterConfigsRequest.AlterConfigsResource(
        resource_type=resource_type, resource_name=name, configs=entries)
    return pb.IncrementalAlterConfigsRequest(resources=[resource], validate_only=validate_only)


def parse_alter_configs(response: pb.AlterConfigsResponse | pb.IncrementalAlterConfigsResponse) -> Answers:
    """Either alter answer, as {resource name: (error code, message, None)}."""
    return {r.resource_name: (r.error_code, r.error_message, None) for r in response.responses}
