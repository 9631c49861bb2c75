"""Per-API request metrics of every gRPC service (Kafka's RequestMetrics RequestsPerSec,
ErrorsPerSec and TotalTimeMs by request), recorded by one `grpc.aio` server interceptor that
`ServiceRuntime` installs on every server:

    odradek_request_total{service, api, error}   counter: answered requests
    odradek_request_seconds{service, api}        histogram: time from receipt to answer

`api` is the gRPC method's name (`Produce`, `Fetch`, `JoinGroup`, ...). `error` is `NONE` for a
request answered without error; the Kafka name of a response's top-level `error_code` when it is
not 0 (per-partition codes are the partitions' business, not the request's); else the name of the
gRPC status of a whole-request failure (`UNAVAILABLE`, `UNKNOWN` for an exception). A parked
request (long-poll fetch, acks=all produce) is timed until it is answered. The health service's
own calls are not counted (nor streamed answers: no Odradek API streams). One family per process,
shared by every service it runs."""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from typing import Any

import grpc
from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram

from services.common.errors import error_for_code
from services.common.metrics import LATENCY_BUCKETS_S

NO_ERROR = "NONE"
UNCOUNTED_SERVICE_PREFIX = "/grpc."  # health checks and reflection: plumbing, not requests


class RequestMetrics:
    """The two families, registered once in `registry`."""

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.requests = Counter("odradek_request", "gRPC requests answered, by API and error.",
                                ["service", "api", "error"], registry=registry)
        self.latency = Histogram("odradek_request_seconds", "Time from a gRPC request's receipt to its answer.",
                                 ["service", "api"], buckets=LATENCY_BUCKETS_S, registry=registry)

    def observe(self, service: str, api: str, error: str, seconds: float) -> None:
        self.requests.labels(service, api, error).inc()
        self.latency.labels(service, api).observe(seconds)


_process_metrics: RequestMetrics | None = None


def process_request_metrics() -> RequestMetrics:
    """The families of this process's default registry (created on first use)."""
    global _process_metrics
    if _process_metrics is None:
        _process_metrics = RequestMetrics()
    return _process_metrics


def api_of(method: str) -> str:
    """`/odradek.broker.v1.BrokerService/Produce` → `Produce`."""
    return method.rsplit("/", 1)[-1]


def response_error(response: Any) -> str:
    """`NONE`, or the Kafka name of a response's nonzero top-level `error_code`."""
    code = getattr(response, "error_code", 0)
    if not isinstance(code, int) or code == 0:
        return NO_ERROR
    return error_for_code(code).name


def status_error(context: Any, exc: BaseException) -> str:
    """The gRPC status name of a request that ended in `exc` (an abort sets the context's code)."""
    code = context.code() if hasattr(context, "code") else None
    if isinstance(code, grpc.StatusCode) and code is not grpc.StatusCode.OK:
        return code.name
    if isinstance(exc, grpc.RpcError) and hasattr(exc, "code"):
        return exc.code().name
    return grpc.StatusCode.UNKNOWN.name


def context_error(context: Any, response: Any) -> str:
    """A returned response's error: a status set on the context without raising, else its own."""
    code = context.code() if hasattr(context, "code") else None
    if isinstance(code, grpc.StatusCode) and code is not grpc.StatusCode.OK:
        return code.name
    return response_error(response)


class RequestMetricsInterceptor(grpc.aio.ServerInterceptor):
    """Wraps every unary handler of a service so each answer is counted and timed; keeps a
    handler `async` when it was (so it stays on the event loop) and plain when it was (so it still
    runs in the executor)."""

    def __init__(self, service: str, metrics: RequestMetrics | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.service = service
        self.metrics = metrics or process_request_metrics()
        self.clock = clock
        self._wrapped: dict[str, tuple[object, object]] = {}  # method → (handler, its wrapped copy)

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or method.startswith(UNCOUNTED_SERVICE_PREFIX):
            return handler
        if handler.unary_unary is None:
            return handler
        cached = self._wrapped.get(method)
        if cached is not None and cached[0] is handler:
            return cached[1]
        wrapped = handler._replace(unary_unary=self._wrap_unary(api_of(method), handler.unary_unary))
        self._wrapped[method] = (handler, wrapped)
        return wrapped

    def _record(self, api: str, error: str, started: float) -> None:
        self.metrics.observe(self.service, api, error, self.clock() - started)

    def _wrap_unary(self, api: str, behavior):
        if inspect.iscoroutinefunction(behavior):
            async def timed_async(request, context):
                started = self.clock()
                try:
                    response = await behavior(request, context)
                except BaseException as exc:
                    self._record(api, status_error(context, exc), started)
                    raise
                self._record(api, context_error(context, response), started)
                return response
            return timed_async

        def timed(request, context):
            started = self.clock()
            try:
                response = behavior(request, context)
            except BaseException as exc:
                self._record(api, status_error(context, exc), started)
                raise
            self._record(api, context_error(context, response), started)
            return response
        return timed
