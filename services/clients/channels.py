"""The client side of the network: one gRPC channel per "host:port", bounded calls, error mapping.

`ChannelPool` creates a channel the first time a target is used and closes them all in `close()`.
Channels carry the servers' message-size bounds and reconnect as Kafka's clients do: first after
`reconnect.backoff.ms`, then backing off exponentially up to `reconnect.backoff.max.ms` (gRPC's
own defaults would wait up to two minutes before noticing a restarted broker). Every call has a
deadline (`request.timeout.ms` unless the caller gives another). The pool counts calls in flight
per target (the "load" that picks the least-loaded node) and remembers when a target last failed
to connect.

Failed calls become `KafkaError`s (see `error_from_rpc`): a Kafka error a server attached as
`odradek-error-bin` trailing metadata is raised as itself; otherwise UNAVAILABLE and CANCELLED
become NETWORK_EXCEPTION and DEADLINE_EXCEEDED becomes REQUEST_TIMED_OUT (both retriable), and
any other status becomes a non-retriable error naming the status.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import grpc

from services.clients.client_config import CommonClientConfig
from services.common.clock import SYSTEM_CLOCK, Clock
from services.common.errors import ERRORS_BY_NAME, KafkaError
from services.common.pb.odradek.broker.v1 import broker_pb2_grpc
from services.common.pb.odradek.common.v1 import common_pb2
from services.common.pb.odradek.controller.v1 import controller_pb2_grpc
from services.common.pb.odradek.coordinator.v1 import coordinator_pb2_grpc
from services.common.service import GRPC_OPTIONS

ERROR_DETAIL_KEY = "odradek-error-bin"
BROKER = "broker"
CONTROLLER = "controller"
COORDINATOR = "coordinator"

_STUBS: dict[str, Callable[[grpc.Channel], Any]] = {
    BROKER: broker_pb2_grpc.BrokerServiceStub,
    CONTROLLER: controller_pb2_grpc.ControllerServiceStub,
    COORDINATOR: coordinator_pb2_grpc.CoordinatorServiceStub,
}

_STATUS_ERRORS = {
    grpc.StatusCode.UNAVAILABLE: "NETWORK_EXCEPTION",
    grpc.StatusCode.CANCELLED: "NETWORK_EXCEPTION",
    grpc.StatusCode.DEADLINE_EXCEEDED: "REQUEST_TIMED_OUT",
    grpc.StatusCode.UNIMPLEMENTED: "UNSUPPORTED_VERSION",
    grpc.StatusCode.RESOURCE_EXHAUSTED: "MESSAGE_TOO_LARGE",
    grpc.StatusCode.INVALID_ARGUMENT: "INVALID_REQUEST",
}


def error_from_rpc(error: grpc.RpcError, target: str = "", method: str = "") -> KafkaError:
    """The KafkaError for a failed call (see the module docstring for the mapping)."""
    detail = _error_detail(error)
    where = f"{method} to {target}" if target else method or "call"
    if detail is not None:
        message = detail.error_message or f"{where} failed"
        if detail.error_name in ERRORS_BY_NAME:
            return KafkaError(message, error_name=detail.error_name)
        return KafkaError.from_code(detail.error_code, message)
    code = error.code() if callable(getattr(error, "code", None)) else None
    text = error.details() if callable(getattr(error, "details", None)) else str(error)
    name = _STATUS_ERRORS.get(code, "UNKNOWN_SERVER_ERROR")
    status = code.name if code is not None else "UNKNOWN"
    return KafkaError(f"{where} failed: {status}: {text}", error_name=name)


def _error_detail(error: grpc.RpcError) -> common_pb2.ErrorDetail | None:
    trailing = error.trailing_metadata() if callable(getattr(error, "trailing_metadata", None)) else None
    for key, value in trailing or ():
        if key == ERROR_DETAIL_KEY:
            try:
                return common_pb2.ErrorDetail.FromString(value)
            except Exception:  # a malformed detail falls back to the status code
                return None
    return None


class ChannelPool:
    """Lazily created channels and stubs by target, with bounded, error-mapped calls."""

    def __init__(self, request_timeout_ms: int = 30000, reconnect_backoff_ms: int = 50,
                 reconnect_backoff_max_ms: int = 1000, clock: Clock = SYSTEM_CLOCK):
        self.request_timeout_ms = request_timeout_ms
        self.reconnect_backoff_ms = reconnect_backoff_ms
        self._options = GRPC_OPTIONS + [
            ("grpc.initial_reconnect_backoff_ms", max(1, reconnect_backoff_ms)),
            ("grpc.max_reconnect_backoff_ms", max(1, reconnect_backoff_max_ms, reconnect_backoff_ms)),
        ]
        self._clock = clock
        self._lock = threading.Lock()
        self._channels: dict[str, grpc.Channel] = {}
        self._stubs: dict[tuple[str, str], Any] = {}
        self._in_flight: dict[str, int] = {}
        self._failed_at_ms: dict[str, int] = {}
        self._closed = False

    @classmethod
    def from_config(cls, config: CommonClientConfig, clock: Clock = SYSTEM_CLOCK) -> ChannelPool:
        return cls(config.request_timeout_ms, config.reconnect_backoff_ms, config.reconnect_backoff_max_ms,
                   clock)

    # ------------------------------------------------------------------ channels and stubs

    def channel(self, target: str) -> grpc.Channel:
        with self._lock:
            if self._closed:
                raise RuntimeError("the channel pool is closed")
            channel = self._channels.get(target)
            if channel is None:
                channel = self._channels[target] = grpc.insecure_channel(target, options=self._options)
            return channel

    def stub(self, target: str, service: str) -> Any:
        channel = self.channel(target)
        with self._lock:
            stub = self._stubs.get((target, service))
            if stub is None:
                stub = self._stubs[(target, service)] = _STUBS[service](channel)
            return stub

    def broker(self, target: str) -> broker_pb2_grpc.BrokerServiceStub:
        return self.stub(target, BROKER)

    def controller(self, target: str) -> controller_pb2_grpc.ControllerServiceStub:
        return self.stub(target, CONTROLLER)

    def coordinator(self, target: str) -> coordinator_pb2_grpc.CoordinatorServiceStub:
        return self.stub(target, COORDINATOR)

    def targets(self) -> list[str]:
        with self._lock:
            return list(self._channels)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            channels, self._channels = self._channels, {}
            self._stubs.clear()
        for channel in channels.values():
            channel.close()

    def __enter__(self) -> ChannelPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ load and failures

    def in_flight(self, target: str) -> int:
        with self._lock:
            return self._in_flight.get(target, 0)

    def is_backing_off(self, target: str) -> bool:
        """True for `reconnect.backoff.ms` after a call to `target` failed to reach it."""
        with self._lock:
            failed = self._failed_at_ms.get(target)
        return failed is not None and self._clock.monotonic_ms() - failed < self.reconnect_backoff_ms

    def _begin(self, target: str) -> None:
        with self._lock:
            self._in_flight[target] = self._in_flight.get(target, 0) + 1

    def _end(self, target: str, error: KafkaError | None) -> None:
        with self._lock:
            self._in_flight[target] -= 1
            if error is not None and error.error_name == "NETWORK_EXCEPTION":
                self._failed_at_ms[target] = self._clock.monotonic_ms()
            elif error is None:
                self._failed_at_ms.pop(target, None)

    # ------------------------------------------------------------------ calls

    def timeout_s(self, timeout_ms: float | None) -> float:
        """A call's deadline in seconds: `timeout_ms`, by default request.timeout.ms; at least 1 ms."""
        bound = self.request_timeout_ms if timeout_ms is None else timeout_ms
        return max(bound, 1) / 1000

    def call(self, target: str, service: str, method: str, request: Any,
             timeout_ms: float | None = None) -> Any:
        """One unary call; raises KafkaError on failure."""
        rpc = getattr(self.stub(target, service), method)
        self._begin(target)
        error = None
        try:
            return rpc(request, timeout=self.timeout_s(timeout_ms))
        except grpc.RpcError as e:
            error = error_from_rpc(e, target, method)
            raise error from None
        finally:
            self._end(target, error)

    def call_many(self, calls: Sequence[tuple[str, str, str, Any, float | None]]) -> list[Any]:
        """Sends every (target, service, method, request, timeout_ms) at once and waits for all.

        Returns, in order, each response or the KafkaError that call failed with.
        """
        pending = []
        for target, service, method, request, timeout_ms in calls:
            rpc = getattr(self.stub(target, service), method)
            self._begin(target)
            try:
                future = rpc.future(request, timeout=self.timeout_s(timeout_ms))
            except BaseException:
                self._end(target, None)
                raise
            pending.append((target, method, future))
        results: list[Any] = []
        for target, method, future in pending:
            error = None
            try:
                results.append(future.result())
            except grpc.RpcError as e:
                error = error_from_rpc(e, target, method)
                results.append(error)
            finally:
                self._end(target, error)
        return results
