"""Per-partition data-path requests (Produce, Fetch, ListOffsets, DeleteRecords, WriteTxnMarkers,
DescribeLogDirs):
building them for many partitions, reading their per-partition results, the result tuples clients return, and which
errors are worth retrying.

Results carry Kafka's numeric `error_code` (0 = Errors.NONE) rather than raising, so callers can act on
each partition. Produce is retried only on errors that prove nothing was appended (stale
metadata, a broker never reached); reads on any retriable error. Offset specs for ListOffsets
are "earliest" (-2), "latest" (-1) or a timestamp in ms (the first offset whose timestamp is at
or after it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

from services.clients.admin_types import LogDirDescription, ReplicaInfo
from services.clients.fetch_session import PartitionFetch, SessionFetch
from services.common.errors import Errors, KafkaError, error_for_code
from services.common.pb.odradek.broker.v1 import broker_pb2
from services.common.pb.odradek.common.v1 import common_pb2
from services.common.shared_types import (
    CONSUMER_REPLICA_ID,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    NO_LEADER_EPOCH,
    IsolationLevel,
    ProduceResult,
    TxnMarker,
)
from services.common.topic_partition import TopicPartition


class FetchResult(NamedTuple):
    records: bytes
    high_watermark: int
    log_start_offset: int
    error_code: int
    last_stable_offset: int = -1
    error_message: str = ""
    aborted_transactions: tuple[tuple[int, int], ...] = ()
    preferred_read_replica: int = -1


class ListOffsetsResult(NamedTuple):
    offset: int
    timestamp: int
    leader_epoch: int = NO_LEADER_EPOCH
    error_code: int = Errors.NONE


def offset_spec_timestamp(spec: str | int) -> int:
    """"earliest" -> -2, "latest" -> -1, a timestamp in ms -> itself."""
    if isinstance(spec, str):
        text = spec.strip().lower()
        if text == "earliest":
            return EARLIEST_TIMESTAMP
        if text == "latest":
            return LATEST_TIMESTAMP
        if text.lstrip("-").isdigit():
            spec = int(text)
        else:
            raise ValueError(f"offset spec must be 'earliest', 'latest' or a timestamp in ms, not {spec!r}")
    if isinstance(spec, bool) or not isinstance(spec, int) or spec < EARLIEST_TIMESTAMP:
        raise ValueError(f"offset spec must be 'earliest', 'latest' or a timestamp in ms, not {spec!r}")
    return spec


# --------------------------------------------------------------------------------------------- retry rules

def produce_retriable(code: int) -> bool:
    """A produce error that says nothing was appended and fresh metadata may fix it."""
    return error_for_code(code).invalid_metadata


def produce_call_retriable(error: KafkaError) -> bool:
    """A failed Produce call that never reached the broker."""
    return error.code == Errors.NETWORK_EXCEPTION


def read_retriable(code: int) -> bool:
    """Reads (Fetch, ListOffsets) have no side effects: any retriable error may be retried."""
    return error_for_code(code).retriable


def read_call_retriable(error: KafkaError) -> bool:
    return error.retriable


def _by_topic(partitions):
    topics: dict[str, list[TopicPartition]] = {}
    for tp in partitions:
        topics.setdefault(tp.topic, []).append(tp)
    return topics


# --------------------------------------------------------------------------------------------- produce

def produce_request(batches: Mapping[TopicPartition, bytes], acks: int, timeout_ms: int,
                    transactional_id: str | None = None,
                    coordinator_id: int | None = None) -> broker_pb2.ProduceRequest:
    request = broker_pb2.ProduceRequest(acks=acks, timeout_ms=timeout_ms)
    if transactional_id is not None:
        request.transactional_id = transactional_id
    if coordinator_id is not None:
        request.coordinator_id = coordinator_id
    for topic, tps in _by_topic(batches).items():
        request.topic_data.add(name=topic, partition_data=[
            broker_pb2.ProduceRequest.PartitionProduceData(index=tp.partition, records=batches[tp])
            for tp in tps])
    return request


def parse_produce(response: broker_pb2.ProduceResponse) -> dict[TopicPartition, tuple[int, ProduceResult]]:
    results = {}
    for topic in response.responses:
        for p in topic.partition_responses:
            record_errors = tuple((e.batch_index, e.batch_index_error_message) for e in p.record_errors)
            message = p.error_message or "; ".join(f"record {i}: {text}" for i, text in record_errors)
            result = ProduceResult(p.base_offset, p.error_code, p.log_append_time_ms, p.log_start_offset,
                                   message, record_errors)
            results[TopicPartition(topic.name, p.index)] = (p.error_code, result)
    return results


def produce_failure(tp: TopicPartition, error: KafkaError) -> ProduceResult:
    return ProduceResult(-1, error.code, -1, -1, str(error))


# --------------------------------------------------------------------------------------------- fetch

def fetch_request(positions: Mapping[TopicPartition, int], *, partition_max_bytes: int, max_wait_ms: int,
                  min_bytes: int, max_bytes: int, isolation_level: int = IsolationLevel.READ_UNCOMMITTED,
                  rack_id: str = "") -> broker_pb2.FetchRequest:
    """A fetch outside any session."""
    request = broker_pb2.FetchRequest(replica_id=CONSUMER_REPLICA_ID, max_wait_ms=max_wait_ms,
                                      min_bytes=min_bytes, max_bytes=max_bytes,
                                      isolation_level=isolation_level, rack_id=rack_id)
    add_fetch_partitions(request, {tp: (offset, NO_LEADER_EPOCH, partition_max_bytes)
                                   for tp, offset in positions.items()})
    return request


def session_fetch_request(fetch: SessionFetch, *, replica_id: int = CONSUMER_REPLICA_ID, max_wait_ms: int,
                          min_bytes: int, max_bytes: int, isolation_level: int = IsolationLevel.READ_UNCOMMITTED,
                          rack_id: str = "") -> broker_pb2.FetchRequest:
    """A fetch in a session, as its `FetchSessionHandler` built it."""
    request = broker_pb2.FetchRequest(replica_id=replica_id, max_wait_ms=max_wait_ms, min_bytes=min_bytes,
                                      max_bytes=max_bytes, isolation_level=isolation_level, rack_id=rack_id,
                                      session_id=fetch.session_id, session_epoch=fetch.session_epoch)
    add_fetch_partitions(request, fetch.partitions)
    forgotten: dict[str, list[int]] = {}
    for topic, index in fetch.forgotten:
        forgotten.setdefault(topic, []).append(index)
    for topic, indexes in forgotten.items():
        request.forgotten_topics_data.add(topic=topic, partitions=indexes)
    return request


def add_fetch_partitions(request: broker_pb2.FetchRequest, partitions: Mapping[tuple[str, int], PartitionFetch]
                         ) -> list[broker_pb2.FetchRequest.FetchPartition]:
    """Adds `partitions` (tp -> (fetch_offset, current_leader_epoch, partition_max_bytes)) to the
    request, grouped by topic; returns their messages in the order of `partitions`."""
    by_topic: dict[str, broker_pb2.FetchRequest.FetchTopic] = {}
    added = []
    for (topic, index), (offset, epoch, partition_max) in partitions.items():
        entry = by_topic.get(topic)
        if entry is None:
            entry = by_topic[topic] = request.topics.add(topic=topic)
        added.append(entry.partitions.add(partition=index, fetch_offset=offset, current_leader_epoch=epoch,
                                          last_fetched_epoch=NO_LEADER_EPOCH, log_start_offset=-1,
                                          partition_max_bytes=partition_max))
    return added


def parse_fetch(response: broker_pb2.FetchResponse) -> dict[TopicPartition, tuple[int, FetchResult]]:
    if response.error_code != Errors.NONE:
        raise KafkaError.from_code(response.error_code, response.error_message)
    results = {}
    for topic in response.responses:
        for p in topic.partitions:
            aborted = tuple((a.producer_id, a.first_offset) for a in p.aborted_transactions)
            result = FetchResult(p.records, p.high_watermark, p.log_start_offset, p.error_code,
                                 p.last_stable_offset, "", aborted, p.preferred_read_replica)
            results[TopicPartition(topic.topic, p.partition_index)] = (p.error_code, result)
    return results


def fetch_failure(tp: TopicPartition, error: KafkaError) -> FetchResult:
    return FetchResult(b"", -1, -1, error.code, -1, str(error))


# --------------------------------------------------------------------------------------------- list offsets

def list_offsets_request(timestamps: Mapping[TopicPartition, int],
                         isolation_level: int = IsolationLevel.READ_UNCOMMITTED) -> broker_pb2.ListOffsetsRequest:
    request = broker_pb2.ListOffsetsRequest(replica_id=CONSUMER_REPLICA_ID, isolation_level=isolation_level)
    for topic, tps in _by_topic(timestamps).items():
        request.topics.add(name=topic, partitions=[
            broker_pb2.ListOffsetsRequest.ListOffsetsPartition(
                partition_index=tp.partition, current_leader_epoch=NO_LEADER_EPOCH, timestamp=timestamps[tp])
            for tp in tps])
    return request


def parse_list_offsets(
    response: broker_pb2.ListOffsetsResponse,
) -> dict[TopicPartition, tuple[int, ListOffsetsResult]]:
    results = {}
    for topic in response.topics:
        for p in topic.partitions:
            result = ListOffsetsResult(p.offset, p.timestamp, p.leader_epoch, p.error_code)
            results[TopicPartition(topic.name, p.partition_index)] = (p.error_code, result)
    return results


def list_offsets_failure(tp: TopicPartition, error: KafkaError) -> ListOffsetsResult:
    return ListOffsetsResult(-1, -1, NO_LEADER_EPOCH, error.code)


# --------------------------------------------------------------------------------------------- delete records

def delete_records_request(offsets: Mapping[TopicPartition, int], timeout_ms: int) -> broker_pb2.DeleteRecordsRequest:
    """Deletes the records of each partition before its offset (-1: the high watermark)."""
    request = broker_pb2.DeleteRecordsRequest(timeout_ms=timeout_ms)
    for topic, tps in _by_topic(offsets).items():
        request.topics.add(name=topic, partitions=[
            broker_pb2.DeleteRecordsRequest.DeleteRecordsPartition(partition_index=tp.partition,
                                                                   offset=offsets[tp])
            for tp in tps])
    return request


def parse_delete_records(
    response: broker_pb2.DeleteRecordsResponse,
) -> dict[TopicPartition, tuple[int, tuple[int, int]]]:
    """{partition: (error code, (error code, low watermark))}."""
    return {TopicPartition(topic.name, p.partition_index): (p.error_code, (p.error_code, p.low_watermark))
            for topic in response.topics for p in topic.partitions}


def delete_records_failure(tp: TopicPartition, error: KafkaError) -> tuple[int, int]:
    return error.code, -1


# --------------------------------------------------------------------------------------------- txn markers

def write_txn_markers_request(marker: TxnMarker,
                              partitions: list[TopicPartition]) -> common_pb2.WriteTxnMarkersRequest:
    request = common_pb2.WriteTxnMarkersRequest()
    request.markers.add(producer_id=marker.producer_id, producer_epoch=marker.producer_epoch,
                        transaction_result=marker.commit, coordinator_epoch=marker.coordinator_epoch,
                        topics=[common_pb2.WriteTxnMarkersRequest.WritableTxnMarkerTopic(
                            name=topic, partition_indexes=[tp.partition for tp in tps])
                            for topic, tps in _by_topic(partitions).items()])
    return request


def parse_write_txn_markers(response: common_pb2.WriteTxnMarkersResponse) -> dict[TopicPartition, tuple[int, int]]:
    """{partition: (error_code, error_code)} of every marker in the answer."""
    return {TopicPartition(topic.name, p.partition_index): (p.error_code, p.error_code)
            for marker in response.markers for topic in marker.topics for p in topic.partitions}


def write_txn_markers_failure(tp: TopicPartition, error: KafkaError) -> int:
    return error.code


# --------------------------------------------------------------------------------------------- describe log dirs

def describe_log_dirs_request(partitions: Iterable[TopicPartition] | None = None
                              ) -> broker_pb2.DescribeLogDirsRequest:
    """Asks about `partitions` only, or (None) about every partition log of the broker."""
    if partitions is None:
        return broker_pb2.DescribeLogDirsRequest(all_topics=True)
    request = broker_pb2.DescribeLogDirsRequest()
    for topic, tps in _by_topic(TopicPartition(*tp) for tp in partitions).items():
        request.topics.add(topic=topic, partitions=[tp.partition for tp in tps])
    return request


def parse_describe_log_dirs(response: broker_pb2.DescribeLogDirsResponse) -> dict[str, LogDirDescription]:
    return {result.log_dir: LogDirDescription(
        None if result.error_code == Errors.NONE else KafkaError.from_code(
            result.error_code, f"log dir {result.log_dir}: {error_for_code(result.error_code).description}"),
        {TopicPartition(topic.name, part.partition_index): ReplicaInfo(part.partition_size, part.offset_lag,
                                                                       part.is_future_key)
         for topic in result.topics for part in topic.partitions})
        for result in response.results}
