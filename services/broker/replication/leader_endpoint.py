"""The follower's gRPC view of one leader broker: Fetch (as replica `replica_id`) and
OffsetForLeaderEpoch, with deadlines; a failed call answers with a retriable error (the whole
fetch's, or every partition's) so the fetcher backs off rather than dies.

Fetches carry the fetcher's session: an incremental fetch is a small request of the changed
partitions, built anew each time. A full fetch names every partition; while a leader has no room
for a session every fetch is full, and mostly asks for the same offsets: that FetchRequest is kept
between calls and only the fields of the partitions whose offset, epoch or size changed are set
again; it is built anew when the partitions change."""

from __future__ import annotations

import logging
from collections.abc import Mapping

import grpc

from services.broker.replication.fetcher import FetchAnswer
from services.clients.fetch_session import PartitionFetch, SessionFetch
from services.clients.partition_requests import add_fetch_partitions, session_fetch_request
from services.common.errors import Errors
from services.common.pb.odradek.broker.v1 import broker_pb2, broker_pb2_grpc
from services.common.security.tls import TlsSettings
from services.common.service import node_channel
from services.common.topic_partition import TopicPartition

logger = logging.getLogger(__name__)


class GrpcLeaderEndpoint:
    def __init__(self, target: str, request_timeout_ms: int = 30000, tls: TlsSettings | None = None) -> None:
        self.target = target
        self.timeout_s = request_timeout_ms / 1000
        self._channel = node_channel(target, tls)
        self._stub = broker_pb2_grpc.BrokerServiceStub(self._channel)
        # the last full FetchRequest: its partitions in order, their (offset, epoch, max bytes),
        # and their FetchPartition messages in the same order
        self._request: broker_pb2.FetchRequest | None = None
        self._request_keys: list[tuple[str, int]] = []
        self._request_values: list[PartitionFetch] = []
        self._request_slots: list = []

    def _fetch_request(self, replica_id: int, max_wait_ms: int, min_bytes: int, max_bytes: int,
                       fetch: SessionFetch) -> broker_pb2.FetchRequest:
        if not fetch.full:
            return session_fetch_request(fetch, replica_id=replica_id, max_wait_ms=max_wait_ms,
                                         min_bytes=min_bytes, max_bytes=max_bytes)
        request = self._full_request(fetch.partitions)
        request.replica_id, request.max_wait_ms, request.min_bytes, request.max_bytes = (
            replica_id, max_wait_ms, min_bytes, max_bytes)
        request.session_id, request.session_epoch = fetch.session_id, fetch.session_epoch
        return request

    def _full_request(self, partitions: Mapping[tuple[str, int], PartitionFetch]) -> broker_pb2.FetchRequest:
        keys, values = list(partitions), list(partitions.values())
        request = self._request
        if request is not None and keys == self._request_keys:
            for slot, new, old in zip(self._request_slots, values, self._request_values, strict=True):
                if new != old:
                    slot.fetch_offset, slot.current_leader_epoch, slot.partition_max_bytes = new
        else:
            request = broker_pb2.FetchRequest()
            self._request, self._request_keys = request, keys
            self._request_slots = add_fetch_partitions(request, partitions)
        self._request_values = values
        return request

    def fetch(self, replica_id: int, max_wait_ms: int, min_bytes: int, max_bytes: int,
              fetch: SessionFetch) -> FetchAnswer:
        request = self._fetch_request(replica_id, max_wait_ms, min_bytes, max_bytes, fetch)
        try:
            response = self._stub.Fetch(request, timeout=self.timeout_s + max_wait_ms / 1000)
        except (grpc.RpcError, ValueError) as exc:  # ValueError: closed by a shutdown meanwhile
            logger.debug("fetch from %s failed: %s", self.target, exc)
            return FetchAnswer(Errors.NETWORK_EXCEPTION, 0, {})
        out: dict[tuple[str, int], broker_pb2.FetchResponse.PartitionData] = {}
        for topic in response.responses:
            name = topic.topic
            for data in topic.partitions:  # a PartitionData has the fields of a FetchedPartition
                out[(name, data.partition_index)] = data
        return FetchAnswer(response.error_code, response.session_id, out)

    def offsets_for_leader_epoch(self, partitions: dict[TopicPartition, tuple[int, int]]
                                 ) -> dict[TopicPartition, tuple[int, int, int]]:
        request = broker_pb2.OffsetForLeaderEpochRequest(replica_id=-1)
        by_topic = {}
        for (topic, index), (current_epoch, epoch) in partitions.items():
            entry = by_topic.get(topic)
            if entry is None:
                entry = by_topic[topic] = request.topics.add(topic=topic)
            entry.partitions.add(partition=index, current_leader_epoch=current_epoch, leader_epoch=epoch)
        try:
            response = self._stub.OffsetForLeaderEpoch(request, timeout=self.timeout_s)
        except (grpc.RpcError, ValueError) as exc:  # ValueError: closed by a shutdown meanwhile
            logger.debug("OffsetForLeaderEpoch to %s failed: %s", self.target, exc)
            return {tp: (Errors.NETWORK_EXCEPTION, -1, -1) for tp in partitions}
        out = {}
        for topic in response.topics:
            for data in topic.partitions:
                out[TopicPartition(topic.topic, data.partition)] = (data.error_code, data.leader_epoch, data.end_offset)
        for tp in partitions:
            out.setdefault(tp, (Errors.NETWORK_EXCEPTION, -1, -1))
        return out

    def close(self) -> None:
        self._channel.close()
