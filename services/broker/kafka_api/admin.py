"""Kafka's administration APIs on a broker's Kafka listener, at the versions `ADMIN_API_VERSIONS` lists.

CreateTopics, DeleteTopics, CreatePartitions, ElectLeaders, AlterPartitionReassignments,
ListPartitionReassignments, and DescribeConfigs, AlterConfigs and IncrementalAlterConfigs of topics
are forwarded to the active controller (the one this broker's
metadata cache names) as Odradek's own Admin sends them: the requests are built and read by
`services.clients.admin_requests` and sent through the clients' transport. The controller's checks
answer, with their error codes and messages; a standby controller's NOT_CONTROLLER and unreachable
controllers are retried with the then current controller until the request's timeout (at least
`request.timeout.ms`) runs out, and then REQUEST_TIMED_OUT answers what is left. Every call to the
controller runs in the loop's executor.

DeleteRecords is answered by the partitions' leader, this broker (NOT_LEADER_OR_FOLLOWER
otherwise): `ReplicaManager.delete_records` moves the log start offset, and the answer's low
watermark is the leader's new log start offset; followers move theirs on their next fetch.
DescribeLogDirs answers for this broker's own log dirs (`ReplicaManager.describe_log_dirs`), with
the total and usable bytes of each dir's volume from v4.

CreateTopics v5+ answers each created topic with its configs, described by the controller after
the creation. DescribeCluster is answered from the metadata cache, as Metadata is: the brokers'
Kafka listeners, and this broker as the controller (`controller_id`). Broker config resources are
described by this broker (`DynamicBrokerConfig`): under its id every key with its effective value
and source (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG or
DEFAULT_CONFIG, with the lower layers as synonyms; static-only keys read-only, passwords hidden),
under "" the cluster-wide dynamic defaults. Altering broker configs (this broker's id, another's,
or "") is forwarded to the controller as topic configs are, which refuses keys that cannot change
without a restart. Topic ids are not kept: a topic named only
by id is UNKNOWN_TOPIC_ID and responses carry the zero id.

With an authorizer, each resource needs Kafka's operation: CREATE (on the cluster or the topic) to
create a topic, DELETE to delete it or its records, ALTER to add partitions, DESCRIBE_CONFIGS and
ALTER_CONFIGS on the topic (on the cluster for broker configs), ALTER on the cluster to elect
leaders or reassign, DESCRIBE on the cluster to list reassignments, describe the cluster or its log
dirs. A refused resource answers TOPIC_AUTHORIZATION_FAILED or CLUSTER_AUTHORIZATION_FAILED and is
not forwarded.
"""

from __future__ import annotations

import asyncio
import shutil
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from services.broker.config import BrokerConfig
from services.broker.dynamic_config import DynamicBrokerConfig
from services.broker.metadata_cache import MetadataCache, MetadataSnapshot
from services.broker.replica_manager import ReplicaManager
from services.clients.admin_requests import (
    Answers,
    alter_configs_request,
    alter_partition_reassignments_request,
    checked,
    config_operations_request,
    create_partitions_request,
    create_topics_request,
    delete_topics_request,
    describe_configs_request,
    elect_leaders_request,
    list_partition_reassignments_request,
    parse_alter_configs,
    parse_alter_partition_reassignments,
    parse_create_partitions,
    parse_create_topics,
    parse_delete_topics,
    parse_describe_configs,
    parse_elect_leaders,
    parse_list_partition_reassignments,
)
from services.clients.admin_types import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    ConfigEntry,
    NewPartitions,
    NewTopic,
)
from services.clients.transport import CONTROLLER, ChannelPool, Deadline, call_with_retries
from services.common.errors import Errors, KafkaError
from services.common.kafka_wire import ApiRegistry, RequestContext, fields_of, kafka_error
from services.common.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from services.common.service import listener_tls
from services.common.topic_partition import TopicPartition

CREATE_TOPICS, DELETE_TOPICS, DELETE_RECORDS, DESCRIBE_CONFIGS, ALTER_CONFIGS = 19, 20, 21, 32, 33
CREATE_PARTITIONS = 37
ELECT_LEADERS, INCREMENTAL_ALTER_CONFIGS, DESCRIBE_CLUSTER = 43, 44, 60
ALTER_PARTITION_REASSIGNMENTS, LIST_PARTITION_REASSIGNMENTS = 45, 46
DESCRIBE_LOG_DIRS = 35

# API key -> (lowest, highest) version served: every version kio has of each, but
# AlterPartitionReassignments v1 (which may refuse replication factor changes; Kafka 2.8 has v0) and
# DescribeLogDirs v5 (which reports cordoned log dirs).
ADMIN_API_VERSIONS = {
    CREATE_TOPICS: (2, 7),
    DELETE_TOPICS: (1, 6),
    DELETE_RECORDS: (0, 2),
    DESCRIBE_CONFIGS: (1, 4),
    ALTER_CONFIGS: (0, 2),
    CREATE_PARTITIONS: (0, 3),
    ELECT_LEADERS: (0, 2),
    INCREMENTAL_ALTER_CONFIGS: (0, 1),
    DESCRIBE_CLUSTER: (0, 2),
    ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    LIST_PARTITION_REASSIGNMENTS: (0, 0),
    DESCRIBE_LOG_DIRS: (1, 4),
}
NO_TOPIC_ID = uuid.UUID(int=0)
BROKERS_ENDPOINT_TYPE = 1
RETRY_BACKOFF_MS = 100

K = TypeVar("K")
Outcome = tuple[int, str | None, Any]  # (error code, error message, value on success)
DENIED_TOPIC: Outcome = (Errors.TOPIC_AUTHORIZATION_FAILED, None, None)


def _ms(delta) -> int:
    return round(delta.total_seconds() * 1000)


def operation_ms(deadline: Deadline, timeout_ms: int) -> int:
    """The timeout the controller waits up to for an operation: what is left of the Kafka request's,
    or 0 (the controller's own default) when the request gives none."""
    return max(1, deadline.bound(timeout_ms)) if timeout_ms > 0 else 0


def controller_id(broker_id: int, snapshot: MetadataSnapshot) -> int:
    """The controller Kafka clients are told of: this broker, which forwards their admin requests, once
    its metadata lists it and a controller; -1 (none known yet) before, so that clients ask again."""
    live = broker_id in snapshot.brokers and snapshot.brokers[broker_id].kafka_host is not None
    return broker_id if live and snapshot.controller is not None else -1


class ControllerForwarder:
    """Sends admin requests to the active controller named in the metadata cache, through the
    clients' transport, retrying NOT_CONTROLLER and unreachable controllers. Blocking: run it in
    an executor."""

    def __init__(self, metadata_cache: MetadataCache, pool: ChannelPool, request_timeout_ms: int) -> None:
        self.metadata_cache = metadata_cache
        self.pool = pool
        self.request_timeout_ms = request_timeout_ms

    def forward(self, method: str, keys: list[K], make_request: Callable[[list[K], int], Any],
                answers: Callable[[Any], Answers], timeout_ms: int) -> dict[K, Outcome]:
        """Each key's outcome; keys a controller answered NOT_CONTROLLER are sent again."""
        pending, results = list(keys), {}

        def attempt(deadline: Deadline) -> None:
            response = self.call(method, make_request(pending, operation_ms(deadline, timeout_ms)), deadline)
            answered, retry = answers(response), []
            for key in pending:
                outcome = answered.get(
                    key, (Errors.UNKNOWN_SERVER_ERROR, f"the controller returned no result for {key}", None))
                if outcome[0] == Errors.NOT_CONTROLLER:
                    retry.append(key)
                else:
                    results[key] = outcome
            pending[:] = retry
            if retry:
                raise KafkaError(f"{method}: the controller moved", error=Errors.NOT_CONTROLLER)

        if keys:
            try:
                self.retrying(method, attempt, timeout_ms)
            except KafkaError as error:
                for key in pending:
                    results[key] = (error.code, str(error), None)
        return results

    def retrying(self, method: str, attempt: Callable[[Deadline], Any], timeout_ms: int) -> Any:
        deadline = Deadline(max(timeout_ms, self.request_timeout_ms))
        return call_with_retries(method, attempt, deadline, RETRY_BACKOFF_MS)

    def call(self, method: str, request: Any, deadline: Deadline) -> Any:
        """One call to the current controller; raises the KafkaError of a failed call or of the whole answer."""
        controller = self.metadata_cache.snapshot().controller
        if controller is None:
            raise KafkaError("no active controller is known yet", error=Errors.NOT_CONTROLLER)
        address = f"{controller.host}:{controller.port}"
        return checked(self.pool.call(address, CONTROLLER, method, request, max(1, deadline.remaining_ms())))


class KafkaAdminApis:
    """The admin API handlers of one broker; see the module docstring."""

    def __init__(self, broker_id: int, metadata_cache: MetadataCache, replica_manager: ReplicaManager,
                 config: BrokerConfig, dynamic_config: DynamicBrokerConfig | None = None) -> None:
        self.broker_id = broker_id
        self.dynamic_config = dynamic_config or DynamicBrokerConfig(broker_id, config)
        self.metadata_cache = metadata_cache
        self.replica_manager = replica_manager
        self.config = config
        self.pool = ChannelPool(config.request_timeout_ms, tls=listener_tls(config.listener, config))
        self.controller = ControllerForwarder(metadata_cache, self.pool, config.request_timeout_ms)

    def register(self, registry: ApiRegistry) -> None:
        handlers: dict[int, Callable] = {
            CREATE_TOPICS: self.create_topics, DELETE_TOPICS: self.delete_topics, DELETE_RECORDS: self.delete_records,
            DESCRIBE_CONFIGS: self.describe_configs, ALTER_CONFIGS: self.alter_configs,
            CREATE_PARTITIONS: self.create_partitions, ELECT_LEADERS: self.elect_leaders,
            INCREMENTAL_ALTER_CONFIGS: self.incremental_alter_configs, DESCRIBE_CLUSTER: self.describe_cluster,
            ALTER_PARTITION_REASSIGNMENTS: self.alter_partition_reassignments,
            LIST_PARTITION_REASSIGNMENTS: self.list_partition_reassignments,
            DESCRIBE_LOG_DIRS: self.describe_log_dirs,
        }
        for api_key, (low, high) in ADMIN_API_VERSIONS.items():
            registry.register(api_key, low, high, handlers[api_key])

    def close(self) -> None:
        self.pool.close()

    async def _blocking(self, call: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(None, call, *args)

    # ------------------------------------------------------------------ topics

    async def create_topics(self, request: Any, context: RequestContext) -> Any:
        names = [t.name for t in request.topics]
        outcomes = _duplicates(names, "topic")
        if not context.access.allowed(AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, log_denial=False):
            outcomes.update({n: DENIED_TOPIC for n in names if n not in outcomes
                             and not context.access.allowed(AclOperation.CREATE, ResourceType.TOPIC, n)})
        topics = {t.name: t for t in request.topics if t.name not in outcomes}

        def build(pending: list[str], timeout_ms: int) -> Any:
            return create_topics_request([_new_topic(topics[n]) for n in pending], timeout_ms, request.validate_only)

        if topics:
            outcomes.update(await self._blocking(self.controller.forward, "CreateTopics", list(topics), build,
                                                 parse_create_topics, _ms(request.timeout)))
        module = context.response_module
        configs: dict[str, Outcome] = {}
        created = [n for n in topics if outcomes[n][0] == Errors.NONE]
        if hasattr(module, "CreatableTopicConfigs") and created and not request.validate_only:
            configs = await self._blocking(self._topic_configs, created)
        results = []
        for name in dict.fromkeys(names):
            code, message, answer = outcomes[name]
            config_code, _, entries = configs.get(name, (Errors.NONE, None, {}))
            results.append(fields_of(
                module.CreatableTopicResult, name=name, topic_id=NO_TOPIC_ID, error_code=kafka_error(code),
                error_message=message or None, topic_config_error_code=kafka_error(config_code),
                num_partitions=answer.num_partitions if code == Errors.NONE else -1,
                replication_factor=answer.replication_factor if code == Errors.NONE else -1,
                configs=tuple(module.CreatableTopicConfigs(name=e.name, value=e.value, read_only=e.read_only,
                                                           config_source=e.source, is_sensitive=e.is_sensitive)
                              for e in (entries or {}).values())))
        return fields_of(context.response_type, topics=tuple(results))

    def _topic_configs(self, names: list[str]) -> dict[str, Outcome]:
        """Every config of each topic, as CreateTopics v5+ answers a created topic with."""
        return self.controller.forward("DescribeConfigs", names,
                                       lambda pending, _timeout_ms: describe_configs_request(TOPIC_RESOURCE, pending),
                                       lambda response: parse_describe_configs(response, TOPIC_RESOURCE),
                                       self.config.request_timeout_ms)

    async def delete_topics(self, request: Any, context: RequestContext) -> Any:
        module = context.response_module
        if hasattr(request, "topics"):  # v6: names or ids
            named = [t.name for t in request.topics if t.name is not None]
            by_id = [t.topic_id for t in request.topics if t.name is None]
        else:
            named, by_id = list(request.topic_names), []
        wanted = list(dict.fromkeys(named))  # a name given twice is deleted once, as Kafka 2.8 does
        outcomes = {n: DENIED_TOPIC for n in wanted
                    if not context.access.allowed(AclOperation.DELETE, ResourceType.TOPIC, n)}
        allowed = [n for n in wanted if n not in outcomes]
        if allowed:
            outcomes.update(await self._blocking(self.controller.forward, "DeleteTopics", allowed,
                                                 delete_topics_request, parse_delete_topics, _ms(request.timeout)))
        results = [fields_of(module.DeletableTopicResult, name=name, topic_id=NO_TOPIC_ID,
                             error_code=kafka_error(outcomes[name][0]), error_message=outcomes[name][1] or None)
                   for name in wanted]
        results += [fields_of(module.DeletableTopicResult, name=None, topic_id=topic_id,
                              error_code=kafka_error(Errors.UNKNOWN_TOPIC_ID),
                              error_message="Odradek names topics; it keeps no topic ids")
                    for topic_id in by_id]
        return fields_of(context.response_type, responses=tuple(results))

    async def create_partitions(self, request: Any, context: RequestContext) -> Any:
        names = [t.name for t in request.topics]
        outcomes = _duplicates(names, "topic")
        outcomes.update({n: DENIED_TOPIC for n in names if n not in outcomes
                         and not context.access.allowed(AclOperation.ALTER, ResourceType.TOPIC, n)})
        wanted = {t.name: NewPartitions(t.count, [tuple(a.broker_ids) for a in t.assignments]
                                        if t.assignments is not None else None)
                  for t in request.topics if t.name not in outcomes}

        def build(pending: list[str], timeout_ms: int) -> Any:
            return create_partitions_request({n: wanted[n] for n in pending}, timeout_ms, request.validate_only)

        if wanted:
            outcomes.update(await self._blocking(self.controller.forward, "CreatePartitions", list(wanted), build,
                                                 parse_create_partitions, _ms(request.timeout)))
        module = context.response_module
        return fields_of(context.response_type, results=tuple(
            module.CreatePartitionsTopicResult(name=name, error_code=kafka_error(outcomes[name][0]),
                                               error_message=outcomes[name][1] or None)
            for name in dict.fromkeys(names)))

    # ------------------------------------------------------------------ records

    async def delete_records(self, request: Any, context: RequestContext) -> Any:
        asked = [(topic.name, part.partition_index, part.offset) for topic in request.topics
                 for part in topic.partitions]

        denied = {name for name, _, _ in asked
                  if not context.access.allowed(AclOperation.DELETE, ResourceType.TOPIC, name)}

        def delete() -> list[tuple[str, int, int, int]]:
            return [(name, index, *((Errors.TOPIC_AUTHORIZATION_FAILED, -1) if name in denied
                                    else self.replica_manager.delete_records(name, index, offset)))
                    for name, index, offset in asked]

        module = context.response_module
        by_topic: dict[str, list] = {}
        for name, index, code, low_watermark in await self._blocking(delete):
            by_topic.setdefault(name, []).append(module.DeleteRecordsPartitionResult(
                partition_index=index, low_watermark=low_watermark, error_code=kafka_error(code)))
        return fields_of(context.response_type, topics=tuple(
            module.DeleteRecordsTopicResult(name=name, partitions=tuple(parts)) for name, parts in by_topic.items()))

    async def describe_log_dirs(self, request: Any, context: RequestContext) -> Any:
        wanted = None if request.topics is None else [TopicPartition(topic.topic, index) for topic in request.topics
                                                      for index in topic.partitions]

        if not context.access.allowed(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
            return fields_of(context.response_type, error_code=kafka_error(Errors.CLUSTER_AUTHORIZATION_FAILED),
                             results=())

        def describe() -> list[tuple[Any, Any]]:
            return [(described, _disk_usage(described.log_dir))
                    for described in self.replica_manager.describe_log_dirs(wanted)]

        module = context.response_module
        results = []
        for described, usage in await self._blocking(describe):
            by_topic: dict[str, list] = {}
            for tp, part in described.partitions.items():
                by_topic.setdefault(tp.topic, []).append(module.DescribeLogDirsPartition(
                    partition_index=tp.partition, partition_size=part.size_bytes, offset_lag=part.offset_lag,
                    is_future_key=part.is_future))
            results.append(fields_of(
                module.DescribeLogDirsResult, error_code=kafka_error(described.error_code), log_dir=described.log_dir,
                topics=tuple(module.DescribeLogDirsTopic(name=name, partitions=tuple(parts))
                             for name, parts in by_topic.items()),
                total_bytes=usage.total if usage else -1, usable_bytes=usage.free if usage else -1))
        return fields_of(context.response_type, error_code=kafka_error(Errors.NONE), results=tuple(results))

    # ------------------------------------------------------------------ leaders

    async def elect_leaders(self, request: Any, context: RequestContext) -> Any:
        election_type = getattr(request, "election_type", 0)
        partitions = None if request.topic_partitions is None else {
            t.topic: tuple(t.partitions) for t in request.topic_partitions}
        keys = None if partitions is None else [TopicPartition(topic, p) for topic, ps in partitions.items()
                                                for p in ps]

        def forward() -> tuple[int, str | None, dict[TopicPartition, Outcome]]:
            if keys is not None:
                return Errors.NONE, None, self.controller.forward(
                    "ElectLeaders", keys, lambda pending, timeout_ms: elect_leaders_request(
                        election_type, _by_topic(pending), timeout_ms),
                    parse_elect_leaders, _ms(request.timeout))
            try:  # every partition: the answer names them
                response = self.controller.retrying("ElectLeaders", lambda deadline: self.controller.call(
                    "ElectLeaders", elect_leaders_request(election_type, None, operation_ms(
                        deadline, _ms(request.timeout))), deadline), _ms(request.timeout))
            except KafkaError as error:
                return error.code, str(error), {}
            return Errors.NONE, None, dict(parse_elect_leaders(response))

        if context.access.allowed(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
            code, message, outcomes = await self._blocking(forward)
        else:
            code, message, outcomes = Errors.CLUSTER_AUTHORIZATION_FAILED, None, {}
        module = context.response_module
        by_topic: dict[str, list] = {}
        for tp, (part_code, part_message, _) in outcomes.items():
            by_topic.setdefault(tp.topic, []).append(module.PartitionResult(
                partition_id=tp.partition, error_code=kafka_error(part_code), error_message=part_message or None))
        if code != Errors.NONE and "error_code" not in context.response_type.__dataclass_fields__:
            by_topic = {}  # v0 has no request-level error: answer each partition asked for
            for topic, indexes in (partitions or {}).items():
                by_topic[topic] = [module.PartitionResult(partition_id=p, error_code=kafka_error(code),
                                                          error_message=message) for p in indexes]
        return fields_of(context.response_type, error_code=kafka_error(code), replica_election_results=tuple(
            module.ReplicaElectionResult(topic=topic, partition_result=tuple(parts))
            for topic, parts in by_topic.items()))

    # ------------------------------------------------------------------ reassignments

    async def alter_partition_reassignments(self, request: Any, context: RequestContext) -> Any:
        targets = {TopicPartition(t.name, p.partition_index): None if p.replicas is None else tuple(p.replicas)
                   for t in request.topics for p in t.partitions}
        if not context.access.allowed(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
            return fields_of(context.response_type, error_code=kafka_error(Errors.CLUSTER_AUTHORIZATION_FAILED),
                             error_message=None, responses=())
        outcomes = await self._blocking(lambda: self.controller.forward(
            "AlterPartitionReassignments", list(targets), lambda pending, timeout_ms:
                alter_partition_reassignments_request({tp: targets[tp] for tp in pending}, timeout_ms),
            parse_alter_partition_reassignments, _ms(request.timeout)))
        module = context.response_module
        by_topic: dict[str, list] = {}
        for tp in targets:
            code, message, _ = outcomes[tp]
            by_topic.setdefault(tp.topic, []).append(module.ReassignablePartitionResponse(
                partition_index=tp.partition, error_code=kafka_error(code), error_message=message or None))
        return fields_of(context.response_type, error_code=kafka_error(Errors.NONE), error_message=None,
                         responses=tuple(module.ReassignableTopicResponse(name=topic, partitions=tuple(parts))
                                         for topic, parts in by_topic.items()))

    async def list_partition_reassignments(self, request: Any, context: RequestContext) -> Any:
        wanted = None if request.topics is None else [
            TopicPartition(t.name, p) for t in request.topics for p in t.partition_indexes]

        def forward() -> tuple[int, str | None, dict]:
            try:
                response = self.controller.retrying(
                    "ListPartitionReassignments", lambda deadline: self.controller.call(
                        "ListPartitionReassignments", list_partition_reassignments_request(
                            wanted, operation_ms(deadline, _ms(request.timeout))), deadline), _ms(request.timeout))
            except KafkaError as error:
                return error.code, str(error), {}
            return Errors.NONE, None, parse_list_partition_reassignments(response)

        if context.access.allowed(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
            code, message, ongoing = await self._blocking(forward)
        else:
            code, message, ongoing = Errors.CLUSTER_AUTHORIZATION_FAILED, None, {}
        module = context.response_module
        by_topic: dict[str, list] = {}
        for tp, assignment in sorted(ongoing.items()):
            by_topic.setdefault(tp.topic, []).append(module.OngoingPartitionReassignment(
                partition_index=tp.partition, replicas=assignment.replicas,
                adding_replicas=assignment.adding_replicas, removing_replicas=assignment.removing_replicas))
        return fields_of(context.response_type, error_code=kafka_error(code), error_message=message,
                         topics=tuple(module.OngoingTopicReassignment(name=topic, partitions=tuple(parts))
                                      for topic, parts in by_topic.items()))

    # ------------------------------------------------------------------ cluster

    async def describe_cluster(self, request: Any, context: RequestContext) -> Any:
        snapshot = self.metadata_cache.snapshot()
        endpoint_type = getattr(request, "endpoint_type", BROKERS_ENDPOINT_TYPE)
        module = context.response_module
        if not context.access.allowed(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
            return fields_of(context.response_type, error_code=kafka_error(Errors.CLUSTER_AUTHORIZATION_FAILED),
                             error_message=None, endpoint_type=endpoint_type, cluster_id=snapshot.cluster_id or "",
                             controller_id=-1, brokers=())
        if endpoint_type != BROKERS_ENDPOINT_TYPE:
            return fields_of(context.response_type, error_code=kafka_error(Errors.INVALID_REQUEST),
                             error_message=f"a broker describes brokers (endpoint type {BROKERS_ENDPOINT_TYPE}), "
                                           f"not endpoint type {endpoint_type}",
                             endpoint_type=endpoint_type, cluster_id=snapshot.cluster_id or "", controller_id=-1,
                             brokers=())
        brokers = tuple(fields_of(module.DescribeClusterBroker, broker_id=node.node_id, host=node.kafka_host,
                                  port=node.kafka_port, rack=node.rack, is_fenced=False)
                        for node in sorted(snapshot.brokers.values(), key=lambda b: b.node_id)
                        if node.kafka_host is not None)
        return fields_of(context.response_type, error_code=kafka_error(Errors.NONE), error_message=None,
                         endpoint_type=endpoint_type, cluster_id=snapshot.cluster_id or "",
                         controller_id=controller_id(self.broker_id, snapshot), brokers=brokers)

    # ------------------------------------------------------------------ configs

    async def describe_configs(self, request: Any, context: RequestContext) -> Any:
        include_synonyms = request.include_synonyms
        include_documentation = getattr(request, "include_documentation", False)
        outcomes: dict[tuple[int, str], Outcome] = {}
        topics: dict[str, tuple[str, ...]] = {}
        for resource in request.resources:
            key = (resource.resource_type, resource.resource_name)
            keys = tuple(resource.configuration_keys or ())
            denial = _config_denial(context, AclOperation.DESCRIBE_CONFIGS, resource.resource_type,
                                    resource.resource_name)
            if denial is not None:
                outcomes[key] = denial
            elif resource.resource_type == TOPIC_RESOURCE:
                topics[resource.resource_name] = keys
            elif resource.resource_type == BROKER_RESOURCE:
                outcomes[key] = self._describe_broker(resource.resource_name, keys, include_synonyms,
                                                      include_documentation)
            else:
                outcomes[key] = _unserved_resource(resource.resource_type)

        def build(pending: list[str], _timeout_ms: int) -> Any:
            merged = None
            for names in _grouped_by(pending, topics):
                part = describe_configs_request(TOPIC_RESOURCE, names, topics[names[0]], include_synonyms,
                                                include_documentation)
                if merged is None:
                    merged = part
                else:
                    merged.resources.extend(part.resources)
            return merged

        described = {} if not topics else await self._blocking(
            self.controller.forward, "DescribeConfigs", list(topics), build,
            lambda response: parse_describe_configs(response, TOPIC_RESOURCE), self.config.request_timeout_ms)
        outcomes.update({(TOPIC_RESOURCE, name): outcome for name, outcome in described.items()})
        module = context.response_module
        results = []
        for resource in request.resources:
            code, message, entries = outcomes[(resource.resource_type, resource.resource_name)]
            results.append(fields_of(
                module.DescribeConfigsResult, error_code=kafka_error(code), error_message=message or None,
                resource_type=resource.resource_type, resource_name=resource.resource_name,
                configs=tuple(_config_result(module, entry, include_synonyms) for entry in (entries or {}).values())
                if code == Errors.NONE else ()))
        return fields_of(context.response_type, results=tuple(results))

    def _describe_broker(self, name: str, keys: tuple[str, ...], include_synonyms: bool,
                         include_documentation: bool) -> Outcome:
        try:
            return Errors.NONE, None, self.dynamic_config.describe(name, keys, include_synonyms,
                                                                   include_documentation)
        except KafkaError as exc:
            return exc.code, str(exc.args[0]), None

    async def alter_configs(self, request: Any, context: RequestContext) -> Any:
        def build_one(resource_type: int, name: str, resource: Any) -> Any:
            return alter_configs_request(resource_type, name, {c.name: c.value for c in resource.configs},
                                         request.validate_only)

        return await self._alter(request, context, "AlterConfigs", build_one)

    async def incremental_alter_configs(self, request: Any, context: RequestContext) -> Any:
        def build_one(resource_type: int, name: str, resource: Any) -> Any:
            return config_operations_request(resource_type, name, [(c.name, c.config_operation, c.value)
                                                                    for c in resource.configs], request.validate_only)

        return await self._alter(request, context, "IncrementalAlterConfigs", build_one)

    async def _alter(self, request: Any, context: RequestContext, method: str,
                     build_one: Callable[[int, str, Any], Any]) -> Any:
        keys = [(r.resource_type, r.resource_name) for r in request.resources]
        outcomes = _duplicates(keys, "resource")
        forwarded: dict[int, dict[str, Any]] = {TOPIC_RESOURCE: {}, BROKER_RESOURCE: {}}
        for resource in request.resources:
            key = (resource.resource_type, resource.resource_name)
            if key in outcomes:
                continue
            denial = _config_denial(context, AclOperation.ALTER_CONFIGS, resource.resource_type,
                                    resource.resource_name)
            if denial is not None:
                outcomes[key] = denial
            elif resource.resource_type in forwarded:
                forwarded[resource.resource_type][resource.resource_name] = resource
            else:
                outcomes[key] = _unserved_resource(resource.resource_type)
        for resource_type, resources in forwarded.items():
            if not resources:
                continue

            def build(pending: list[str], _timeout_ms: int, resource_type: int = resource_type,
                      resources: dict[str, Any] = resources) -> Any:
                merged = build_one(resource_type, pending[0], resources[pending[0]])
                for name in pending[1:]:
                    merged.resources.extend(build_one(resource_type, name, resources[name]).resources)
                return merged

            altered = await self._blocking(self.controller.forward, method, list(resources), build,
                                           parse_alter_configs, self.config.request_timeout_ms)
            outcomes.update({(resource_type, name): outcome for name, outcome in altered.items()})
        module = context.response_module
        return fields_of(context.response_type, responses=tuple(
            module.AlterConfigsResourceResponse(error_code=kafka_error(outcomes[key][0]),
                                                error_message=outcomes[key][1] or None,
                                                resource_type=key[0], resource_name=key[1])
            for key in dict.fromkeys(keys)))


def _config_denial(context: RequestContext, operation: AclOperation, resource_type: int,
                   name: str) -> Outcome | None:
    """A topic's configs need `operation` on the topic, a broker's on the cluster."""
    if resource_type == TOPIC_RESOURCE:
        return None if context.access.allowed(operation, ResourceType.TOPIC, name) else DENIED_TOPIC
    if resource_type == BROKER_RESOURCE and not context.access.allowed(operation, ResourceType.CLUSTER, CLUSTER_NAME):
        return Errors.CLUSTER_AUTHORIZATION_FAILED, None, None
    return None


def _disk_usage(path: str) -> Any:
    """The usage of the volume holding `path`, or None when it cannot be read."""
    try:
        return shutil.disk_usage(path)
    except OSError:
        return None


def _new_topic(topic: Any) -> NewTopic:
    assignment = {a.partition_index: tuple(a.broker_ids) for a in topic.assignments} or None
    return NewTopic(topic.name, topic.num_partitions, topic.replication_factor, assignment,
                    {c.name: c.value for c in topic.configs} or None)


def _duplicates(keys: Iterable[K], what: str) -> dict[K, Outcome]:
    """INVALID_REQUEST for every key the request names more than once (Kafka answers them so)."""
    seen: set[K] = set()
    repeated: dict[K, Outcome] = {}
    for key in keys:
        if key in seen:
            repeated[key] = (Errors.INVALID_REQUEST, f"the request names {what} {key} more than once", None)
        seen.add(key)
    return repeated


def _unserved_resource(resource_type: int) -> Outcome:
    return (Errors.INVALID_REQUEST, f"resource type {resource_type} is not served: Odradek serves topic "
                                    f"({TOPIC_RESOURCE}) and broker ({BROKER_RESOURCE}) configs", None)


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    grouped: dict[str, list[int]] = {}
    for tp in partitions:
        grouped.setdefault(tp.topic, []).append(tp.partition)
    return grouped


def _grouped_by(names: list[str], keys_of: Mapping[str, tuple[str, ...]]) -> list[list[str]]:
    """The names in groups that ask for the same config keys."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for name in names:
        groups.setdefault(keys_of[name], []).append(name)
    return list(groups.values())


def _config_result(module: Any, entry: ConfigEntry, include_synonyms: bool) -> Any:
    synonyms = tuple(module.DescribeConfigsSynonym(name=s.name, value=s.value, source=s.source)
                     for s in entry.synonyms) if include_synonyms else ()
    return fields_of(module.DescribeConfigsResourceResult, name=entry.name, value=entry.value,
                     read_only=entry.read_only, config_source=entry.source, is_sensitive=entry.is_sensitive,
                     synonyms=synonyms, config_type=entry.config_type, documentation=entry.documentation)
