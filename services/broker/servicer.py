"""The broker's gRPC adapter: decodes BrokerService requests, calls the ReplicaManager and the
metadata cache, encodes responses. Kafka errors travel as per-partition `error_code`s; a request
that fails as a whole (a stale controller epoch) carries a top-level error code.

Controller requests (LeaderAndIsr, UpdateMetadata, StopReplica) are fenced first by broker epoch
(KIP-380): one stamped with an epoch older than this process's registration is refused whole with
STALE_BROKER_EPOCH and changes nothing; an absent epoch or -1 is not checked, and a newer one is
accepted (the controller may see the registration before this process learns its epoch).

Produce, Fetch, Metadata and InitProducerId are `services.broker.handling`'s, which the Kafka
protocol handlers call too. Produce, Fetch, ListOffsets and WriteTxnMarkers run on the server's
event loop (the append of up to `INLINE_APPEND_MAX_BYTES` of transaction markers inline, more in
the runtime's executor); the other methods (controller requests, metadata, which may call the
controller or ZooKeeper) run in the runtime's executor.

Transactions: a produce from a live coordinator instance appends with the COORDINATOR origin;
WriteTxnMarkers (from coordinators) waits, as an acks=all produce does, up to
`request.timeout.ms`; Fetch and ListOffsets honour `isolation_level`; DescribeProducers and
DeleteRecords (`ReplicaManager.delete_records`, as over the Kafka protocol) answer for partitions
led here; DescribeLogDirs for every log this broker holds.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable

from services.broker.fetch_session_cache import FINAL_EPOCH
from services.broker.handling import (
    DEFAULT_PARTITION_MAX_BYTES,
    INLINE_APPEND_MAX_BYTES,
    WAIT_SLACK_S,
    RequestHandling,
)
from services.broker.metadata_cache import BrokerNode, MetadataCache
from services.broker.replica_fetch import FetchPartition
from services.broker.replica_manager import ReplicaManager
from services.common.coordinator_lookup import coordinator_nodes, find_coordinator
from services.common.errors import Errors, KafkaError
from services.common.pb.odradek.broker.v1 import broker_pb2, broker_pb2_grpc
from services.common.pb.odradek.common.v1 import common_pb2
from services.common.producer_id_manager import ProducerIdManager
from services.common.service import DEFAULT_PARKED_MAX_REQUESTS, Completion
from services.common.shared_types import UNKNOWN_BROKER_EPOCH, PartitionStateInfo, TxnMarker
from services.common.topic_partition import TopicPartition
from services.common.zk.coordinator_directory import DirectorySnapshot

logger = logging.getLogger(__name__)

CONTROL_BATCH_BYTES = 78  # a transaction marker's batch: header and one control record


def node_to_proto(node: BrokerNode) -> common_pb2.Node:
    proto = common_pb2.Node(node_id=node.node_id, host=node.host, port=node.port)
    if node.rack is not None:
        proto.rack = node.rack
    if node.kafka_host is not None:
        proto.kafka_host = node.kafka_host
        proto.kafka_port = node.kafka_port
    return proto


def node_from_proto(proto: common_pb2.Node) -> BrokerNode:
    return BrokerNode(proto.node_id, proto.host, proto.port, proto.rack if proto.HasField("rack") else None,
                      proto.kafka_host if proto.HasField("kafka_host") else None,
                      proto.kafka_port if proto.HasField("kafka_port") else -1)


def state_from_proto(proto: common_pb2.PartitionState) -> PartitionStateInfo:
    return PartitionStateInfo(TopicPartition(proto.topic_name, proto.partition_index), proto.controller_epoch,
                              proto.leader, proto.leader_epoch, tuple(proto.isr), proto.zk_version,
                              tuple(proto.replicas), tuple(proto.adding_replicas), tuple(proto.removing_replicas),
                              tuple(proto.offline_replicas), proto.is_new)


class BrokerServicer(broker_pb2_grpc.BrokerServiceServicer):
    def __init__(self, broker_id: int, replica_manager: ReplicaManager, metadata_cache: MetadataCache,
                 *, fetch_max_bytes: int, auto_create_topic: Callable[[str], None] | None = None,
                 on_metadata_update: Callable[[], None] | None = None,
                 on_live_leaders: Callable[[list[BrokerNode]], None] | None = None,
                 producer_ids: ProducerIdManager | None = None,
                 coordinators: Callable[[], DirectorySnapshot] | None = None,
                 parked_max_requests: int = DEFAULT_PARKED_MAX_REQUESTS,
                 request_timeout_ms: int = 30000,
                 broker_epoch: Callable[[], int] = lambda: UNKNOWN_BROKER_EPOCH) -> None:
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self.request_timeout_ms = request_timeout_ms
        self.handling = RequestHandling(replica_manager, metadata_cache, fetch_max_bytes=fetch_max_bytes,
                                        auto_create_topic=auto_create_topic, producer_ids=producer_ids,
                                        parked_max_requests=parked_max_requests)
        self.client_requests = self.handling.client_requests
        self.coordinators = coordinators or DirectorySnapshot
        self.replica_manager = replica_manager
        self.metadata_cache = metadata_cache
        self.on_metadata_update = on_metadata_update
        self.on_live_leaders = on_live_leaders

    # ------------------------------------------------------------------ data path

    async def Produce(self, request, context):
        entries = {}
        for topic in request.topic_data:
            for part in topic.partition_data:
                entries[TopicPartition(topic.name, part.index)] = part.records
        # only live coordinator instances write the internal topics
        internal_allowed = (request.HasField("coordinator_id")
                            and request.coordinator_id in self.coordinators().live)
        outcome = await self.handling.produce(request.acks, request.timeout_ms, entries,
                                              internal_topics_allowed=internal_allowed)
        return self._produce_response(entries, outcome.results, outcome.missing_code, outcome.missing_message)

    @staticmethod
    def _produce_response(entries, results: dict, missing_code: int, missing_message: str):
        """One partition response per entry: its result, or `missing_code` where there is none."""
        response = broker_pb2.ProduceResponse()
        by_topic: dict[str, broker_pb2.ProduceResponse.TopicProduceResponse] = {}
        for (topic, index) in entries:
            result = results.get((topic, index))
            out = by_topic.get(topic)
            if out is None:
                out = by_topic[topic] = response.responses.add(name=topic)
            if result is None:
                out.partition_responses.add(index=index, error_code=missing_code, base_offset=-1,
                                            log_append_time_ms=-1, log_start_offset=-1,
                                            error_message=missing_message)
            else:
                out.partition_responses.add(index=index, error_code=result.error_code,
                                            base_offset=result.base_offset,
                                            log_append_time_ms=result.log_append_time_ms,
                                            log_start_offset=result.log_start_offset,
                                            error_message=result.error_message,
                                            record_errors=[
                                                {"batch_index": i, "batch_index_error_message": message}
                                                for i, message in result.record_errors])
        return response

    async def Fetch(self, request, context):
        partitions = []
        for topic in request.topics:
            for part in topic.partitions:
                partitions.append(FetchPartition(topic.topic, part.partition, part.fetch_offset,
                                                 part.partition_max_bytes or DEFAULT_PARTITION_MAX_BYTES,
                                                 part.current_leader_epoch))
        outcome = await self.handling.fetch(
            replica_id=request.replica_id, max_wait_ms=request.max_wait_ms, min_bytes=request.min_bytes,
            max_bytes=request.max_bytes, partitions=partitions,
            read_committed=request.isolation_level == common_pb2.READ_COMMITTED,
            session_id=request.session_id,
            session_epoch=request.session_epoch if request.HasField("session_epoch") else FINAL_EPOCH,
            forgotten=[(topic.topic, index) for topic in request.forgotten_topics_data for index in topic.partitions])
        if outcome.results is None:
            return broker_pb2.FetchResponse(error_code=outcome.error_code, error_message=outcome.error_message)
        response = broker_pb2.FetchResponse(session_id=outcome.session_id)
        by_topic = {}
        for key, result in outcome.results.items():
            topic, index = key
            out = by_topic.get(topic)
            if out is None:
                out = by_topic[topic] = response.responses.add(topic=topic)
            data = out.partitions.add(partition_index=index, error_code=result.error_code,
                                      high_watermark=result.high_watermark,
                                      last_stable_offset=result.last_stable_offset,
                                      log_start_offset=result.log_start_offset,
                                      preferred_read_replica=-1, records=result.records)
            for txn in result.aborted_transactions:
                data.aborted_transactions.add(producer_id=txn.producer_id, first_offset=txn.first_offset)
            if result.error_code:
                leader = self.handling.current_leader(topic, index)
                if leader is not None:
                    data.current_leader.leader_id, data.current_leader.leader_epoch = leader
        return response

    async def ListOffsets(self, request, context):
        response = broker_pb2.ListOffsetsResponse()
        for topic in request.topics:
            out = response.topics.add(name=topic.name)
            for part in topic.partitions:
                result = self.replica_manager.list_offset(
                    topic.name, part.partition_index, part.timestamp, part.current_leader_epoch,
                    request.replica_id, request.isolation_level == common_pb2.READ_COMMITTED)
                out.partitions.add(partition_index=part.partition_index, error_code=result.error_code,
                                   timestamp=result.timestamp, offset=result.offset,
                                   leader_epoch=result.leader_epoch)
        return response

    def Metadata(self, request, context):
        snapshot = self.metadata_cache.snapshot()
        response = broker_pb2.MetadataResponse(cluster_id=snapshot.cluster_id,
                                               controller_id=snapshot.controller_id)
        for node in sorted(snapshot.brokers.values(), key=lambda b: b.node_id):
            response.brokers.append(node_to_proto(node))
        if snapshot.controller is not None:
            response.controller.CopyFrom(node_to_proto(snapshot.controller))
        response.coordinators.extend(coordinator_nodes(self.coordinators()))
        views = self.handling.topic_views(snapshot, None if request.all_topics else list(request.topics),
                                          request.allow_auto_topic_creation)
        for view in views:
            topic = response.topics.add(name=view.name, is_internal=view.is_internal, error_code=view.error_code)
            for p in view.partitions:
                topic.partitions.add(error_code=p.error_code, partition_index=p.partition_index,
                                     leader_id=p.leader_id, leader_epoch=p.leader_epoch,
                                     replica_nodes=p.replica_nodes, isr_nodes=p.isr_nodes,
                                     offline_replicas=p.offline_replicas)
        return response

    def FindCoordinator(self, request, context):
        return find_coordinator(self.coordinators(), request.key, request.key_type)

    def InitProducerId(self, request, context):
        result = self.handling.init_producer_id(
            request.transactional_id if request.HasField("transactional_id") else None,
            request.producer_id, request.producer_epoch)
        return common_pb2.InitProducerIdResponse(error_code=result.error_code, producer_id=result.producer_id,
                                                 producer_epoch=result.producer_epoch,
                                                 error_message=result.error_message)

    # ------------------------------------------------------------------ transactions

    async def WriteTxnMarkers(self, request, context):
        markers = [(TxnMarker(m.producer_id, m.producer_epoch, m.transaction_result, m.coordinator_epoch),
                    tuple(TopicPartition(t.name, i) for t in m.topics for i in t.partition_indexes))
                   for m in request.markers]
        reply = Completion()
        write = functools.partial(self.replica_manager.write_txn_markers, markers, self.request_timeout_ms, reply)
        if sum(len(partitions) for _, partitions in markers) * CONTROL_BATCH_BYTES <= INLINE_APPEND_MAX_BYTES:
            write()  # a few control batches: inline, as a small produce
        else:
            await asyncio.get_running_loop().run_in_executor(None, write)
        codes = await reply.result(self.request_timeout_ms / 1000 + WAIT_SLACK_S)
        response = common_pb2.WriteTxnMarkersResponse()
        for i, (marker, partitions) in enumerate(markers):
            out = response.markers.add(producer_id=marker.producer_id)
            by_topic = {}
            for topic, index in partitions:
                code = Errors.REQUEST_TIMED_OUT if codes is None else codes[i].get((topic, index),
                                                                                    Errors.REQUEST_TIMED_OUT)
                if topic not in by_topic:
                    by_topic[topic] = out.topics.add(name=topic)
                by_topic[topic].partitions.add(partition_index=index, error_code=code)
        return response

    def DescribeProducers(self, request, context):
        response = broker_pb2.DescribeProducersResponse()
        for topic in request.topics:
            out = response.topics.add(name=topic.name)
            for index in topic.partition_indexes:
                code, producers = self.replica_manager.describe_producers(topic.name, index)
                part = out.partitions.add(partition_index=index, error_code=code)
                for p in producers:
                    part.active_producers.add(producer_id=p.producer_id, producer_epoch=p.producer_epoch,
                                              last_sequence=p.last_sequence, last_timestamp=p.last_timestamp,
                                              coordinator_epoch=p.coordinator_epoch,
                                              current_txn_start_offset=p.current_transaction_start_offset)
        return response

    def DeleteRecords(self, request, context):
        response = broker_pb2.DeleteRecordsResponse()
        for topic in request.topics:
            out = response.topics.add(name=topic.name)
            for part in topic.partitions:
                code, low_watermark = self.replica_manager.delete_records(topic.name, part.partition_index,
                                                                          part.offset)
                out.partitions.add(partition_index=part.partition_index, low_watermark=low_watermark,
                                   error_code=code)
        return response

    def DescribeLogDirs(self, request, context):
        wanted = None if request.all_topics else [TopicPartition(t.topic, index) for t in request.topics
                                                  for index in t.partitions]
        response = broker_pb2.DescribeLogDirsResponse()
        for described in self.replica_manager.describe_log_dirs(wanted):
            result = response.results.add(error_code=described.error_code, log_dir=described.log_dir)
            by_topic = {}
            for tp, part in described.partitions.items():
                if tp.topic not in by_topic:
                    by_topic[tp.topic] = result.topics.add(name=tp.topic)
                by_topic[tp.topic].partitions.add(partition_index=tp.partition, partition_size=part.size_bytes,
                                                  offset_lag=part.offset_lag, is_future_key=part.is_future)
        return response

    # ------------------------------------------------------------------ controller requests

    def OffsetForLeaderEpoch(self, request, context):
        response = broker_pb2.OffsetForLeaderEpochResponse()
        for topic in request.topics:
            out = response.topics.add(topic=topic.topic)
            for part in topic.partitions:
                error, epoch, end_offset = self.replica_manager.offset_for_leader_epoch(
                    topic.topic, part.partition, part.current_leader_epoch, part.leader_epoch)
                out.partitions.add(error_code=error, partition=part.partition, leader_epoch=epoch,
                                   end_offset=end_offset)
        return response

    def _stale_broker_epoch(self, request, name: str) -> KafkaError | None:
        """STALE_BROKER_EPOCH for a controller request meant for an earlier process of this broker."""
        given = request.broker_epoch if request.HasField("broker_epoch") else UNKNOWN_BROKER_EPOCH
        current = self.broker_epoch()
        if given == UNKNOWN_BROKER_EPOCH or given >= current:
            return None
        logger.info("refused %s from controller %d (epoch %d): its broker epoch %d is older than this "
                    "broker's %d", name, request.controller_id, request.controller_epoch, given, current)
        return KafkaError(f"{name} carries broker epoch {given}, older than broker {self.broker_id}'s current "
                          f"epoch {current}", error=Errors.STALE_BROKER_EPOCH)

    def LeaderAndIsr(self, request, context):
        stale = self._stale_broker_epoch(request, "LeaderAndIsr")
        if stale is not None:
            return broker_pb2.LeaderAndIsrResponse(error_code=stale.code, error_message=str(stale))
        states = [state_from_proto(p) for p in request.partition_states]
        if self.on_live_leaders is not None:
            self.on_live_leaders([node_from_proto(n) for n in request.live_leaders])
        try:
            errors = self.replica_manager.become_leader_or_follower(
                request.controller_id, request.controller_epoch, states)
        except KafkaError as exc:
            return broker_pb2.LeaderAndIsrResponse(error_code=exc.code, error_message=str(exc))
        response = broker_pb2.LeaderAndIsrResponse()
        for (topic, index), code in errors.items():
            response.partition_errors.add(topic_name=topic, partition_index=index, error_code=code)
        return response

    def UpdateMetadata(self, request, context):
        stale = self._stale_broker_epoch(request, "UpdateMetadata")
        if stale is not None:
            return broker_pb2.UpdateMetadataResponse(error_code=stale.code, error_message=str(stale))
        states = [state_from_proto(p) for p in request.partition_states]
        try:
            self.metadata_cache.update(
                controller_id=request.controller_id, controller_epoch=request.controller_epoch,
                live_brokers=[node_from_proto(n) for n in request.live_brokers],
                partition_states=states,
                controller=node_from_proto(request.controller) if request.HasField("controller") else None,
                cluster_id=request.cluster_id,
            )
        except Exception as exc:
            code = Errors.STALE_CONTROLLER_EPOCH
            return broker_pb2.UpdateMetadataResponse(error_code=code, error_message=str(exc))
        if self.on_metadata_update is not None:
            self.on_metadata_update()
        return broker_pb2.UpdateMetadataResponse()

    def StopReplica(self, request, context):
        stale = self._stale_broker_epoch(request, "StopReplica")
        if stale is not None:
            return broker_pb2.StopReplicaResponse(error_code=stale.code, error_message=str(stale))
        partitions = [(t.topic_name, p.partition_index, p.delete_partition)
                      for t in request.topic_states for p in t.partition_states]
        try:
            errors = self.replica_manager.stop_replicas(request.controller_id, request.controller_epoch,
                                                        partitions)
        except KafkaError as exc:
            return broker_pb2.StopReplicaResponse(error_code=exc.code, error_message=str(exc))
        response = broker_pb2.StopReplicaResponse()
        for (topic, index), code in errors.items():
            response.partition_errors.add(topic_name=topic, partition_index=index, error_code=code)
        return response
