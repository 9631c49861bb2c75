"""The broker's gRPC adapter: decodes BrokerService requests, calls the ReplicaManager and the
metadata cache, encodes responses. Kafka errors travel as per-partition `error_code`s; a request
that fails as a whole (a stale controller epoch) carries a top-level error code.

Produce, Fetch and ListOffsets run on the server's event loop: the ReplicaManager's synchronous
part (a read, the append of a produce of up to `INLINE_APPEND_MAX_BYTES`, or of that many bytes
of transaction markers) runs inline, a larger append in the runtime's executor, and a produce or
fetch that has to wait parks in its purgatory while the coroutine awaits the `Completion` the
purgatory resolves; no thread is held. Clients' produces and fetches (not followers') count
against `parked.max.requests`; one more is answered at once with THROTTLING_QUOTA_EXCEEDED. The
other methods (controller requests, metadata, which may call the controller or ZooKeeper) run in
the runtime's executor.

Transactions: a produce from a live coordinator instance appends with the COORDINATOR origin;
WriteTxnMarkers (from coordinators) waits, as an acks=all produce does, up to
`request.timeout.ms`; Fetch and ListOffsets honour `isolation_level`; DescribeProducers answers
for partitions led here.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable

from services.broker.fetch_session_cache import FINAL_EPOCH, FetchContext
from services.broker.log.validation import AppendOrigin
from services.broker.metadata_cache import BrokerNode, MetadataCache
from services.broker.replica_fetch import FetchParams, FetchPartition
from services.broker.replica_manager import ReplicaManager
from services.common.coordinator_lookup import coordinator_nodes, find_coordinator
from services.common.errors import Errors, KafkaError, error_for_code
from services.common.pb.odradek.broker.v1 import broker_pb2, broker_pb2_grpc
from services.common.pb.odradek.common.v1 import common_pb2
from services.common.producer_id_manager import ProducerIdManager
from services.common.service import DEFAULT_PARKED_MAX_REQUESTS, Completion, RequestLimit
from services.common.shared_types import PartitionStateInfo, TxnMarker
from services.common.topic_names import INTERNAL_TOPICS
from services.common.topic_partition import TopicPartition
from services.common.zk.coordinator_directory import DirectorySnapshot

logger = logging.getLogger(__name__)

_WAIT_SLACK_S = 5.0
# a produce carrying more runs its append (validation, CRC, the write) in the executor, where
# several overlap and the loop goes on serving meanwhile; a smaller one costs less inline
INLINE_APPEND_MAX_BYTES = 64 * 1024
CONTROL_BATCH_BYTES = 78  # a transaction marker's batch: header and one control record


def node_to_proto(node: BrokerNode) -> common_pb2.Node:
    proto = common_pb2.Node(node_id=node.node_id, host=node.host, port=node.port)
    if node.rack is not None:
        proto.rack = node.rack
    return proto


def node_from_proto(proto: common_pb2.Node) -> BrokerNode:
    return BrokerNode(proto.node_id, proto.host, proto.port, proto.rack if proto.HasField("rack") else None)


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
                 request_timeout_ms: int = 30000) -> None:
        self.broker_id = broker_id
        self.request_timeout_ms = request_timeout_ms
        self.client_requests = RequestLimit(parked_max_requests)
        self.coordinators = coordinators or DirectorySnapshot
        self.producer_ids = producer_ids
        self.replica_manager = replica_manager
        self.metadata_cache = metadata_cache
        self.fetch_max_bytes = fetch_max_bytes
        self.auto_create_topic = auto_create_topic
        self.on_metadata_update = on_metadata_update
        self.on_live_leaders = on_live_leaders

    # ------------------------------------------------------------------ data path

    async def Produce(self, request, context):
        entries = {}
        for topic in request.topic_data:
            for part in topic.partition_data:
                entries[TopicPartition(topic.name, part.index)] = part.records
        if not self.client_requests.try_acquire():
            return self._produce_response(entries, {}, Errors.THROTTLING_QUOTA_EXCEEDED,
                                          self.client_requests.describe())
        try:
            reply = Completion()
            # only live coordinator instances write the internal topics
            internal_allowed = (request.HasField("coordinator_id")
                                and request.coordinator_id in self.coordinators().live)
            append = functools.partial(self.replica_manager.append_records, request.acks, request.timeout_ms,
                                       entries, reply, internal_topics_allowed=internal_allowed,
                                       origin=AppendOrigin.COORDINATOR if internal_allowed else AppendOrigin.CLIENT)
            if sum(len(records) for records in entries.values()) <= INLINE_APPEND_MAX_BYTES:
                append()
            else:
                await asyncio.get_running_loop().run_in_executor(None, append)
            results = await reply.result(max(request.timeout_ms, 0) / 1000 + _WAIT_SLACK_S)
        finally:
            self.client_requests.release()
        return self._produce_response(entries, results or {}, Errors.REQUEST_TIMED_OUT, "")

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
                                                 part.partition_max_bytes or 1048576,
                                                 part.current_leader_epoch))
        max_bytes = min(request.max_bytes if request.max_bytes > 0 else self.fetch_max_bytes,
                        self.fetch_max_bytes)
        read_committed = request.isolation_level == common_pb2.READ_COMMITTED
        session = self._fetch_context(request, partitions, read_committed)
        if session.error:
            return broker_pb2.FetchResponse(error_code=session.error,
                                            error_message=error_for_code(session.error).description)
        params = FetchParams(request.replica_id, request.max_wait_ms, request.min_bytes, max_bytes,
                             tuple(partitions), read_committed, session.session, not session.full)
        limited = request.replica_id < 0
        if limited and not self.client_requests.try_acquire():
            return broker_pb2.FetchResponse(error_code=Errors.THROTTLING_QUOTA_EXCEEDED,
                                            error_message=self.client_requests.describe())
        try:
            reply = Completion()
            self.replica_manager.fetch_messages(params, reply)
            results = await reply.result(max(request.max_wait_ms, 0) / 1000 + _WAIT_SLACK_S)
        finally:
            if limited:
                self.client_requests.release()
        if results is None:
            return broker_pb2.FetchResponse(error_code=Errors.REQUEST_TIMED_OUT,
                                            error_message="fetch did not complete in time")
        response = broker_pb2.FetchResponse(session_id=session.session_id)
        by_topic = {}
        for key, result in results.items():
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
                self._fill_current_leader(data, *key)
        return response

    def _fetch_context(self, request, partitions: list[FetchPartition], read_committed: bool) -> FetchContext:
        """The fetch's session (KIP-227); a request without session fields is a full fetch outside
        any session, as before sessions existed."""
        epoch = request.session_epoch if request.HasField("session_epoch") else FINAL_EPOCH
        forgotten = [(topic.topic, index) for topic in request.forgotten_topics_data for index in topic.partitions]
        return self.replica_manager.fetch_sessions.new_context(
            request.replica_id, request.session_id, epoch, partitions, forgotten, read_committed,
            self.replica_manager.clock.monotonic_ms())

    def _fill_current_leader(self, data, topic: str, index: int) -> None:
        meta = self.metadata_cache.partition(topic, index)
        if meta is not None:
            data.current_leader.leader_id = meta.leader
            data.current_leader.leader_epoch = meta.leader_epoch

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
        names = sorted(snapshot.partitions) if request.all_topics else list(dict.fromkeys(request.topics))
        for name in names:
            partitions = snapshot.partitions.get(name)
            topic = response.topics.add(name=name, is_internal=name in INTERNAL_TOPICS)
            if partitions is None:
                topic.error_code = self._unknown_topic_error(name, request.allow_auto_topic_creation)
                continue
            for index in sorted(partitions):
                self._add_partition(topic, partitions[index], snapshot.brokers)
        return response

    def _unknown_topic_error(self, name: str, allow_auto_create: bool) -> int:
        if not allow_auto_create or self.auto_create_topic is None or name.startswith("__"):
            return Errors.UNKNOWN_TOPIC_OR_PARTITION
        try:
            self.auto_create_topic(name)
        except KafkaError as exc:
            if exc.code == Errors.INVALID_TOPIC_EXCEPTION:
                return Errors.INVALID_TOPIC_EXCEPTION
            if exc.code != Errors.TOPIC_ALREADY_EXISTS:
                logger.warning("auto-creating topic %s failed: %s", name, exc)
                return Errors.UNKNOWN_TOPIC_OR_PARTITION
        return Errors.LEADER_NOT_AVAILABLE

    @staticmethod
    def _add_partition(topic, meta: PartitionStateInfo, live: dict[int, BrokerNode]) -> None:
        error = 0 if meta.leader in live else Errors.LEADER_NOT_AVAILABLE
        offline = [r for r in meta.replicas if r not in live]
        topic.partitions.add(error_code=error, partition_index=meta.partition.partition,
                             leader_id=meta.leader if meta.leader in live else -1,
                             leader_epoch=meta.leader_epoch, replica_nodes=list(meta.replicas),
                             isr_nodes=list(meta.isr), offline_replicas=offline)

    def FindCoordinator(self, request, context):
        return find_coordinator(self.coordinators(), request.key, request.key_type)

    def InitProducerId(self, request, context):
        if self.producer_ids is None:
            return common_pb2.InitProducerIdResponse(
                error_code=Errors.COORDINATOR_NOT_AVAILABLE, producer_id=-1, producer_epoch=-1,
                error_message="this broker does not hand out producer ids")
        result = self.producer_ids.init_producer_id(
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
        codes = await reply.result(self.request_timeout_ms / 1000 + _WAIT_SLACK_S)
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

    def LeaderAndIsr(self, request, context):
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
