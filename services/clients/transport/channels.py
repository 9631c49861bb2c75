"""The clients' gRPC connections and calls: one channel per "host:port", bounded blocking and
asynchronous calls, the mapping of failures to Kafka's errors. The only client module that
imports grpc or a generated `*_pb2_grpc` stub module.

`ChannelPool` creates a channel the first time a target is used and closes them all in `close()`.
With SASL credentials (`security.protocol` SASL_SSL or SASL_PLAINTEXT) every call carries
`authorization: Basic ...` metadata: as gRPC call credentials composed with the TLS channel
credentials, or, on a plaintext channel (where gRPC sends no call credentials), added to each call
by a client interceptor.
Channels carry the servers' message-size bounds and reconnect as Kafka's clients do: first after
`reconnect.backoff.ms`, then backing off exponentially up to `reconnect.backoff.max.ms` (gRPC's
own defaults would wait up to two minutes before noticing a restarted broker). Every call has a
deadline (`request.timeout.ms` unless the caller gives another). A call is `call` (blocking),
`call_many` (several at once, waiting for all) or `send` (asynchronous: a `PendingCall` whose
done-callbacks run on a gRPC thread). The pool counts calls in flight per target (the "load" that
picks the least-loaded node) and remembers when a target last failed to connect, whichever way
the call was made. `check_health` asks a service's gRPC health service whether it is serving.

gRPC's synchronous channel completes asynchronous calls on a thread it starts whenever the channel
goes from no such call in flight to one, and which exits when none is left: a channel carrying one
asynchronous call at a time (a consumer's fetch) would start a thread per call. So the first `send`
on a channel opens an anchor call there (`ANCHOR_METHOD`: a stream that every Odradek service holds
open, carrying no message, until it stops), and the channel's thread lives as long as it does. (A
health Watch stream would not do: gRPC reports a stream's end only once its messages are read,
which takes a blocked thread.) An anchor the server ends (it stopped, restarted) is reopened by a
later `send`, not sooner than `reconnect.backoff.ms` after it ended, backing off exponentially up
to `reconnect.backoff.max.ms` while anchors keep ending young; a server without the anchor method
is not asked again. `close()` cancels the anchors.

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
from services.common.errors import Errors, KafkaError
from services.common.grpc_error_detail import ERROR_DETAIL_KEY
from services.common.pb.odradek.broker.v1 import broker_pb2_grpc
from services.common.pb.odradek.common.v1 import common_pb2
from services.common.pb.odradek.controller.v1 import controller_pb2_grpc
from services.common.pb.odradek.coordinator.v1 import coordinator_pb2_grpc
from services.common.security.grpc_credentials import AUTHORIZATION_KEY, basic_authorization
from services.common.security.tls import TlsSettings
from services.common.service import ANCHOR_METHOD, GRPC_OPTIONS

BROKER = "broker"
CONTROLLER = "controller"
COORDINATOR = "coordinator"

_STUBS: dict[str, Callable[[grpc.Channel], Any]] = {
    BROKER: broker_pb2_grpc.BrokerServiceStub,
    CONTROLLER: controller_pb2_grpc.ControllerServiceStub,
    COORDINATOR: coordinator_pb2_grpc.CoordinatorServiceStub,
}

_STATUS_ERRORS = {
    grpc.StatusCode.UNAVAILABLE: Errors.NETWORK_EXCEPTION,
    grpc.StatusCode.CANCELLED: Errors.NETWORK_EXCEPTION,
    grpc.StatusCode.DEADLINE_EXCEEDED: Errors.REQUEST_TIMED_OUT,
    grpc.StatusCode.UNIMPLEMENTED: Errors.UNSUPPORTED_VERSION,
    grpc.StatusCode.RESOURCE_EXHAUSTED: Errors.MESSAGE_TOO_LARGE,
    grpc.StatusCode.INVALID_ARGUMENT: Errors.INVALID_REQUEST,
}


def error_from_rpc(error: grpc.RpcError, target: str = "", method: str = "") -> KafkaError:
    """The KafkaError for a failed call (see the module docstring for the mapping)."""
    detail = _error_detail(error)
    where = f"{method} to {target}" if target else method or "call"
    if detail is not None:
        message = detail.error_message or f"{where} failed"
        if detail.error_name in Errors.__members__:
            return KafkaError(message, error=Errors[detail.error_name])
        return KafkaError.from_code(detail.error_code, message)
    code = error.code() if callable(getattr(error, "code", None)) else None
    text = error.details() if callable(getattr(error, "details", None)) else str(error)
    error_code = _STATUS_ERRORS.get(code, Errors.UNKNOWN_SERVER_ERROR)
    status = code.name if code is not None else "UNKNOWN"
    return KafkaError(f"{where} failed: {status}: {text}", error=error_code)


def _error_detail(error: grpc.RpcError) -> common_pb2.ErrorDetail | None:
    trailing = error.trailing_metadata() if callable(getattr(error, "trailing_metadata", None)) else None
    for key, value in trailing or ():
        if key == ERROR_DETAIL_KEY:
            try:
                return common_pb2.ErrorDetail.FromString(value)
            except Exception:  # a malformed detail falls back to the status code
                return None
    return None


class PendingCall:
    """An asynchronous call (`ChannelPool.send`): its answer, or the KafkaError it failed with."""

    __slots__ = ("target", "method", "_future", "_outcome", "_on_settled", "_lock")

    def __init__(self, target: str, method: str, future: grpc.Future,
                 on_settled: Callable[[KafkaError | None], None]):
        self.target = target
        self.method = method
        self._future = future
        self._outcome: tuple[Any, KafkaError | None] | None = None
        self._on_settled: Callable[[KafkaError | None], None] | None = on_settled
        self._lock = threading.Lock()

    def add_done_callback(self, callback: Callable[[PendingCall], None]) -> None:
        """Runs `callback(self)` once the call is done: on a gRPC thread, or now if it already is."""
        self._future.add_done_callback(lambda _future: callback(self))

    def done(self) -> bool:
        return self._future.done()

    def cancel(self) -> None:
        """Abandons the call; it completes as a NETWORK_EXCEPTION unless already answered."""
        self._future.cancel()

    def outcome(self, timeout_s: float | None = None) -> tuple[Any, KafkaError | None]:
        """(response, None) or (None, error), waiting up to `timeout_s` (None: until done)."""
        if self._outcome is None:
            try:
                outcome = (self._future.result(timeout=timeout_s), None)
            except grpc.FutureTimeoutError:
                return None, KafkaError(f"{self.method} to {self.target} is still unanswered",
                                        error=Errors.REQUEST_TIMED_OUT)
            except grpc.FutureCancelledError:
                outcome = (None, KafkaError(f"{self.method} to {self.target} was cancelled",
                                            error=Errors.NETWORK_EXCEPTION))
            except grpc.RpcError as e:
                outcome = (None, error_from_rpc(e, self.target, self.method))
            self._outcome = outcome
            with self._lock:
                on_settled, self._on_settled = self._on_settled, None
            if on_settled is not None:  # exactly once, whichever thread saw the outcome first
                on_settled(outcome[1])
        return self._outcome

    def result(self, timeout_s: float | None = None) -> Any:
        """The response; raises the call's KafkaError."""
        response, error = self.outcome(timeout_s)
        if error is not None:
            raise error
        return response


class _Anchor:
    """A channel's anchor call (see the module docstring) and when it may be reopened."""

    __slots__ = ("call", "opened_ms", "reopen_at_ms", "young_endings", "abandoned")

    def __init__(self) -> None:
        self.call: grpc.Call | None = None
        self.opened_ms = 0
        self.reopen_at_ms = 0
        self.young_endings = 0  # how many anchors in a row ended within reconnect.backoff.max.ms
        self.abandoned = False  # the server has no anchor method


class _BasicAuthPlugin(grpc.AuthMetadataPlugin):
    """Call credentials of a SASL user on a TLS channel."""

    def __init__(self, authorization: str) -> None:
        self._metadata = ((AUTHORIZATION_KEY, authorization),)

    def __call__(self, context: grpc.AuthMetadataContext, callback: grpc.AuthMetadataPluginCallback) -> None:
        callback(self._metadata, None)


class _CallDetails(grpc.ClientCallDetails):
    def __init__(self, details: grpc.ClientCallDetails, metadata: tuple[tuple[str, str], ...]) -> None:
        self.method = details.method
        self.timeout = details.timeout
        self.metadata = metadata
        self.credentials = details.credentials
        self.wait_for_ready = details.wait_for_ready
        self.compression = details.compression


class _CallMetadataInterceptor(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
                               grpc.StreamUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
    """Adds the SASL user's `authorization` metadata to every call of a plaintext channel."""

    def __init__(self, authorization: str) -> None:
        self._metadata = ((AUTHORIZATION_KEY, authorization),)

    def _details(self, details: grpc.ClientCallDetails) -> grpc.ClientCallDetails:
        return _CallDetails(details, (*(details.metadata or ()), *self._metadata))

    def intercept_unary_unary(self, continuation, client_call_details, request):
        return continuation(self._details(client_call_details), request)

    def intercept_unary_stream(self, continuation, client_call_details, request):
        return continuation(self._details(client_call_details), request)

    def intercept_stream_unary(self, continuation, client_call_details, request_iterator):
        return continuation(self._details(client_call_details), request_iterator)

    def intercept_stream_stream(self, continuation, client_call_details, request_iterator):
        return continuation(self._details(client_call_details), request_iterator)


class ChannelPool:
    """Lazily created channels and stubs by target, with bounded, error-mapped calls."""

    def __init__(self, request_timeout_ms: int = 30000, reconnect_backoff_ms: int = 50,
                 reconnect_backoff_max_ms: int = 1000, clock: Clock = SYSTEM_CLOCK,
                 tls: TlsSettings | None = None, sasl_credentials: tuple[str, str] | None = None):
        self.request_timeout_ms = request_timeout_ms
        self._credentials = tls.grpc_channel_credentials() if tls is not None else None
        self._interceptor: _CallMetadataInterceptor | None = None
        if sasl_credentials is not None:
            authorization = basic_authorization(*sasl_credentials)
            if self._credentials is not None:
                self._credentials = grpc.composite_channel_credentials(
                    self._credentials, grpc.metadata_call_credentials(_BasicAuthPlugin(authorization)))
            else:
                self._interceptor = _CallMetadataInterceptor(authorization)
        self.reconnect_backoff_ms = reconnect_backoff_ms
        self.reconnect_backoff_max_ms = max(reconnect_backoff_max_ms, reconnect_backoff_ms)
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
        self._anchors: dict[str, _Anchor] = {}
        self._closed = False

    @classmethod
    def from_config(cls, config: CommonClientConfig, clock: Clock = SYSTEM_CLOCK) -> ChannelPool:
        return cls(config.request_timeout_ms, config.reconnect_backoff_ms, config.reconnect_backoff_max_ms,
                   clock, config.tls_settings(), config.sasl_credentials())

    # ------------------------------------------------------------------ channels and stubs

    def channel(self, target: str) -> grpc.Channel:
        with self._lock:
            if self._closed:
                raise RuntimeError("the channel pool is closed")
            channel = self._channels.get(target)
            if channel is None:
                if self._credentials is not None:
                    channel = grpc.secure_channel(target, self._credentials, options=self._options)
                else:
                    channel = grpc.insecure_channel(target, options=self._options)
                    if self._interceptor is not None:
                        channel = grpc.intercept_channel(channel, self._interceptor)
                self._channels[target] = channel
            return channel

    def stub(self, target: str, service: str) -> Any:
        """The generated stub of `service` (BROKER, CONTROLLER or COORDINATOR) at `target`."""
        stub = self._stubs.get((target, service))  # the common case, without the lock
        if stub is not None:
            return stub
        channel = self.channel(target)
        with self._lock:
            stub = self._stubs.get((target, service))
            if stub is None:
                stub = self._stubs[(target, service)] = _STUBS[service](channel)
            return stub

    def targets(self) -> list[str]:
        with self._lock:
            return list(self._channels)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            channels, self._channels = self._channels, {}
            self._stubs.clear()
            anchors, self._anchors = self._anchors, {}
        for anchor in anchors.values():
            if anchor.call is not None:
                anchor.call.cancel()
        for channel in channels.values():
            channel.close()

    def __enter__(self) -> ChannelPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ anchor calls

    def anchored(self, target: str) -> bool:
        """Whether the channel to `target` has an anchor call open."""
        anchor = self._anchors.get(target)
        return anchor is not None and anchor.call is not None

    def _anchor(self, target: str) -> None:
        """Opens the channel's anchor call unless it is open, backing off or abandoned."""
        now_ms = self._clock.monotonic_ms()
        with self._lock:
            channel = self._channels.get(target)
            if self._closed or channel is None:
                return
            anchor = self._anchors.get(target)
            if anchor is None:
                anchor = self._anchors[target] = _Anchor()
            elif anchor.call is not None or anchor.abandoned or now_ms < anchor.reopen_at_ms:
                return
            call = channel.unary_stream(ANCHOR_METHOD)(b"")
            anchor.call = call
            anchor.opened_ms = now_ms
        call.add_done_callback(lambda _call: self._anchor_ended(anchor, call))

    def _anchor_ended(self, anchor: _Anchor, call: grpc.Call) -> None:  # on a gRPC thread
        code = call.code()
        now_ms = self._clock.monotonic_ms()
        with self._lock:
            if anchor.call is not call:
                return
            anchor.call = None
            if code == grpc.StatusCode.UNIMPLEMENTED:
                anchor.abandoned = True
                return
            if now_ms - anchor.opened_ms >= self.reconnect_backoff_max_ms:
                anchor.young_endings = 0
            backoff_ms = min(self.reconnect_backoff_ms * 2 ** min(anchor.young_endings, 30),
                             self.reconnect_backoff_max_ms)
            anchor.young_endings += 1
            anchor.reopen_at_ms = now_ms + backoff_ms

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
            if error is not None and error.code == Errors.NETWORK_EXCEPTION:
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

    def send(self, target: str, service: str, method: str, request: Any,
             timeout_ms: float | None = None) -> PendingCall:
        """Starts one unary call and returns at once; raises RuntimeError when the pool is closed."""
        rpc = getattr(self.stub(target, service), method)
        anchor = self._anchors.get(target)
        if anchor is None or (anchor.call is None and not anchor.abandoned):
            self._anchor(target)
        self._begin(target)
        try:
            future = rpc.future(request, timeout=self.timeout_s(timeout_ms))
        except BaseException:
            self._end(target, None)
            raise
        call = PendingCall(target, method, future, lambda error: self._end(target, error))
        call.add_done_callback(PendingCall.outcome)
        return call

    def call_many(self, calls: Sequence[tuple[str, str, str, Any, float | None]]) -> list[Any]:
        """Sends every (target, service, method, request, timeout_ms) at once and waits for all.

        Returns, in order, each response or the KafkaError that call failed with. A single call is
        made blocking: the calling thread waits on the call itself, and gRPC starts no thread to
        complete it (as it does for an asynchronous call on a channel with none in flight).
        """
        if len(calls) == 1:
            try:
                return [self.call(*calls[0])]
            except KafkaError as error:
                return [error]
        pending = [self.send(target, service, method, request, timeout_ms)
                   for target, service, method, request, timeout_ms in calls]
        results: list[Any] = []
        for call in pending:
            response, error = call.outcome()
            results.append(response if error is None else error)
        return results
