"""The admin client, as Kafka's Admin: topics, partitions, cluster, offsets, configs and consumer
groups (those live in `admin_groups`).

Topic, partition, cluster and config operations go to the active controller (found in the
metadata any broker serves). A standby answers NOT_CONTROLLER; that, an unknown controller and
unreachable or slow nodes are retried with fresh metadata every `retry.backoff.ms` until
`default.api.timeout.ms` (or the call's `timeout_ms`) runs out, and then REQUEST_TIMED_OUT is
raised. Topic listing and description use the Metadata call of any broker; `list_offsets` asks
each partition's leader.

Operations on several topics return {name: result}; with `raise_errors=True` (the default) the
first per-topic error, in the order asked, is raised as a `KafkaError` instead, so a one-topic
call raises that topic's error (TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS, ...).

    with Admin(bootstrap_servers="127.0.0.1:9092") as admin:
        admin.create_topics([NewTopic("events", num_partitions=6, replication_factor=3)])
        admin.wait_for_topic("events", timeout_s=30)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from services.clients.admin_groups import GroupAdminOps
from services.clients.admin_types import (
    OP_DELETE,
    OP_SET,
    TOPIC_RESOURCE,
    ClusterDescription,
    ConfigEntry,
    ConfigSynonym,
    CreateTopicResult,
    NewPartitions,
    NewTopic,
    TopicDescription,
)
from services.clients.channels import BROKER, CONTROLLER
from services.clients.cluster import Cluster, Node, TopicPartition
from services.clients.partition_requests import (
    READ_UNCOMMITTED,
    ListOffsetsResult,
    list_offsets_failure,
    list_offsets_request,
    offset_spec_timestamp,
    parse_list_offsets,
    read_call_retriable,
    read_retriable,
)
from services.clients.pooled_client import PooledClient
from services.clients.retry import Deadline, call_with_retries
from services.clients.routing import send_to_leaders
from services.common.errors import NONE, KafkaError, code_of, error_for_code
from services.common.pb.odradek.broker.v1 import broker_pb2
from services.common.pb.odradek.controller.v1 import controller_pb2 as pb

K = TypeVar("K")
NOT_CONTROLLER = code_of("NOT_CONTROLLER")
UNKNOWN_TOPIC_OR_PARTITION = code_of("UNKNOWN_TOPIC_OR_PARTITION")
UNKNOWN_SERVER_ERROR = code_of("UNKNOWN_SERVER_ERROR")
# One answer per key: (error code, error message, value on success).
Answers = Mapping[Any, tuple[int, str, Any]]


class Admin(GroupAdminOps, PooledClient):
    """Administers topics, partitions and configs; see the module docstring."""

    # ------------------------------------------------------------------ topics

    def create_topics(self, new_topics: Iterable[NewTopic], validate_only: bool = False, *,
                      timeout_ms: int | None = None,
                      raise_errors: bool = True) -> dict[str, CreateTopicResult | KafkaError]:
        topics = {t.name: t for t in new_topics}
        for name in topics:
            if not name:
                raise KafkaError(f"The given topic name '{name}' cannot be represented in a request.",
                                 error_name="INVALID_TOPIC_EXCEPTION")

        def request(names: list[str], timeout: int) -> pb.CreateTopicsRequest:
            return pb.CreateTopicsRequest(topics=[_creatable(topics[n]) for n in names], timeout_ms=timeout,
                                          validate_only=validate_only)

        def answers(response: pb.CreateTopicsResponse) -> Answers:
            return {t.name: (t.error_code, t.error_message,
                             CreateTopicResult(t.name, t.num_partitions, t.replication_factor))
                    for t in response.topics}

        return self._controller_op("CreateTopics", list(topics), request, answers, timeout_ms, raise_errors)

    def delete_topics(self, names: Iterable[str], *, timeout_ms: int | None = None,
                      raise_errors: bool = True) -> dict[str, None | KafkaError]:
        names = list(dict.fromkeys(names))

        def request(pending: list[str], timeout: int) -> pb.DeleteTopicsRequest:
            return pb.DeleteTopicsRequest(topic_names=pending, timeout_ms=timeout)

        def answers(response: pb.DeleteTopicsResponse) -> Answers:
            return {t.name: (t.error_code, t.error_message, None) for t in response.responses}

        try:
            return self._controller_op("DeleteTopics", names, request, answers, timeout_ms, raise_errors)
        finally:
            self.metadata.forget_topics(names)

    def create_partitions(self, new_partitions: Mapping[str, int | NewPartitions],
                          validate_only: bool = False, *, timeout_ms: int | None = None,
                          raise_errors: bool = True) -> dict[str, None | KafkaError]:
        """Grows each topic to its new total partition count."""
        wanted = {name: p if isinstance(p, NewPartitions) else NewPartitions(p)
                  for name, p in new_partitions.items()}

        def request(names: list[str], timeout: int) -> pb.CreatePartitionsRequest:
            topics = [pb.CreatePartitionsRequest.CreatePartitionsTopic(
                name=n, count=wanted[n].total_count,
                assignments=[pb.CreatePartitionsRequest.CreatePartitionsAssignment(broker_ids=list(ids))
                             for ids in wanted[n].new_assignments or ()])
                for n in names]
            return pb.CreatePartitionsRequest(topics=topics, timeout_ms=timeout, validate_only=validate_only)

        def answers(response: pb.CreatePartitionsResponse) -> Answers:
            return {t.name: (t.error_code, t.error_message, None) for t in response.results}

        return self._controller_op("CreatePartitions", list(wanted), request, answers, timeout_ms,
                                   raise_errors)

    def list_topics(self, include_internal: bool = False, *, timeout_ms: int | None = None) -> list[str]:
        """Every topic name, sorted; internal topics only when asked."""
        cluster = self._broker_metadata(broker_pb2.MetadataRequest(all_topics=True), timeout_ms)
        names = set(cluster.topics) | set(cluster.topic_errors)
        return sorted(n for n in names if include_internal or n not in cluster.internal_topics)

    def describe_topics(self, names: Iterable[str], *, timeout_ms: int | None = None,
                        raise_errors: bool = True) -> dict[str, TopicDescription | KafkaError]:
        """Partitions of each topic with leader, replicas, ISR and offline replicas."""
        names = list(dict.fromkeys(names))
        cluster = self._broker_metadata(broker_pb2.MetadataRequest(topics=names), timeout_ms)
        return _finish(names, _descriptions(cluster, names), raise_errors)

    def wait_for_topic(self, name: str, timeout_s: float = 30.0, *,
                       partitions: int | None = None) -> TopicDescription:
        """Polls metadata until the topic exists (with at least `partitions` partitions, when given),
        every partition has a live leader, and every live broker answers so (brokers learn of a
        new topic one by one); raises TimeoutError with the last state seen."""
        deadline = Deadline(timeout_s * 1000, self.clock)
        request = broker_pb2.MetadataRequest(topics=[name])
        last: object = "no answer yet"
        while True:
            try:
                cluster = self._broker_metadata(request, max(1, deadline.remaining_ms()))
                last = _descriptions(cluster, [name])[name]
                if isinstance(last, TopicDescription) and _all_led(last, partitions, set(cluster.nodes)):
                    lagging = self._brokers_not_knowing(cluster, name, partitions, request, deadline)
                    if not lagging:
                        return last
                    last = f"{last} (not yet known to brokers {lagging})"
            except KafkaError as error:
                last = error
            if deadline.expired:
                raise TimeoutError(f"topic {name!r} not ready within {timeout_s} s; last seen: {last}")
            self.clock.sleep_ms(min(self.config.retry_backoff_ms, deadline.remaining_ms()))

    def _brokers_not_knowing(self, cluster: Cluster, name: str, partitions: int | None,
                             request: broker_pb2.MetadataRequest, deadline: Deadline) -> list[int]:
        """Ids of the live brokers whose own metadata does not show `name` ready yet."""
        lagging = []
        for node_id, node in sorted(cluster.nodes.items()):
            try:
                answer = Cluster.from_response(self.pool.call(node.address, BROKER, "Metadata", request,
                                                              max(1, deadline.remaining_ms())))
                seen = _descriptions(answer, [name])[name]
                ready = isinstance(seen, TopicDescription) and _all_led(seen, partitions, set(cluster.nodes))
            except KafkaError:
                ready = False
            if not ready:
                lagging.append(node_id)
        return lagging

    # ------------------------------------------------------------------ cluster, offsets, configs

    def describe_cluster(self, *, timeout_ms: int | None = None) -> ClusterDescription:
        deadline = self._deadline(timeout_ms)
        response = call_with_retries(
            "DescribeCluster",
            lambda d: self._call_controller("DescribeCluster", lambda _t: pb.DescribeClusterRequest(), d),
            deadline, self.config.retry_backoff_ms, before_retry=self._controller_failed)
        nodes = tuple(sorted((Node.from_proto(b) for b in response.brokers), key=lambda n: n.node_id))
        return ClusterDescription(response.cluster_id or None, self.metadata.controller, nodes,
                                  response.controller_id)

    def list_offsets(self, specs: Mapping[TopicPartition, str | int], *,
                     isolation_level: int = READ_UNCOMMITTED, timeout_ms: int | None = None,
                     raise_errors: bool = True) -> dict[TopicPartition, ListOffsetsResult | KafkaError]:
        """Offsets for "earliest", "latest" or a timestamp in ms, asked of each partition's leader."""
        timestamps = {TopicPartition(*tp): offset_spec_timestamp(spec) for tp, spec in specs.items()}
        answers = send_to_leaders(
            self.metadata, self.pool, timestamps, method="ListOffsets",
            build_request=lambda tps: list_offsets_request({tp: timestamps[tp] for tp in tps},
                                                           isolation_level),
            parse_response=parse_list_offsets, failure_result=list_offsets_failure,
            deadline=self._deadline(timeout_ms), backoff_ms=self.config.retry_backoff_ms,
            call_timeout_ms=self.config.request_timeout_ms,
            retry_code=read_retriable, retry_call_error=read_call_retriable)
        results: dict[TopicPartition, ListOffsetsResult | KafkaError] = {
            tp: r if r.error_code == NONE else _error(r.error_code, f"list offsets of {tp}")
            for tp, r in answers.items()}
        return _finish(list(timestamps), results, raise_errors)

    def describe_configs(self, names: Iterable[str], *, resource_type: int = TOPIC_RESOURCE,
                         keys: Sequence[str] = (), include_synonyms: bool = False,
                         include_documentation: bool = False, timeout_ms: int | None = None,
                         raise_errors: bool = True) -> dict[str, dict[str, ConfigEntry] | KafkaError]:
        """Each resource's configs by name, with their sources."""
        def request(pending: list[str], _timeout: int) -> pb.DescribeConfigsRequest:
            resource = pb.DescribeConfigsRequest.DescribeConfigsResource
            return pb.DescribeConfigsRequest(
                resources=[resource(resource_type=resource_type, resource_name=n,
                                    configuration_keys=list(keys)) for n in pending],
                include_synonyms=include_synonyms, include_documentation=include_documentation)

        def answers(response: pb.DescribeConfigsResponse) -> Answers:
            return {r.resource_name: (r.error_code, r.error_message,
                                      {c.name: _config_entry(c) for c in r.configs})
                    for r in response.results if r.resource_type == resource_type}

        return self._controller_op("DescribeConfigs", list(dict.fromkeys(names)), request, answers,
                                   timeout_ms, raise_errors)

    def alter_configs(self, name: str, configs: Mapping[str, str | None], *,
                      resource_type: int = TOPIC_RESOURCE, validate_only: bool = False,
                      timeout_ms: int | None = None) -> None:
        """Replaces the resource's whole set of dynamic configs (keys left out revert to defaults)."""
        def request(_pending: list[str], _timeout: int) -> pb.AlterConfigsRequest:
            entries = [pb.AlterConfigsRequest.AlterableConfig(name=k, value=v) if v is not None
                       else pb.AlterConfigsRequest.AlterableConfig(name=k) for k, v in configs.items()]
            resource = pb.AlterConfigsRequest.AlterConfigsResource(
                resource_type=resource_type, resource_name=name, configs=entries)
            return pb.AlterConfigsRequest(resources=[resource], validate_only=validate_only)

        self._controller_op("AlterConfigs", [name], request, _alter_answers, timeout_ms, True)

    def incremental_alter_configs(self, name: str, changes: Mapping[str, str | None], *,
                                  resource_type: int = TOPIC_RESOURCE, validate_only: bool = False,
                                  timeout_ms: int | None = None) -> None:
        """Sets each key to its value, or deletes the key (back to its default) where the value is None."""
        def request(_pending: list[str], _timeout: int) -> pb.IncrementalAlterConfigsRequest:
            cls = pb.IncrementalAlterConfigsRequest.AlterableConfig
            entries = [cls(name=k, config_operation=OP_SET, value=v) if v is not None
                       else cls(name=k, config_operation=OP_DELETE) for k, v in changes.items()]
            return pb.IncrementalAlterConfigsRequest(
                resources=[pb.IncrementalAlterConfigsRequest.AlterConfigsResource(
                    resource_type=resource_type, resource_name=name, configs=entries)],
                validate_only=validate_only)

        self._controller_op("IncrementalAlterConfigs", [name], request, _alter_answers, timeout_ms, True)

    # ------------------------------------------------------------------ plumbing

    def _deadline(self, timeout_ms: float | None) -> Deadline:
        return Deadline(self.config.default_api_timeout_ms if timeout_ms is None else timeout_ms, self.clock)

    def _controller_failed(self, _error: KafkaError) -> None:
        self.metadata.request_update()

    def _call_controller(self, method: str, make_request: Callable[[int], Any], deadline: Deadline) -> Any:
        """One attempt: find the controller in (fresh enough) metadata and call it."""
        cluster = self.metadata.maybe_refresh(self.pool, max(1, deadline.remaining_ms()))
        if cluster.controller is None:
            self.metadata.request_update()
            raise KafkaError("no active controller is known yet", error_name="NOT_CONTROLLER")
        timeout = max(1, deadline.bound(self.config.request_timeout_ms))
        address = cluster.controller.address
        response = self.pool.call(address, CONTROLLER, method, make_request(timeout), timeout)
        if response.error_code != NONE:
            raise KafkaError.from_code(response.error_code, response.error_message)
        return response

    def _controller_op(self, method: str, keys: list[K], make_request: Callable[[list[K], int], Any],
                       answers: Callable[[Any], Answers], timeout_ms: int | None,
                       raise_errors: bool) -> dict[K, Any]:
        """Calls the controller for `keys`, retrying the keys answered NOT_CONTROLLER."""
        pending = list(keys)
        results: dict[K, Any] = {}

        def attempt(deadline: Deadline) -> None:
            response = self._call_controller(method, lambda timeout: make_request(pending, timeout), deadline)
            answered = answers(response)
            retry = []
            for key in pending:
                code, message, value = answered.get(
                    key, (UNKNOWN_SERVER_ERROR, f"the controller returned no result for {key}", None))
                if code == NOT_CONTROLLER:
                    retry.append(key)
                else:
                    results[key] = value if code == NONE else KafkaError.from_code(code, message)
            pending[:] = retry
            if retry:
                raise KafkaError(f"{method}: the controller moved", error_name="NOT_CONTROLLER")

        if keys:
            try:
                call_with_retries(method, attempt, self._deadline(timeout_ms), self.config.retry_backoff_ms,
                                  before_retry=self._controller_failed)
            except KafkaError as error:
                for key in pending:
                    results[key] = error
        return _finish(keys, results, raise_errors)

    def _broker_metadata(self, request: broker_pb2.MetadataRequest, timeout_ms: int | None) -> Cluster:
        """One Metadata call to any broker (least loaded first), retried; the answer as a Cluster."""
        def attempt(deadline: Deadline) -> broker_pb2.MetadataResponse:
            self.metadata.maybe_refresh(self.pool, max(1, deadline.remaining_ms()))
            return self.metadata.call_any_node(self.pool, "Metadata", request, deadline)

        response = call_with_retries("Metadata", attempt, self._deadline(timeout_ms),
                                     self.config.retry_backoff_ms, before_retry=self._controller_failed)
        return Cluster.from_response(response)


def _finish(keys: Iterable[K], results: dict[K, Any], raise_errors: bool) -> dict[K, Any]:
    if raise_errors:
        for key in keys:
            if isinstance(results.get(key), KafkaError):
                raise results[key]
    return results


def _error(code: int, context: str) -> KafkaError:
    return KafkaError.from_code(code, f"{context}: {error_for_code(code).description}")


def _descriptions(cluster: Cluster, names: Iterable[str]) -> dict[str, TopicDescription | KafkaError]:
    results: dict[str, TopicDescription | KafkaError] = {}
    for name in names:
        code = cluster.topic_errors.get(name, NONE if name in cluster.topics else UNKNOWN_TOPIC_OR_PARTITION)
        if code == UNKNOWN_TOPIC_OR_PARTITION:
            results[name] = KafkaError(f"Topic '{name}' not found.", error_name="UNKNOWN_TOPIC_OR_PARTITION")
        elif code != NONE:
            results[name] = _error(code, f"Topic '{name}'")
        else:
            results[name] = TopicDescription(name, name in cluster.internal_topics, cluster.topics[name])
    return results


def _all_led(description: TopicDescription, partitions: int | None, live: set[int]) -> bool:
    if not description.partitions or (partitions is not None and len(description.partitions) < partitions):
        return False
    return all(p.has_leader and p.leader in live for p in description.partitions)


def _creatable(topic: NewTopic) -> pb.CreateTopicsRequest.CreatableTopic:
    creatable = pb.CreateTopicsRequest.CreatableTopic(
        name=topic.name, num_partitions=topic.num_partitions, replication_factor=topic.replication_factor)
    for partition, broker_ids in sorted((topic.replica_assignment or {}).items()):
        creatable.assignments.add(partition_index=partition, broker_ids=list(broker_ids))
    for key, value in (topic.configs or {}).items():
        entry = creatable.configs.add(name=key)
        if value is not None:
            entry.value = str(value)
    return creatable


def _config_entry(c: pb.DescribeConfigsResponse.DescribeConfigsResourceResult) -> ConfigEntry:
    synonyms = tuple(ConfigSynonym(s.name, s.value if s.HasField("value") else None, s.source)
                     for s in c.synonyms)
    return ConfigEntry(c.name, c.value if c.HasField("value") else None, c.config_source, c.read_only,
                       c.is_sensitive, c.config_type,
                       c.documentation if c.HasField("documentation") else None, synonyms)


def _alter_answers(response: Any) -> Answers:
    return {r.resource_name: (r.error_code, r.error_message, None) for r in response.responses}
