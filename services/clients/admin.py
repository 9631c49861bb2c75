"""The admin client, as Kafka's Admin: topics, partitions, cluster, offsets, configs, consumer
groups (those live in `admin_groups`) and transactions (`admin_transactions`).

Topic, partition, cluster and config operations go to the active controller (found in the
metadata any broker serves). A standby answers NOT_CONTROLLER; that, an unknown controller and
unreachable or slow nodes are retried with fresh metadata every `retry.backoff.ms` until
`default.api.timeout.ms` (or the call's `timeout_ms`) runs out, and then REQUEST_TIMED_OUT is
raised. Topic listing and description use the Metadata call of any broker; `list_offsets` and
`delete_records` ask each partition's leader; `describe_log_dirs` asks each broker named;
`elect_leaders` and the partition reassignments ask the controller. The requests are built and
read by `admin_requests` (the controller's) and `partition_requests` (ListOffsets, DeleteRecords,
DescribeLogDirs); this class deals only in the types of
`admin_types` (and the shared `ReplicaAssignment`).

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
from services.clients.admin_requests import (
    Answers,
    alter_configs_request,
    alter_partition_reassignments_request,
    checked,
    create_partitions_request,
    create_topics_request,
    delete_topics_request,
    describe_cluster_request,
    describe_configs_request,
    elect_leaders_request,
    incremental_alter_configs_request,
    list_partition_reassignments_request,
    parse_alter_configs,
    parse_alter_partition_reassignments,
    parse_create_partitions,
    parse_create_topics,
    parse_delete_topics,
    parse_describe_cluster,
    parse_describe_configs,
    parse_elect_leaders,
    parse_list_partition_reassignments,
)
from services.clients.admin_transactions import TransactionAdminOps
from services.clients.admin_types import (
    TOPIC_RESOURCE,
    ClusterDescription,
    ConfigEntry,
    CreateTopicResult,
    LogDirDescription,
    NewPartitions,
    NewTopic,
    TopicDescription,
)
from services.clients.cluster import Cluster
from services.clients.metadata import metadata_request
from services.clients.partition_requests import (
    ListOffsetsResult,
    delete_records_failure,
    delete_records_request,
    describe_log_dirs_request,
    list_offsets_failure,
    list_offsets_request,
    offset_spec_timestamp,
    parse_delete_records,
    parse_describe_log_dirs,
    parse_list_offsets,
    read_call_retriable,
    read_retriable,
)
from services.clients.pooled_client import PooledClient
from services.clients.transport import (
    BROKER,
    CONTROLLER,
    Deadline,
    call_any_node,
    call_with_retries,
    send_to_leaders,
)
from services.common.errors import Errors, KafkaError, error_for_code
from services.common.shared_types import IsolationLevel, ReplicaAssignment
from services.common.topic_partition import TopicPartition

K = TypeVar("K")
ELECTION_TYPES = {"preferred": 0, "unclean": 1}  # ElectLeadersRequest.election_type


class Admin(GroupAdminOps, TransactionAdminOps, PooledClient):
    """Administers topics, partitions and configs; see the module docstring."""

    keeps_unknown_topics = False  # a topic is tracked only to route calls to its leaders

    # ------------------------------------------------------------------ topics

    def create_topics(self, new_topics: Iterable[NewTopic], validate_only: bool = False, *,
                      timeout_ms: int | None = None,
                      raise_errors: bool = True) -> dict[str, CreateTopicResult | KafkaError]:
        topics = {t.name: t for t in new_topics}
        for name in topics:
            if not name:
                raise KafkaError(f"The given topic name '{name}' cannot be represented in a request.",
                                 error=Errors.INVALID_TOPIC_EXCEPTION)

        def request(names: list[str], timeout: int) -> Any:
            return create_topics_request([topics[n] for n in names], timeout, validate_only)

        return self._controller_op("CreateTopics", list(topics), request, parse_create_topics, timeout_ms,
                                   raise_errors)

    def delete_topics(self, names: Iterable[str], *, timeout_ms: int | None = None,
                      raise_errors: bool = True) -> dict[str, None | KafkaError]:
        names = list(dict.fromkeys(names))
        try:
            return self._controller_op("DeleteTopics", names, delete_topics_request, parse_delete_topics,
                                       timeout_ms, raise_errors)
        finally:
            self.metadata.forget_topics(names)

    def create_partitions(self, new_partitions: Mapping[str, int | NewPartitions],
                          validate_only: bool = False, *, timeout_ms: int | None = None,
                          raise_errors: bool = True) -> dict[str, None | KafkaError]:
        """Grows each topic to its new total partition count."""
        wanted = {name: p if isinstance(p, NewPartitions) else NewPartitions(p)
                  for name, p in new_partitions.items()}

        def request(names: list[str], timeout: int) -> Any:
            return create_partitions_request({n: wanted[n] for n in names}, timeout, validate_only)

        return self._controller_op("CreatePartitions", list(wanted), request, parse_create_partitions,
                                   timeout_ms, raise_errors)

    def list_topics(self, include_internal: bool = False, *, timeout_ms: int | None = None) -> list[str]:
        """Every topic name, sorted; internal topics only when asked."""
        cluster = self._broker_metadata(metadata_request(None), timeout_ms)
        names = set(cluster.topics) | set(cluster.topic_errors)
        return sorted(n for n in names if include_internal or n not in cluster.internal_topics)

    def describe_topics(self, names: Iterable[str], *, timeout_ms: int | None = None,
                        raise_errors: bool = True) -> dict[str, TopicDescription | KafkaError]:
        """Partitions of each topic with leader, replicas, ISR and offline replicas."""
        names = list(dict.fromkeys(names))
        cluster = self._broker_metadata(metadata_request(names), timeout_ms)
        return _finish(names, _descriptions(cluster, names), raise_errors)

    def wait_for_topic(self, name: str, timeout_s: float = 30.0, *,
                       partitions: int | None = None) -> TopicDescription:
        """Polls metadata until the topic exists (with at least `partitions` partitions, when given),
        every partition has a live leader, and every live broker answers so (brokers learn of a
        new topic one by one); raises TimeoutError with the last state seen."""
        deadline = Deadline(timeout_s * 1000, self.clock)
        request = metadata_request([name])
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
                             request: Any, deadline: Deadline) -> list[int]:
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
        response = call_with_retries(
            "DescribeCluster",
            lambda d: self._call_controller("DescribeCluster", lambda _t: describe_cluster_request(), d),
            self._deadline(timeout_ms), self.config.retry_backoff_ms, before_retry=self._controller_failed)
        return parse_describe_cluster(response, self.metadata.controller)

    def list_offsets(self, specs: Mapping[TopicPartition, str | int], *,
                     isolation_level: int = IsolationLevel.READ_UNCOMMITTED, timeout_ms: int | None = None,
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
            retry_code=read_retriable, retry_call_error=read_call_retriable, unknown_is_final=True)
        results: dict[TopicPartition, ListOffsetsResult | KafkaError] = {
            tp: r if r.error_code == Errors.NONE else _error(r.error_code, f"list offsets of {tp}")
            for tp, r in answers.items()}
        return _finish(list(timestamps), results, raise_errors)

    def delete_records(self, offsets: Mapping[TopicPartition, int], *, timeout_ms: int | None = None,
                       raise_errors: bool = True) -> dict[TopicPartition, int | KafkaError]:
        """Deletes each partition's records before its offset (-1: its high watermark), asking the
        leaders; each result is the partition's new low watermark (log start offset)."""
        wanted = {TopicPartition(*tp): offset for tp, offset in offsets.items()}
        # moving a log start offset again to the same place changes nothing: retried as reads are
        answers = send_to_leaders(
            self.metadata, self.pool, wanted, method="DeleteRecords",
            build_request=lambda tps: delete_records_request({tp: wanted[tp] for tp in tps},
                                                             self.config.request_timeout_ms),
            parse_response=parse_delete_records, failure_result=delete_records_failure,
            deadline=self._deadline(timeout_ms), backoff_ms=self.config.retry_backoff_ms,
            call_timeout_ms=self.config.request_timeout_ms,
            retry_code=read_retriable, retry_call_error=read_call_retriable, unknown_is_final=True)
        results: dict[TopicPartition, int | KafkaError] = {
            tp: low if code == Errors.NONE else _error(code, f"delete records of {tp}")
            for tp, (code, low) in answers.items()}
        return _finish(list(wanted), results, raise_errors)

    def describe_log_dirs(self, broker_ids: Iterable[int], *, timeout_ms: int | None = None,
                          raise_errors: bool = True) -> dict[int, dict[str, LogDirDescription] | KafkaError]:
        """Each broker's log dirs, {broker id: {log dir path: LogDirDescription}}, asked of the broker;
        an id not among the live brokers is BROKER_NOT_AVAILABLE."""
        ids = list(dict.fromkeys(broker_ids))
        deadline = self._deadline(timeout_ms)
        results: dict[int, dict[str, LogDirDescription] | KafkaError] = {}
        for broker_id in ids:
            def attempt(deadline: Deadline, broker_id: int = broker_id) -> Any:
                node = self.metadata.maybe_refresh(self.pool, max(1, deadline.remaining_ms())).nodes.get(broker_id)
                if node is None:  # perhaps newer than the cached metadata
                    node = self.metadata.refresh(self.pool, max(1, deadline.remaining_ms())).nodes.get(broker_id)
                if node is None:
                    raise KafkaError(f"broker {broker_id} is not a live broker", error=Errors.BROKER_NOT_AVAILABLE)
                return self.pool.call(node.address, BROKER, "DescribeLogDirs", describe_log_dirs_request(),
                                      max(1, min(deadline.remaining_ms(), self.config.request_timeout_ms)))
            try:
                results[broker_id] = parse_describe_log_dirs(call_with_retries(
                    "DescribeLogDirs", attempt, deadline, self.config.retry_backoff_ms,
                    before_retry=lambda _error: self.metadata.request_update()))
            except KafkaError as error:
                results[broker_id] = error
        return _finish(ids, results, raise_errors)

    def elect_leaders(self, election_type: str, partitions: Iterable[TopicPartition] | None = None, *,
                      timeout_ms: int | None = None) -> dict[TopicPartition, KafkaError | None]:
        """A "preferred" or "unclean" leader election by the controller for `partitions` (None: every
        partition); {partition: None when elected, else its KafkaError} (ELECTION_NOT_NEEDED when
        the leader already is the one the election would choose)."""
        kind = ELECTION_TYPES.get(election_type.lower())
        if kind is None:
            raise ValueError(f"election type must be 'preferred' or 'unclean', not {election_type!r}")
        by_topic: dict[str, list[int]] | None = None
        if partitions is not None:
            by_topic = {}
            for tp in sorted({TopicPartition(*tp) for tp in partitions}):
                by_topic.setdefault(tp.topic, []).append(tp.partition)
        response = call_with_retries(
            "ElectLeaders",
            lambda d: self._call_controller(
                "ElectLeaders", lambda timeout: elect_leaders_request(kind, by_topic, timeout), d),
            self._deadline(timeout_ms), self.config.retry_backoff_ms, before_retry=self._controller_failed)
        return {tp: None if code == Errors.NONE else KafkaError.from_code(code, message)
                for tp, (code, message, _) in parse_elect_leaders(response).items()}

    def alter_partition_reassignments(
            self, reassignments: Mapping[TopicPartition, Sequence[int] | None], *,
            timeout_ms: int | None = None) -> dict[TopicPartition, KafkaError | None]:
        """Moves each partition to its target replicas (the first the preferred leader), or cancels its
        reassignment for None (back to the original replicas); {partition: None when accepted, else
        its KafkaError: INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS,
        UNKNOWN_TOPIC_OR_PARTITION}. The move itself goes on once new replicas catch up."""
        targets = {TopicPartition(*tp): None if r is None else list(r) for tp, r in reassignments.items()}
        response = call_with_retries(
            "AlterPartitionReassignments",
            lambda d: self._call_controller(
                "AlterPartitionReassignments",
                lambda timeout: alter_partition_reassignments_request(targets, timeout), d),
            self._deadline(timeout_ms), self.config.retry_backoff_ms, before_retry=self._controller_failed)
        return {tp: None if code == Errors.NONE else KafkaError.from_code(code, message)
                for tp, (code, message, _) in parse_alter_partition_reassignments(response).items()}

    def list_partition_reassignments(
            self, partitions: Iterable[TopicPartition] | None = None, *,
            timeout_ms: int | None = None) -> dict[TopicPartition, ReplicaAssignment]:
        """The partitions (of `partitions`, or all) being reassigned: all their replicas, and those
        being added and removed."""
        wanted = None if partitions is None else [TopicPartition(*tp) for tp in partitions]
        response = call_with_retries(
            "ListPartitionReassignments",
            lambda d: self._call_controller(
                "ListPartitionReassignments",
                lambda timeout: list_partition_reassignments_request(wanted, timeout), d),
            self._deadline(timeout_ms), self.config.retry_backoff_ms, before_retry=self._controller_failed)
        return parse_list_partition_reassignments(response)

    def describe_configs(self, names: Iterable[str], *, resource_type: int = TOPIC_RESOURCE,
                         keys: Sequence[str] = (), include_synonyms: bool = False,
                         include_documentation: bool = False, timeout_ms: int | None = None,
                         raise_errors: bool = True) -> dict[str, dict[str, ConfigEntry] | KafkaError]:
        """Each resource's configs by name, with their sources."""
        def request(pending: list[str], _timeout: int) -> Any:
            return describe_configs_request(resource_type, pending, keys, include_synonyms, include_documentation)

        return self._controller_op("DescribeConfigs", list(dict.fromkeys(names)), request,
                                   lambda response: parse_describe_configs(response, resource_type),
                                   timeout_ms, raise_errors)

    def alter_configs(self, name: str, configs: Mapping[str, str | None], *,
                      resource_type: int = TOPIC_RESOURCE, validate_only: bool = False,
                      timeout_ms: int | None = None) -> None:
        """Replaces the resource's whole set of dynamic configs (keys left out revert to defaults)."""
        self._controller_op("AlterConfigs", [name],
                            lambda _pending, _timeout: alter_configs_request(resource_type, name, configs,
                                                                             validate_only),
                            parse_alter_configs, timeout_ms, True)

    def incremental_alter_configs(self, name: str, changes: Mapping[str, str | None], *,
                                  resource_type: int = TOPIC_RESOURCE, validate_only: bool = False,
                                  timeout_ms: int | None = None) -> None:
        """Sets each key to its value, or deletes the key (back to its default) where the value is None."""
        self._controller_op("IncrementalAlterConfigs", [name],
                            lambda _pending, _timeout: incremental_alter_configs_request(
                                resource_type, name, changes, validate_only),
                            parse_alter_configs, timeout_ms, True)

    # ------------------------------------------------------------------ plumbing

    def _controller_failed(self, _error: KafkaError) -> None:
        self.metadata.request_update()

    def _call_controller(self, method: str, make_request: Callable[[int], Any], deadline: Deadline) -> Any:
        """One attempt: find the controller in (fresh enough) metadata and call it."""
        cluster = self.metadata.maybe_refresh(self.pool, max(1, deadline.remaining_ms()))
        if cluster.controller is None:
            self.metadata.request_update()
            raise KafkaError("no active controller is known yet", error=Errors.NOT_CONTROLLER)
        timeout = max(1, deadline.bound(self.config.request_timeout_ms))
        address = cluster.controller.address
        return checked(self.pool.call(address, CONTROLLER, method, make_request(timeout), timeout))

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
                    key, (Errors.UNKNOWN_SERVER_ERROR, f"the controller returned no result for {key}", None))
                if code == Errors.NOT_CONTROLLER:
                    retry.append(key)
                else:
                    results[key] = value if code == Errors.NONE else KafkaError.from_code(code, message)
            pending[:] = retry
            if retry:
                raise KafkaError(f"{method}: the controller moved", error=Errors.NOT_CONTROLLER)

        if keys:
            try:
                call_with_retries(method, attempt, self._deadline(timeout_ms), self.config.retry_backoff_ms,
                                  before_retry=self._controller_failed)
            except KafkaError as error:
                for key in pending:
                    results[key] = error
        return _finish(keys, results, raise_errors)

    def _broker_metadata(self, request: Any, timeout_ms: int | None) -> Cluster:
        """One Metadata call to any broker (least loaded first), retried; the answer as a Cluster.
        The cache only names the nodes to ask, so it is filled once and not refreshed first."""
        def attempt(deadline: Deadline) -> Any:
            if self.metadata.cluster.is_bootstrap:
                self.metadata.maybe_refresh(self.pool, max(1, deadline.remaining_ms()))
            return call_any_node(self.metadata, self.pool, "Metadata", request, deadline)

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
        code = cluster.topic_errors.get(name, Errors.NONE if name in cluster.topics
                                        else Errors.UNKNOWN_TOPIC_OR_PARTITION)
        if code == Errors.UNKNOWN_TOPIC_OR_PARTITION:
            results[name] = KafkaError(f"Topic '{name}' not found.", error=Errors.UNKNOWN_TOPIC_OR_PARTITION)
        elif code != Errors.NONE:
            results[name] = _error(code, f"Topic '{name}'")
        else:
            results[name] = TopicDescription(name, name in cluster.internal_topics, cluster.topics[name])
    return results


def _all_led(description: TopicDescription, partitions: int | None, live: set[int]) -> bool:
    if not description.partitions or (partitions is not None and len(description.partitions) < partitions):
        return False
    return all(p.has_leader and p.leader in live for p in description.partitions)

