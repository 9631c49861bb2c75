"""The consumer's own counters, read with `Consumer.metrics()` under Kafka's metric names.

Counting happens per fetch and per poll, never per record. Lags are computed when read, from
the positions and the high watermarks the last fetches reported.
"""

from __future__ import annotations


class ConsumerMetrics:
    """Totals and fetch latencies (ms) since the consumer was created."""

    def __init__(self) -> None:
        self.records_consumed_total = 0
        self.bytes_consumed_total = 0
        self.fetch_total = 0
        self.fetch_errors_total = 0
        self.fetch_latency_total_ms = 0
        self.fetch_latency_max_ms = 0
        self.poll_total = 0
        self.last_poll_ms: int | None = None

    def fetch_completed(self, latency_ms: int) -> None:
        self.fetch_total += 1
        self.fetch_latency_total_ms += latency_ms
        self.fetch_latency_max_ms = max(self.fetch_latency_max_ms, latency_ms)

    def fetch_failed(self) -> None:
        self.fetch_errors_total += 1

    def bytes_fetched(self, size: int) -> None:
        self.bytes_consumed_total += size

    def records_returned(self, count: int) -> None:
        self.records_consumed_total += count

    def polled(self, now_ms: int) -> None:
        self.poll_total += 1
        self.last_poll_ms = now_ms

    def snapshot(self, now_ms: int, lags: dict) -> dict[str, float]:
        fetches = self.fetch_total
        known_lags = [lag for lag in lags.values() if lag is not None]
        result = {
            "records-consumed-total": self.records_consumed_total,
            "bytes-consumed-total": self.bytes_consumed_total,
            "fetch-total": fetches,
            "fetch-errors-total": self.fetch_errors_total,
            "fetch-latency-avg": self.fetch_latency_total_ms / fetches if fetches else 0.0,
            "fetch-latency-max": self.fetch_latency_max_ms,
            "records-per-request-avg": self.records_consumed_total / fetches if fetches else 0.0,
            "poll-total": self.poll_total,
            "last-poll-seconds-ago": (now_ms - self.last_poll_ms) / 1000 if self.last_poll_ms is not None else -1,
            "records-lag-max": max(known_lags) if known_lags else -1,
        }
        for tp, lag in lags.items():
            result[f"records-lag[{tp}]"] = lag if lag is not None else -1
        return result
