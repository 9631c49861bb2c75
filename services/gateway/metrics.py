"""The gateway's Prometheus metrics, served at `/metrics`: requests by route and status, latency
histograms, request and response bytes, records produced and consumed, open consumer instances.

`GatewayMetrics` owns the families, in one registry per process; `MetricsMiddleware` (plain ASGI, so
streamed bodies pass through untouched) times every request and labels it with its route template
(`/topics/{topic}`), never the raw path.

A gateway of several worker processes answers as one: its supervisor sets `MULTIPROCESS_DIR_ENV`
(prometheus_client's multiprocess mode, which must be set before a worker creates its first value)
to a private directory, every worker's values live in memory-mapped files there, and a worker given
that directory answers `/metrics` with every worker's files summed (`MultiProcessCollector`), on
the front port and on its own. Counters and histograms sum over every worker that ever ran (a
worker's counts outlive it); the consumer-instances gauge sums the live workers only ("livesum":
the supervisor deletes a dead worker's gauge file, `mark_worker_dead`). These six families are the
registry's only content (no custom collectors, no process or platform collectors). Kept as they
are: names, labels and types; lost: the `_created` samples, which multiprocess mode does not keep.
A single-process gateway (no directory) answers from its own registry, `_created` included. A
request one worker sends another on a client's behalf carries `WORKER_HOP_HEADER` and is not
counted again (the client's request is counted where it arrived).
"""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

from services.common.metrics import LATENCY_BUCKETS_S

MULTIPROCESS_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"  # read by prometheus_client when it is imported
WORKER_HOP_HEADER = "x-odradek-gateway-worker"  # its value: the index of the worker that sent the request
HOP_HEADER_BYTES = WORKER_HOP_HEADER.encode()  # as ASGI scopes carry header names: lower case bytes


class GatewayMetrics:
    """The gateway's families; `multiprocess_dir` (a worker of several): answer with every worker's
    values summed, read from that directory, instead of this process's registry."""

    def __init__(self, multiprocess_dir: str | None = None) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("odradek_gateway_requests", "HTTP requests answered.",
                                ["method", "route", "status"], registry=self.registry)
        self.latency = Histogram("odradek_gateway_request_seconds", "Time to answer an HTTP request.",
                                 ["method", "route"], buckets=LATENCY_BUCKETS_S, registry=self.registry)
        self.request_bytes = Counter("odradek_gateway_request_bytes", "Bytes of request bodies.",
                                     ["route"], registry=self.registry)
        self.response_bytes = Counter("odradek_gateway_response_bytes", "Bytes of response bodies.",
                                      ["route"], registry=self.registry)
        self.records = Counter("odradek_gateway_records", "Records produced or consumed through the gateway.",
                               ["direction"], registry=self.registry)
        self.consumer_instances = Gauge("odradek_gateway_consumer_instances", "Open v2 consumer instances.",
                                        multiprocess_mode="livesum", registry=self.registry)
        self._answered = self.registry
        if multiprocess_dir is not None:
            self._answered = CollectorRegistry()
            MultiProcessCollector(self._answered, path=multiprocess_dir)

    def produced(self, count: int) -> None:
        self.records.labels("produced").inc(count)

    def consumed(self, count: int) -> None:
        self.records.labels("consumed").inc(count)

    def exposition(self) -> bytes:
        return generate_latest(self._answered)


def mark_worker_dead(pid: int, multiprocess_dir: str) -> None:
    """Drops the live-only gauges of worker `pid`, which has exited (its counters keep counting in)."""
    mark_process_dead(pid, multiprocess_dir)


class MetricsMiddleware:
    def __init__(self, app, metrics: GatewayMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or any(name == HOP_HEADER_BYTES for name, _ in scope.get("headers", ())):
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = [500]
        sizes = [0, 0]

        async def counting_receive():
            message = await receive()
            if message["type"] == "http.request":
                sizes[0] += len(message.get("body", b""))
            return message

        async def counting_send(message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            elif message["type"] == "http.response.body":
                sizes[1] += len(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, counting_receive, counting_send)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            method = scope.get("method", "")
            self.metrics.requests.labels(method, template, str(status[0])).inc()
            self.metrics.latency.labels(method, template).observe(time.perf_counter() - started)
            self.metrics.request_bytes.labels(template).inc(sizes[0])
            self.metrics.response_bytes.labels(template).inc(sizes[1])
