"""A thin data client for tests, benchmarks and the simple CLI tools: one request per call.

`LowLevelClient` sends already-encoded RecordBatch v2 bytes to partition leaders (`produce`,
`produce_many`, one ProduceRequest per leader broker), reads raw batches back (`fetch`,
`fetch_many`, or decoded with `fetch_records`), looks offsets up (`list_offset`) and writes
transaction markers (`write_txn_marker`, for coordinators). Leaders come
from its metadata cache. It retries, with fresh metadata, only what surely did not take effect:
per-partition errors that say metadata was stale (NOT_LEADER_OR_FOLLOWER,
UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, ...) and calls that could not reach the
broker; reads also retry any other retriable error. Retries stop at `retry_timeout_ms`
(default `default.api.timeout.ms`), and every other outcome is returned as the partition's
`error_code`, never raised.

    with LowLevelClient(bootstrap_servers="127.0.0.1:9092") as client:
        result = client.produce("t", 0, build_batch([b"v"]), acks=-1)
        records, fetched = client.fetch_records("t", 0, result.base_offset)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from services.clients.cluster import PartitionInfo
from services.clients.partition_requests import (
    FetchResult,
    ListOffsetsResult,
    fetch_failure,
    fetch_request,
    list_offsets_failure,
    list_offsets_request,
    offset_spec_timestamp,
    parse_fetch,
    parse_list_offsets,
    parse_produce,
    parse_write_txn_markers,
    produce_call_retriable,
    produce_failure,
    produce_request,
    produce_retriable,
    read_call_retriable,
    read_retriable,
    write_txn_markers_failure,
    write_txn_markers_request,
)
from services.clients.pooled_client import PooledClient
from services.clients.transport import send_to_leaders
from services.common.errors import Errors
from services.common.records import Record, iter_records
from services.common.shared_types import IsolationLevel, ProduceResult, TxnMarker
from services.common.topic_partition import TopicPartition

PRODUCE_CALL_MARGIN_MS = 5000


class LowLevelClient(PooledClient):
    """Produce, fetch and list offsets against partition leaders; see the module docstring."""

    def partitions_for(self, topic: str, retry_timeout_ms: float | None = None) -> tuple[PartitionInfo, ...]:
        """The topic's partitions after a metadata refresh (empty when the topic is unknown)."""
        self.metadata.add_topics(topic)
        self.metadata.request_update()
        deadline = self._deadline(retry_timeout_ms)
        self.metadata.refresh(self.pool, deadline.remaining_ms())
        return self.metadata.partitions_for(topic)

    # ------------------------------------------------------------------ produce

    def produce(self, topic: str, partition: int, records: bytes, acks: int = 1, timeout_ms: int = 30000,
                *, retry_timeout_ms: float | None = None, transactional_id: str | None = None,
                coordinator_id: int | None = None) -> ProduceResult:
        """Appends `records` (one or more RecordBatch v2) to one partition: (base_offset, error_code, ...)."""
        tp = TopicPartition(topic, partition)
        return self.produce_many({tp: records}, acks, timeout_ms, retry_timeout_ms=retry_timeout_ms,
                                 transactional_id=transactional_id, coordinator_id=coordinator_id)[tp]

    def produce_many(self, batches: Mapping[tuple[str, int], bytes], acks: int = 1, timeout_ms: int = 30000,
                     *, retry_timeout_ms: float | None = None, transactional_id: str | None = None,
                     coordinator_id: int | None = None) -> dict[TopicPartition, ProduceResult]:
        """Appends to many partitions with one ProduceRequest per leader broker, sent concurrently.

        `coordinator_id` is for coordinator instances writing the internal topics."""
        by_tp = {TopicPartition(*key): value for key, value in batches.items()}

        def parse(response: Any) -> dict[TopicPartition, tuple[int, ProduceResult]]:
            parsed = parse_produce(response)
            if acks == 0:  # nothing to wait for: a partition left out of the answer was sent
                for tp in by_tp:
                    parsed.setdefault(tp, (Errors.NONE, ProduceResult(-1, Errors.NONE)))
            return parsed

        return send_to_leaders(
            self.metadata, self.pool, by_tp,
            method="Produce",
            build_request=lambda tps: produce_request({tp: by_tp[tp] for tp in tps}, acks, timeout_ms,
                                                      transactional_id, coordinator_id),
            parse_response=parse,
            failure_result=produce_failure,
            deadline=self._deadline(retry_timeout_ms),
            backoff_ms=self.config.retry_backoff_ms,
            call_timeout_ms=timeout_ms + PRODUCE_CALL_MARGIN_MS,
            retry_code=produce_retriable,
            retry_call_error=produce_call_retriable,
        )

    # ------------------------------------------------------------------ fetch

    def fetch(self, topic: str, partition: int, offset: int, max_bytes: int = 1048576, max_wait_ms: int = 500,
              min_bytes: int = 1, *, isolation_level: int = IsolationLevel.READ_UNCOMMITTED,
              retry_timeout_ms: float | None = None) -> FetchResult:
        """Raw batches from `offset`: (records, high_watermark, log_start_offset, error_code, ...)."""
        tp = TopicPartition(topic, partition)
        return self.fetch_many({tp: offset}, max_bytes, max_wait_ms, min_bytes,
                               isolation_level=isolation_level, retry_timeout_ms=retry_timeout_ms)[tp]

    def fetch_many(self, positions: Mapping[tuple[str, int], int], max_bytes: int = 1048576,
                   max_wait_ms: int = 500, min_bytes: int = 1, *,
                   isolation_level: int = IsolationLevel.READ_UNCOMMITTED,
                   retry_timeout_ms: float | None = None) -> dict[TopicPartition, FetchResult]:
        """One FetchRequest per leader; `max_bytes` bounds each partition and each response."""
        by_tp = {TopicPartition(*key): value for key, value in positions.items()}
        return send_to_leaders(
            self.metadata, self.pool, by_tp,
            method="Fetch",
            build_request=lambda tps: fetch_request(
                {tp: by_tp[tp] for tp in tps}, partition_max_bytes=max_bytes, max_wait_ms=max_wait_ms,
                min_bytes=min_bytes, max_bytes=max_bytes, isolation_level=isolation_level),
            parse_response=parse_fetch,
            failure_result=fetch_failure,
            deadline=self._deadline(retry_timeout_ms),
            backoff_ms=self.config.retry_backoff_ms,
            call_timeout_ms=self.config.request_timeout_ms + max_wait_ms,
            retry_code=read_retriable,
            retry_call_error=read_call_retriable,
        )

    def fetch_records(self, topic: str, partition: int, offset: int, max_bytes: int = 1048576,
                      max_wait_ms: int = 500, min_bytes: int = 1, *,
                      isolation_level: int = IsolationLevel.READ_UNCOMMITTED,
                      retry_timeout_ms: float | None = None) -> tuple[list[Record], FetchResult]:
        """`fetch`, decoded: the records at or after `offset` (control records left out)."""
        result = self.fetch(topic, partition, offset, max_bytes, max_wait_ms, min_bytes,
                            isolation_level=isolation_level, retry_timeout_ms=retry_timeout_ms)
        records = [r for r in iter_records(result.records) if r.offset >= offset]
        return records, result

    # ------------------------------------------------------------------ offsets

    def list_offset(self, topic: str, partition: int, spec: str | int = "latest", *,
                    isolation_level: int = IsolationLevel.READ_UNCOMMITTED,
                    retry_timeout_ms: float | None = None) -> ListOffsetsResult:
        """The offset for "earliest", "latest" or a timestamp in ms.

        Returns (offset, timestamp, leader_epoch, error_code).
        """
        tp = TopicPartition(topic, partition)
        return self.list_offsets({tp: spec}, isolation_level=isolation_level,
                                 retry_timeout_ms=retry_timeout_ms)[tp]

    def list_offsets(self, specs: Mapping[tuple[str, int], str | int], *,
                     isolation_level: int = IsolationLevel.READ_UNCOMMITTED,
                     retry_timeout_ms: float | None = None) -> dict[TopicPartition, ListOffsetsResult]:
        timestamps = {TopicPartition(*key): offset_spec_timestamp(spec) for key, spec in specs.items()}
        return send_to_leaders(
            self.metadata, self.pool, timestamps,
            method="ListOffsets",
            build_request=lambda tps: list_offsets_request({tp: timestamps[tp] for tp in tps},
                                                               isolation_level),
            parse_response=parse_list_offsets,
            failure_result=list_offsets_failure,
            deadline=self._deadline(retry_timeout_ms),
            backoff_ms=self.config.retry_backoff_ms,
            call_timeout_ms=self.config.request_timeout_ms,
            retry_code=read_retriable,
            retry_call_error=read_call_retriable,
            unknown_is_final=True,
        )

    # ------------------------------------------------------------------ transaction markers

    def write_txn_marker(self, marker: TxnMarker, partitions: list[tuple[str, int]], *,
                         retry_timeout_ms: float | None = None) -> dict[TopicPartition, int]:
        """Writes `marker` to each partition through its leader (the broker's WriteTxnMarkers, which
        answers once the marker is replicated); {partition: error_code}. Retried only where the
        leader moved or could not be reached."""
        return send_to_leaders(
            self.metadata, self.pool, [TopicPartition(*tp) for tp in partitions], method="WriteTxnMarkers",
            build_request=lambda tps: write_txn_markers_request(marker, tps), parse_response=parse_write_txn_markers,
            failure_result=write_txn_markers_failure, deadline=self._deadline(retry_timeout_ms),
            backoff_ms=self.config.retry_backoff_ms, retry_code=produce_retriable,
            call_timeout_ms=self.config.request_timeout_ms + PRODUCE_CALL_MARGIN_MS,
            retry_call_error=produce_call_retriable)
