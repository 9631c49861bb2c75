"""Produce, Fetch, ListOffsets, Metadata, OffsetForLeaderEpoch, InitProducerId, FindCoordinator,
ListGroups, DescribeProducers, ListTransactions and SaslHandshake over Kafka's protocol, at the
versions `API_VERSIONS` lists (each one this module fills every field of). Record batches stay the
bytes they arrived as and are fetched as stored.

Metadata answers with each live broker's Kafka listener, then each coordinator's (see
`coordinator_lookup`), and names this broker as the controller:
Kafka clients send admin requests to the controller, and a broker forwards them (`admin`, whose
APIs `register` adds when given). On a PLAINTEXT listener SaslHandshake is answered
UNSUPPORTED_SASL_MECHANISM (a SASL_PLAINTEXT listener answers it itself). FindCoordinator names
the owning coordinator's Kafka listener (librdkafka also takes a served FindCoordinator as the
sign that a broker takes LZ4); ListGroups answers no group and ListTransactions no transaction,
since the coordinators, which Kafka clients ask too (an admin client lists transactions on every
node), hold them all.
DescribeProducers answers the producer state of the partitions this broker hosts, as leader or
follower (NOT_LEADER_OR_FOLLOWER for the others), as the gRPC call does and as Kafka's
`kafka-transactions.sh find-hanging` asks a broker about all of its replicas.

With an authorizer (`context.access`), Produce needs WRITE on each topic and on its transactional
id, Fetch READ (a follower's CLUSTER_ACTION on the cluster), ListOffsets DESCRIBE,
OffsetForLeaderEpoch DESCRIBE (or CLUSTER_ACTION on the cluster, as followers have), Metadata
DESCRIBE (and CREATE, on the cluster or the topic, to create one), DescribeProducers READ; refused
partitions answer TOPIC_AUTHORIZATION_FAILED and are not handled, and Metadata of every topic lists
only those the principal may describe.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from services.broker.fetch_session_cache import FINAL_EPOCH
from services.broker.handling import DEFAULT_PARTITION_MAX_BYTES, RequestHandling, TopicView
from services.broker.kafka_api.admin import KafkaAdminApis, controller_id
from services.broker.replica_fetch import FetchPartition
from services.common.coordinator_lookup import kafka_coordinator_nodes, kafka_find_coordinator
from services.common.errors import Errors
from services.common.kafka_wire import ApiRegistry, RequestContext, fields_of, kafka_error
from services.common.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from services.common.security.authorizer import init_producer_id_denied
from services.common.shared_types import NO_TIMESTAMP, IsolationLevel
from services.common.topic_partition import TopicPartition
from services.common.zk.coordinator_directory import DirectorySnapshot

# how long a Metadata request waits, after the broker starts, for the controller's first UpdateMetadata
FIRST_METADATA_WAIT_S = 10.0
PRODUCE, FETCH, LIST_OFFSETS, METADATA, FIND_COORDINATOR, LIST_GROUPS = 0, 1, 2, 3, 10, 16
SASL_HANDSHAKE, INIT_PRODUCER_ID, OFFSET_FOR_LEADER_EPOCH, DESCRIBE_PRODUCERS = 17, 22, 23, 61
LIST_TRANSACTIONS = 66

# API key -> (lowest, highest) version served. Fetch stops at 12 (13 names topics by id), Produce at
# 11 (12 is transactions' KIP-890), ListOffsets at 6 (7 asks for the largest timestamp's offset),
# InitProducerId at 4 (5 is KIP-890).
API_VERSIONS = {
    PRODUCE: (3, 11),
    FETCH: (4, 12),
    LIST_OFFSETS: (1, 6),
    METADATA: (0, 12),
    FIND_COORDINATOR: (0, 4),
    LIST_GROUPS: (0, 4),
    OFFSET_FOR_LEADER_EPOCH: (2, 4),
    INIT_PRODUCER_ID: (0, 4),
    DESCRIBE_PRODUCERS: (0, 0),
    LIST_TRANSACTIONS: (0, 1),
    SASL_HANDSHAKE: (0, 1),
}
NO_TOPIC_ID = uuid.UUID(int=0)
# topic ids in Metadata v10+ and Fetch v13+: Odradek names topics, so it gives the zero id


def _ms(delta) -> int:
    return round(delta.total_seconds() * 1000)


class BrokerKafkaApis:
    def __init__(self, broker_id: int, handling: RequestHandling, admin: KafkaAdminApis | None = None,
                 coordinators: Callable[[], DirectorySnapshot] = DirectorySnapshot) -> None:
        self.broker_id = broker_id
        self.coordinators = coordinators
        self.admin = admin
        self.handling = handling
        self.replica_manager = handling.replica_manager
        self.metadata_cache = handling.metadata_cache

    def register(self, registry: ApiRegistry) -> None:
        handlers: dict[int, Callable] = {
            PRODUCE: self.produce, FETCH: self.fetch, LIST_OFFSETS: self.list_offsets,
            METADATA: self.metadata, FIND_COORDINATOR: self.find_coordinator, LIST_GROUPS: self.list_groups,
            OFFSET_FOR_LEADER_EPOCH: self.offset_for_leader_epoch,
            INIT_PRODUCER_ID: self.init_producer_id, DESCRIBE_PRODUCERS: self.describe_producers,
            LIST_TRANSACTIONS: self.list_transactions, SASL_HANDSHAKE: self.sasl_handshake,
        }
        for api_key, (low, high) in API_VERSIONS.items():
            registry.register(api_key, low, high, handlers[api_key])
        if self.admin is not None:
            self.admin.register(registry)

    # ------------------------------------------------------------------ produce

    async def produce(self, request: Any, context: RequestContext) -> Any:
        entries: dict[TopicPartition, bytes] = {}
        for topic in request.topic_data:
            for part in topic.partition_data:
                entries[TopicPartition(topic.name, part.index)] = part.records or b""
        access = context.access
        transactional_id = getattr(request, "transactional_id", None)
        if transactional_id and not access.allowed(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                                                   transactional_id):
            denied = dict.fromkeys(entries, Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        else:
            denied = {key: Errors.TOPIC_AUTHORIZATION_FAILED for key in entries
                      if not access.allowed(AclOperation.WRITE, ResourceType.TOPIC, key.topic)}
        outcome = await self.handling.produce(request.acks, _ms(request.timeout),
                                              {k: v for k, v in entries.items() if k not in denied})
        if request.acks == 0:
            return None
        module = context.response_module
        by_topic: dict[str, list] = {}
        for key in entries:
            result = outcome.results.get(key)
            if key in denied:
                code, base_offset, append_time, start_offset = denied[key], -1, NO_TIMESTAMP, -1
                message, record_errors = None, ()
            elif result is None:
                code, base_offset, append_time, start_offset = outcome.missing_code, -1, NO_TIMESTAMP, -1
                message, record_errors = outcome.missing_message, ()
            else:
                code, base_offset, append_time = result.error_code, result.base_offset, result.log_append_time_ms
                start_offset, message = result.log_start_offset, result.error_message
                record_errors = result.record_errors
            extra = {}
            if (code in (Errors.NOT_LEADER_OR_FOLLOWER, Errors.FENCED_LEADER_EPOCH)
                    and hasattr(module, "LeaderIdAndEpoch")):
                leader = self.handling.current_leader(*key)
                if leader is not None:
                    extra["current_leader"] = module.LeaderIdAndEpoch(leader_id=leader[0], leader_epoch=leader[1])
            by_topic.setdefault(key.topic, []).append(fields_of(
                module.PartitionProduceResponse, index=key.partition, error_code=kafka_error(code),
                base_offset=base_offset,
                log_append_time=None if append_time < 0 else datetime.fromtimestamp(append_time / 1000, UTC),
                log_start_offset=start_offset, error_message=message or None,
                record_errors=tuple(module.BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=m)
                                    for i, m in record_errors) if hasattr(module, "BatchIndexAndErrorMessage") else (),
                **extra))
        return fields_of(context.response_type, responses=tuple(
            module.TopicProduceResponse(name=name, partition_responses=tuple(parts))
            for name, parts in by_topic.items()))

    # ------------------------------------------------------------------ fetch

    async def fetch(self, request: Any, context: RequestContext) -> Any:
        partitions = [FetchPartition(topic.topic, part.partition, part.fetch_offset,
                                     part.partition_max_bytes or DEFAULT_PARTITION_MAX_BYTES,
                                     getattr(part, "current_leader_epoch", -1))
                      for topic in request.topics for part in topic.partitions]
        denied = self._fetch_denied(request.replica_id, {p.topic for p in partitions}, context)
        partitions = [p for p in partitions if p.topic not in denied]
        read_committed = request.isolation_level == IsolationLevel.READ_COMMITTED
        outcome = await self.handling.fetch(
            replica_id=request.replica_id, max_wait_ms=_ms(request.max_wait), min_bytes=request.min_bytes,
            max_bytes=request.max_bytes, partitions=partitions, read_committed=read_committed,
            session_id=getattr(request, "session_id", 0),
            session_epoch=getattr(request, "session_epoch", FINAL_EPOCH),
            forgotten=[(topic.topic, index) for topic in getattr(request, "forgotten_topics_data", ())
                       for index in topic.partitions])
        module = context.response_module
        has_top_level_error = "error_code" in context.response_type.__dataclass_fields__
        if outcome.results is None:
            if has_top_level_error:
                return fields_of(context.response_type, error_code=kafka_error(outcome.error_code), responses=())
            # before sessions (v4-v6) there is no request-level error: each partition carries it
            results = {(p.topic, p.partition): None for p in partitions}
        else:
            results = outcome.results
        denied_partitions = {(topic.topic, part.partition): None for topic in request.topics if topic.topic in denied
                             for part in topic.partitions}
        by_topic: dict[str, list] = {}
        for (topic, index), result in {**results, **denied_partitions}.items():
            if topic in denied:
                code, high_watermark, start_offset, last_stable, records, aborted = (
                    Errors.TOPIC_AUTHORIZATION_FAILED, -1, -1, -1, b"", ())
            elif result is None:
                code, high_watermark, start_offset, last_stable, records, aborted = (
                    outcome.error_code, -1, -1, -1, b"", ())
            else:
                code, high_watermark, start_offset = result.error_code, result.high_watermark, result.log_start_offset
                last_stable, records, aborted = result.last_stable_offset, result.records, result.aborted_transactions
            extra = {}
            if code and "current_leader" in module.PartitionData.__dataclass_fields__:
                leader = self.handling.current_leader(topic, index)
                if leader is not None:
                    extra["current_leader"] = module.LeaderIdAndEpoch(leader_id=leader[0], leader_epoch=leader[1])
            by_topic.setdefault(topic, []).append(fields_of(
                module.PartitionData, partition_index=index, error_code=kafka_error(code),
                high_watermark=high_watermark, last_stable_offset=last_stable, log_start_offset=start_offset,
                aborted_transactions=tuple(module.AbortedTransaction(producer_id=t.producer_id,
                                                                     first_offset=t.first_offset) for t in aborted)
                if read_committed else None,
                preferred_read_replica=-1, records=records, **extra))
        return fields_of(context.response_type, error_code=kafka_error(Errors.NONE), session_id=outcome.session_id,
                         responses=tuple(module.FetchableTopicResponse(topic=name, partitions=tuple(parts))
                                         for name, parts in by_topic.items()))

    @staticmethod
    def _fetch_denied(replica_id: int, topics: set[str], context: RequestContext) -> set[str]:
        """Topics the request may not read: a follower (replica id >= 0) needs CLUSTER_ACTION on the
        cluster for all of them, a consumer READ on each."""
        access = context.access
        if replica_id >= 0:
            return set() if access.allowed(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME) else topics
        return {t for t in topics if not access.allowed(AclOperation.READ, ResourceType.TOPIC, t)}

    # ------------------------------------------------------------------ offsets

    async def list_offsets(self, request: Any, context: RequestContext) -> Any:
        module = context.response_module
        read_committed = getattr(request, "isolation_level", 0) == IsolationLevel.READ_COMMITTED
        topics = []
        for topic in request.topics:
            parts = []
            allowed = context.access.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name)
            for part in topic.partitions:
                if not allowed:
                    parts.append(fields_of(module.ListOffsetsPartitionResponse, partition_index=part.partition_index,
                                           error_code=kafka_error(Errors.TOPIC_AUTHORIZATION_FAILED), timestamp=-1,
                                           offset=-1, leader_epoch=-1))
                    continue
                result = self.replica_manager.list_offset(
                    topic.name, part.partition_index, part.timestamp, getattr(part, "current_leader_epoch", -1),
                    request.replica_id, read_committed)
                parts.append(fields_of(module.ListOffsetsPartitionResponse, partition_index=part.partition_index,
                                       error_code=kafka_error(result.error_code), timestamp=result.timestamp,
                                       offset=result.offset, leader_epoch=result.leader_epoch))
            topics.append(module.ListOffsetsTopicResponse(name=topic.name, partitions=tuple(parts)))
        return fields_of(context.response_type, topics=tuple(topics))

    async def offset_for_leader_epoch(self, request: Any, context: RequestContext) -> Any:
        module = context.response_module
        # a follower's or a consumer's (KIP-320): CLUSTER_ACTION on the cluster, else DESCRIBE on each topic
        access = context.access
        if access.allowed(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME, log_denial=False):
            denied = set()
        else:
            denied = {t.topic for t in request.topics
                      if not access.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, t.topic)}
        topics = []
        for topic in request.topics:
            parts = []
            for part in topic.partitions:
                if topic.topic in denied:
                    parts.append(module.EpochEndOffset(error_code=kafka_error(Errors.TOPIC_AUTHORIZATION_FAILED),
                                                       partition=part.partition, leader_epoch=-1, end_offset=-1))
                    continue
                error, epoch, end_offset = self.replica_manager.offset_for_leader_epoch(
                    topic.topic, part.partition, part.current_leader_epoch, part.leader_epoch)
                parts.append(module.EpochEndOffset(error_code=kafka_error(error), partition=part.partition,
                                                   leader_epoch=epoch, end_offset=end_offset))
            topics.append(module.OffsetForLeaderTopicResult(topic=topic.topic, partitions=tuple(parts)))
        return fields_of(context.response_type, topics=tuple(topics))

    # ------------------------------------------------------------------ metadata

    async def metadata(self, request: Any, context: RequestContext) -> Any:
        if not self.metadata_cache.initialized:  # restarted: the controller's first UpdateMetadata is due
            await asyncio.get_running_loop().run_in_executor(
                None, self.metadata_cache.wait_initialized, FIRST_METADATA_WAIT_S)
        snapshot = self.metadata_cache.snapshot()
        names = None if request.topics is None else [t.name for t in request.topics if t.name is not None]
        if context.api_version == 0 and not names:
            names = None  # version 0 asks for every topic with an empty list
        allow_auto_create = getattr(request, "allow_auto_topic_creation", True)
        access = context.access
        denied: dict[str, int] = {}
        if names:
            denied = {n: Errors.TOPIC_AUTHORIZATION_FAILED for n in names
                      if not access.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, n)}
            if allow_auto_create and not access.allowed(AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME,
                                                        log_denial=False):
                denied.update({n: Errors.TOPIC_AUTHORIZATION_FAILED for n in names
                               if n not in snapshot.partitions and n not in denied
                               and not access.allowed(AclOperation.CREATE, ResourceType.TOPIC, n)})
            names = [n for n in names if n not in denied]
        if names and allow_auto_create:  # may ask the controller to create topics: not on the loop
            views = await asyncio.get_running_loop().run_in_executor(
                None, self.handling.topic_views, snapshot, names, True)
        elif names == [] and denied:
            views = []
        else:
            views = self.handling.topic_views(snapshot, names, False)
        if names is None:  # every topic: those the principal may describe
            views = [v for v in views if access.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, v.name,
                                                        log_denial=False)]
        views += [TopicView(name, code, False, ()) for name, code in denied.items()]
        module = context.response_module
        brokers = tuple(fields_of(module.MetadataResponseBroker, node_id=node.node_id, host=node.kafka_host,
                                  port=node.kafka_port, rack=node.rack)
                        for node in sorted(snapshot.brokers.values(), key=lambda b: b.node_id)
                        if node.kafka_host is not None)
        brokers += tuple(fields_of(module.MetadataResponseBroker, node_id=node_id, host=host, port=port, rack=None)
                         for node_id, host, port in kafka_coordinator_nodes(self.coordinators()))
        topics = tuple(fields_of(
            module.MetadataResponseTopic, error_code=kafka_error(view.error_code), name=view.name,
            topic_id=NO_TOPIC_ID, is_internal=view.is_internal,
            partitions=tuple(fields_of(module.MetadataResponsePartition, error_code=kafka_error(p.error_code),
                                       partition_index=p.partition_index, leader_id=p.leader_id,
                                       leader_epoch=p.leader_epoch, replica_nodes=p.replica_nodes,
                                       isr_nodes=p.isr_nodes, offline_replicas=p.offline_replicas)
                             for p in view.partitions)) for view in views)
        return fields_of(context.response_type, brokers=brokers, cluster_id=snapshot.cluster_id or None,
                         controller_id=controller_id(self.broker_id, snapshot), topics=topics)

    # ------------------------------------------------------------------ coordinators

    async def find_coordinator(self, request: Any, context: RequestContext) -> Any:
        return kafka_find_coordinator(self.coordinators(), request, context)

    async def list_groups(self, request: Any, context: RequestContext) -> Any:
        """A broker coordinates no group: the coordinators, nodes of their own, answer theirs."""
        return fields_of(context.response_type, error_code=kafka_error(Errors.NONE), groups=())

    async def list_transactions(self, request: Any, context: RequestContext) -> Any:
        """A broker coordinates no transaction: the coordinators answer theirs."""
        return fields_of(context.response_type, error_code=kafka_error(Errors.NONE), unknown_state_filters=(),
                         transaction_states=())

    # ------------------------------------------------------------------ producer ids, SASL

    async def init_producer_id(self, request: Any, context: RequestContext) -> Any:
        denied = init_producer_id_denied(request.transactional_id, context.access)
        if denied is not None:
            return fields_of(context.response_type, error_code=kafka_error(denied), producer_id=-1, producer_epoch=-1)
        result = await asyncio.get_running_loop().run_in_executor(
            None, self.handling.init_producer_id, request.transactional_id,
            getattr(request, "producer_id", -1), getattr(request, "producer_epoch", -1))
        return fields_of(context.response_type, error_code=kafka_error(result.error_code),
                         producer_id=result.producer_id, producer_epoch=result.producer_epoch)

    async def describe_producers(self, request: Any, context: RequestContext) -> Any:
        module = context.response_module
        topics = []
        for topic in request.topics:
            parts = []
            allowed = context.access.allowed(AclOperation.READ, ResourceType.TOPIC, topic.name)
            for index in topic.partition_indexes:
                code, producers = (self.replica_manager.describe_producers(topic.name, index) if allowed
                                   else (Errors.TOPIC_AUTHORIZATION_FAILED, ()))
                parts.append(module.PartitionResponse(
                    partition_index=index, error_code=kafka_error(code), error_message=None,
                    active_producers=tuple(module.ProducerState(
                        producer_id=p.producer_id, producer_epoch=p.producer_epoch, last_sequence=p.last_sequence,
                        last_timestamp=p.last_timestamp, coordinator_epoch=p.coordinator_epoch,
                        current_txn_start_offset=p.current_transaction_start_offset) for p in producers)))
            topics.append(module.TopicResponse(name=topic.name, partitions=tuple(parts)))
        return fields_of(context.response_type, topics=tuple(topics))

    async def sasl_handshake(self, request: Any, context: RequestContext) -> Any:
        return fields_of(context.response_type, error_code=kafka_error(Errors.UNSUPPORTED_SASL_MECHANISM),
                         mechanisms=())
