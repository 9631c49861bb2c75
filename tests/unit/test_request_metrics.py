"""Per-API request metrics: the interceptor counts and times every unary call by API and error,
keeping a handler async or plain as it was."""

from __future__ import annotations

import asyncio
import inspect
from types import SimpleNamespace

import grpc
import pytest
from prometheus_client import CollectorRegistry

from services.common.errors import Errors
from services.common.request_metrics import RequestMetrics, RequestMetricsInterceptor, api_of


class FakeContext:
    def __init__(self, code=None) -> None:
        self._code = code

    def code(self):
        return self._code


class Ticks:
    """A clock that moves 0.25 s each time it is read."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 0.25
        return self.now


def intercepted(behavior, method="/odradek.broker.v1.BrokerService/Produce"):
    registry = CollectorRegistry()
    interceptor = RequestMetricsInterceptor("broker", RequestMetrics(registry), clock=Ticks())
    handler = grpc.unary_unary_rpc_method_handler(behavior)

    async def continuation(_details):
        return handler

    details = SimpleNamespace(method=method, invocation_metadata=())
    wrapped = asyncio.run(interceptor.intercept_service(continuation, details))
    return wrapped, registry


def count(registry, api="Produce", error="NONE") -> float | None:
    return registry.get_sample_value("odradek_request_total", {"service": "broker", "api": api, "error": error})


def test_api_is_the_method_name():
    assert api_of("/odradek.coordinator.v1.CoordinatorService/JoinGroup") == "JoinGroup"


def test_a_plain_handler_stays_plain_and_is_counted_and_timed():
    wrapped, registry = intercepted(lambda request, context: SimpleNamespace(error_code=0))
    assert not inspect.iscoroutinefunction(wrapped.unary_unary)
    wrapped.unary_unary(b"", FakeContext())
    assert count(registry) == 1
    labels = {"service": "broker", "api": "Produce"}
    assert registry.get_sample_value("odradek_request_seconds_count", labels) == 1
    assert registry.get_sample_value("odradek_request_seconds_sum", labels) == 0.25
    assert registry.get_sample_value("odradek_request_seconds_bucket", {**labels, "le": "0.1"}) == 0


def test_an_async_handler_stays_async_and_a_top_level_error_code_is_its_error():
    async def behavior(request, context):
        return SimpleNamespace(error_code=Errors.NOT_COORDINATOR)

    wrapped, registry = intercepted(behavior)
    assert inspect.iscoroutinefunction(wrapped.unary_unary)
    asyncio.run(wrapped.unary_unary(b"", FakeContext()))
    assert count(registry, error="NOT_COORDINATOR") == 1


def test_a_failed_request_counts_its_grpc_status():
    def aborted(request, context):
        raise RuntimeError("aborted")

    wrapped, registry = intercepted(aborted)
    with pytest.raises(RuntimeError):
        wrapped.unary_unary(b"", FakeContext(grpc.StatusCode.UNAVAILABLE))
    with pytest.raises(RuntimeError):
        wrapped.unary_unary(b"", FakeContext())
    assert count(registry, error="UNAVAILABLE") == 1
    assert count(registry, error="UNKNOWN") == 1


def test_health_checks_are_not_counted():
    wrapped, registry = intercepted(lambda request, context: None, method="/grpc.health.v1.Health/Check")
    wrapped.unary_unary(b"", FakeContext())
    assert count(registry, api="Check") is None


def test_a_method_is_wrapped_once():
    registry = CollectorRegistry()
    interceptor = RequestMetricsInterceptor("broker", RequestMetrics(registry), clock=Ticks())
    handler = grpc.unary_unary_rpc_method_handler(lambda request, context: None)

    async def continuation(_details):
        return handler

    async def twice():
        details = SimpleNamespace(method="/odradek.broker.v1.BrokerService/Fetch", invocation_metadata=())
        return [await interceptor.intercept_service(continuation, details) for _ in range(2)]

    first, second = asyncio.run(twice())
    assert first is second
    first.unary_unary(b"", FakeContext())
    assert count(registry, api="Fetch") == 1
