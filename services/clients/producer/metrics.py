"""The producer's counters, named as Kafka's `producer-metrics` group names them.

Counters are plain integers bumped per batch or per request by the thread that owns the event
(the sender thread, or `send` for records refused before they were queued); `snapshot` adds
the buffer pool's gauges and the averages derived from the totals.
"""

from __future__ import annotations


class ProducerMetrics:
    """Totals since the producer started."""

    def __init__(self) -> None:
        self.record_send_total = 0  # records acknowledged (or sent, with acks=0)
        self.record_error_total = 0  # records that failed, in send() or later
        self.record_retry_total = 0  # records sent again after a retriable error
        self.batch_total = 0  # wire batches sent, retries included
        self.batch_split_total = 0
        self.batch_bytes_total = 0  # encoded bytes of those batches
        self.request_total = 0
        self.response_total = 0
        self.request_latency_ms_total = 0
        self.request_latency_ms_max = 0
        self.records_in_requests_total = 0
        self.producer_id_requests_total = 0

    def request_answered(self, latency_ms: int) -> None:
        self.response_total += 1
        self.request_latency_ms_total += latency_ms
        self.request_latency_ms_max = max(self.request_latency_ms_max, latency_ms)

    def snapshot(self, *, buffer_total_bytes: int, buffer_available_bytes: int, waiting_threads: int,
                 bufferpool_wait_time_ns_total: int, requests_in_flight: int) -> dict[str, float]:
        requests = max(self.request_total, 1)
        batches = max(self.batch_total, 1)
        return {
            "record-send-total": self.record_send_total,
            "record-error-total": self.record_error_total,
            "record-retry-total": self.record_retry_total,
            "batch-total": self.batch_total,
            "batch-split-total": self.batch_split_total,
            "byte-total": self.batch_bytes_total,
            "batch-size-avg": self.batch_bytes_total / batches,
            "records-per-request-avg": self.records_in_requests_total / requests,
            "request-total": self.request_total,
            "response-total": self.response_total,
            "requests-in-flight": requests_in_flight,
            "request-latency-avg": self.request_latency_ms_total / max(self.response_total, 1),
            "request-latency-max": self.request_latency_ms_max,
            "producer-id-request-total": self.producer_id_requests_total,
            "buffer-total-bytes": buffer_total_bytes,
            "buffer-available-bytes": buffer_available_bytes,
            "waiting-threads": waiting_threads,
            "bufferpool-wait-time-ns-total": bufferpool_wait_time_ns_total,
        }
