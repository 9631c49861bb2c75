"""The process runtime every Odradek gRPC service shares.

`ServiceRuntime` owns one service process's plumbing: the gRPC server (message sizes bounded by
`GRPC_MAX_MESSAGE_BYTES`), the standard gRPC health service, the anchor method, the Prometheus
metrics endpoint, SIGTERM/SIGINT handling and the ordered shutdown hooks. The metrics endpoint
listens on the gRPC listener's interface unless told otherwise. A service's `__main__` builds its core,
registers its servicers here, calls `start()` and then `run_until_stopped()`, which first moves
everything the start-up left alive out of the garbage collector's reach (`freeze_started_heap`): the
modules, stubs and descriptors of a started service would otherwise be walked by every full
collection, a pause of tens of milliseconds on the event loop each time.

The server is `grpc.aio`'s, on an event loop thread of its own. A servicer method written
`async def` runs on that loop, so a request that waits (a long-poll fetch, an acks=all produce, a
JoinGroup) holds no thread: it awaits a `Completion` that the core's callback resolves from
whichever thread completes it. A plain `def` method runs in the runtime's executor
(`max_workers` threads), as it did under the synchronous server. Every unary call is counted and
timed per API (`request_metrics`). `RequestLimit` bounds how many
requests a service holds at once (`parked.max.requests`: Kafka bounds its request queue with
`queued.max.requests`, but a parked request here is only a future, so the bound is set by memory).

The anchor method (`ANCHOR_METHOD`, a stream of raw bytes that never carries a message) ends only
when the service stops: a client holds one such call open on every channel it makes asynchronous
calls on, so that gRPC keeps that channel's completion thread instead of starting one per call. The
service ends them all as it begins to stop, and later ones at once, so they do not hold its stop.

Listener strings are Kafka's: `PLAINTEXT://host:port` (`listeners`, `advertised.listeners`); an
empty host means all interfaces. An `SSL://` listener serves gRPC over TLS with the node's `ssl.*`
keys (`tls`; mutual TLS with `ssl.client.auth=required`), and `node_channel` connects to the other
nodes with the same identity. Before anything else, a call's `authorization: Basic` credentials are
verified against the node's `password_verifier` (`security.grpc_credentials`). With an authorizer
(`authorizer`), every RPC of the node's services needs what Kafka asks of the matching Kafka API
(`security.grpc_auth`), on any listener.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import signal
import sys
import threading
from collections.abc import Callable, Coroutine
from concurrent import futures
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio

from services.common.config import ConfigError
from services.common.errors import StartupRefusedError
from services.common.logging_setup import configure_logging
from services.common.request_metrics import RequestMetricsInterceptor
from services.common.security.authorizer import AclAuthorizer
from services.common.security.grpc_auth import AuthorizationInterceptor
from services.common.security.grpc_credentials import GrpcCredentialsInterceptor, PasswordVerifier
from services.common.security.tls import SSL_PROTOCOLS, TlsConfig, TlsSettings

logger = logging.getLogger(__name__)

GRPC_MAX_MESSAGE_BYTES = 128 * 1024 * 1024
LOOP_CALL_TIMEOUT_S = 30.0
ANCHOR_METHOD = "/odradek.common.v1.Anchor/Hold"
GRPC_OPTIONS = [
    ("grpc.max_send_message_length", GRPC_MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", GRPC_MAX_MESSAGE_BYTES),
    ("grpc.so_reuseport", 0),
]


@dataclass(frozen=True)
class Listener:
    protocol: str
    host: str
    port: int

    @property
    def address(self) -> str:
        return f"{self.host or '0.0.0.0'}:{self.port}"


def parse_listener(text: str) -> Listener:
    """`PLAINTEXT://127.0.0.1:9092` → Listener('PLAINTEXT', '127.0.0.1', 9092)."""
    protocol, sep, rest = text.strip().partition("://")
    if not sep:
        protocol, rest = "PLAINTEXT", text.strip()
    host, _, port = rest.rpartition(":")
    if not port.isdigit():
        raise ValueError(f"listener {text!r} has no port")
    return Listener(protocol.upper(), host.strip("[]"), int(port))


def listener_address(url: str) -> tuple[str, int]:
    """An HTTP listener's host and port: `http://0.0.0.0:8080` -> ("0.0.0.0", 8080)."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    if parts.port is None:
        raise ValueError(f"listener {url!r} has no port")
    return parts.hostname or "0.0.0.0", parts.port


def listener_scheme(url: str) -> str:
    """An HTTP listener's scheme: "https" for `https://host:port`, else "http"."""
    return "https" if url.strip().lower().startswith("https://") else "http"


def node_channel(target: str, tls: TlsSettings | None = None) -> grpc.Channel:
    """A channel from this node to another, with the same message-size bounds as the servers; over
    TLS, presenting this node's certificate, when `tls` is given."""
    if tls is None:
        return grpc.insecure_channel(target, options=GRPC_OPTIONS)
    return grpc.secure_channel(target, tls.grpc_channel_credentials(), options=GRPC_OPTIONS)


def listener_tls(listener: Listener, config: TlsConfig) -> TlsSettings | None:
    """The TLS of a gRPC listener: its `ssl.*` keys when it is an SSL listener, else None."""
    if listener.protocol not in SSL_PROTOCOLS:
        return None
    tls = config.tls_settings()
    if tls is None:
        raise ConfigError("listeners", listener.protocol, "an SSL listener needs ssl.keystore.location")
    return tls


def service_arguments(description: str, argv: list[str] | None = None) -> argparse.Namespace:
    """`python -m services.<name> [--config FILE] [--override key=value ...]`."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--config", help="a Java .properties file with Kafka's keys")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="set one config key (repeatable); environment ODRADEK_<KEY> also works")
    args = parser.parse_args(argv)
    overrides = {}
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--override {item!r} is not KEY=VALUE")
        overrides[key.strip()] = value.strip()
    args.overrides = overrides
    return args


def load_service_config(kind: str, description: str, config_class, node_id_key: str,
                        argv: list[str] | None = None) -> tuple[Any, argparse.Namespace] | None:
    """A process's start: parse `--config` / `--override`, load `config_class` and log as
    `<kind>-<id>` (`node_id_key` names the config attribute holding the process's id); the config
    and the parsed arguments, or None after printing the error of a bad config."""
    args = service_arguments(description, argv)
    args.sources = [args.config] if args.config else []
    try:
        config = config_class.load(*args.sources, args.overrides)
    except ConfigError as exc:
        print(f"{kind}: {exc}", file=sys.stderr)
        return None
    configure_logging(f"{kind}-{getattr(config, node_id_key)}")
    return config, args


def run_service(kind: str, description: str, config_class, server_class, node_id_key: str,
                argv: list[str] | None = None) -> int:
    """The whole of a service's `__main__`: `load_service_config` (exit 2 on a bad config), then
    run `server_class(config)` until stopped (exit 1 with the error when it refuses to start: its id
    is registered by a live process, its log dirs belong to another broker or cluster)."""
    loaded = load_service_config(kind, description, config_class, node_id_key, argv)
    if loaded is None:
        return 2
    config, _ = loaded
    try:
        server_class(config).run()
    except StartupRefusedError as exc:
        logger.error("%s cannot start: %s", kind, exc)
        return 1
    return 0


def _resolve(future: asyncio.Future, value: Any) -> None:
    if not future.done():
        future.set_result(value)


class Completion:
    """A one-shot result that a callback delivers, from any thread, to a coroutine on the loop.

    Created on the event loop; pass the object itself as the core's `respond` callback, then
    `await completion.result(timeout_s)` (None when the timeout passed first)."""

    __slots__ = ("loop", "future")

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.future = self.loop.create_future()

    def __call__(self, value: Any) -> None:
        if asyncio._get_running_loop() is self.loop:
            _resolve(self.future, value)
            return
        try:
            self.loop.call_soon_threadsafe(_resolve, self.future, value)
        except RuntimeError:  # the loop has closed: the server stopped and nobody waits any more
            pass

    async def result(self, timeout_s: float) -> Any:
        if self.future.done():  # answered at once (acks 0 or 1, a fetch with data): no timer
            return self.future.result()
        timer = self.loop.call_later(max(timeout_s, 0.0), _resolve, self.future, None)
        try:
            return await self.future
        finally:
            timer.cancel()


DEFAULT_PARKED_MAX_REQUESTS = 10_000


class RequestLimit:
    """At most `limit` requests held at once (`parked.max.requests`): `try_acquire` says
    whether one more may be taken, `release` gives its place back. Used on the event loop thread
    only, so it needs no lock."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0

    def try_acquire(self) -> bool:
        if self.held >= self.limit:
            return False
        self.held += 1
        return True

    def release(self) -> None:
        self.held -= 1

    def describe(self) -> str:
        return f"{self.held} requests are already held (parked.max.requests={self.limit})"


def freeze_started_heap() -> int:
    """Collects the start-up's garbage, then freezes what is left (`gc.freeze`): full collections
    walk only objects made since. A frozen object is still freed when its last reference goes; one
    left in a reference cycle is not, so what can stay behind is bounded by the start-up heap.
    Returns how many objects were frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


class _Anchors:
    """The anchor method's calls, ended when `release` is called (see the module docstring)."""

    def __init__(self) -> None:
        self._released = asyncio.Event()
        self.held = 0  # calls open

    async def hold(self, _request: bytes, _context: grpc.aio.ServicerContext) -> None:
        self.held += 1
        try:
            await self._released.wait()
        finally:
            self.held -= 1

    async def release(self) -> None:
        self._released.set()

    def handler(self) -> grpc.GenericRpcHandler:
        service, _, method = ANCHOR_METHOD.lstrip("/").partition("/")
        return grpc.method_handlers_generic_handler(
            service, {method: grpc.unary_stream_rpc_method_handler(self.hold)})


class ServiceRuntime:
    """grpc.aio server on its own event loop thread + health + metrics + signal-driven graceful
    shutdown for one service."""

    def __init__(self, name: str, bind_address: str, *, max_workers: int = 32,
                 metrics_port: int = -1, metrics_host: str | None = None, tls: TlsSettings | None = None):
        self.name = name
        self.bind_address = bind_address
        self.tls = tls
        self.authorizer: AclAuthorizer | None = None  # set once the node has started it
        self.password_verifier: PasswordVerifier | None = None  # set once the node reaches ZooKeeper
        self.metrics_port = metrics_port
        # by default on the gRPC listener's interface: loopback for a local cluster, every
        # interface in a container (`PLAINTEXT://:9092`), where Prometheus scrapes from outside
        self.metrics_host = metrics_host if metrics_host is not None else bind_address.rpartition(":")[0].strip("[]")
        self.executor = futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix=f"{name}-rpc")
        self.loop = asyncio.new_event_loop()
        self.loop.set_default_executor(self.executor)
        self._loop_thread = threading.Thread(target=self.loop.run_forever, name=f"{name}-rpc-loop",
                                             daemon=True)
        self._loop_thread.start()
        self.server = self.call_on_loop(self._build_server())
        self.health = health_aio.HealthServicer()
        self.add_servicer(health_pb2_grpc.add_HealthServicer_to_server, self.health)
        self._anchors = _Anchors()
        self.add_servicer(lambda anchors, server: server.add_generic_rpc_handlers((anchors.handler(),)),
                          self._anchors)
        self.bound_port = 0
        self._stop = threading.Event()
        self._shutdown_hooks: list[tuple[str, Callable[[], None]]] = []

    async def _build_server(self) -> grpc.aio.Server:
        return grpc.aio.server(migration_thread_pool=self.executor, options=GRPC_OPTIONS,
                               interceptors=[GrpcCredentialsInterceptor(lambda: self.password_verifier),
                                             RequestMetricsInterceptor(self.name),
                                             AuthorizationInterceptor(self._grpc_authorizer)])

    def _grpc_authorizer(self) -> AclAuthorizer | None:
        return self.authorizer

    def call_on_loop(self, coroutine: Coroutine, timeout_s: float = LOOP_CALL_TIMEOUT_S) -> Any:
        """Runs `coroutine` on the event loop from another thread and returns its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout_s)

    def add_servicer(self, register: Callable[[object, grpc.Server], None], servicer: object) -> None:
        async def add() -> None:
            register(servicer, self.server)

        self.call_on_loop(add())

    def on_shutdown(self, name: str, hook: Callable[[], None]) -> None:
        """Hooks run in registration order while the server still serves (then it stops)."""
        self._shutdown_hooks.append((name, hook))

    def set_serving(self, serving: bool, service: str = "") -> None:
        status = health_pb2.HealthCheckResponse.SERVING if serving else \
            health_pb2.HealthCheckResponse.NOT_SERVING

        async def publish() -> None:
            await self.health.set(service, status)
            if service == "":
                await self.health.set(self.name, status)

        if asyncio._get_running_loop() is self.loop:
            self.loop.create_task(publish())
        else:
            self.call_on_loop(publish())

    def start(self) -> int:
        async def bind_and_start() -> int:
            if self.tls is not None:
                port = self.server.add_secure_port(self.bind_address, self.tls.grpc_server_credentials())
            else:
                port = self.server.add_insecure_port(self.bind_address)
            if port:
                await self.server.start()
            return port

        try:
            self.bound_port = self.call_on_loop(bind_and_start())
        except RuntimeError as exc:
            raise RuntimeError(f"{self.name}: cannot listen on {self.bind_address}: {exc}") from exc
        if self.bound_port == 0:
            raise RuntimeError(f"{self.name}: cannot listen on {self.bind_address}")
        self.set_serving(False)
        self._start_metrics_endpoint()
        logger.info("%s listening on %s (port %d)", self.name, self.bind_address, self.bound_port)
        return self.bound_port

    def _start_metrics_endpoint(self) -> None:
        """`GET /metrics` on `metrics_port` (-1: none). A port taken elsewhere is logged, not fatal:
        the service serves its clients without it."""
        if self.metrics_port < 0:
            return
        from prometheus_client import start_http_server

        try:
            start_http_server(self.metrics_port, addr=self.metrics_host)
        except OSError as exc:
            logger.error("%s: cannot serve metrics on %s:%d: %s", self.name, self.metrics_host,
                         self.metrics_port, exc)
            return
        logger.info("%s serving metrics at http://%s:%d/metrics", self.name, self.metrics_host, self.metrics_port)

    def install_signal_handlers(self) -> None:
        def request_stop(signum, _frame):
            logger.info("%s received signal %d, shutting down", self.name, signum)
            self._stop.set()

        signal.signal(signal.SIGTERM, request_stop)
        signal.signal(signal.SIGINT, request_stop)

    def request_stop(self) -> None:
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def run_until_stopped(self, grace_s: float = 5.0) -> None:
        """Blocks until SIGTERM/SIGINT (or request_stop), then shuts down in order."""
        self.install_signal_handlers()
        freeze_started_heap()
        self._stop.wait()
        self.shutdown(grace_s)

    def shutdown(self, grace_s: float = 5.0) -> None:
        self._stop.set()
        self.set_serving(False)
        for name, hook in self._shutdown_hooks:
            try:
                hook()
            except Exception:
                logger.exception("%s: shutdown step %s failed", self.name, name)

        async def stop() -> None:
            await self._anchors.release()
            await self.server.stop(grace_s)

        try:
            self.call_on_loop(stop(), grace_s + 1)
        except Exception:
            logger.exception("%s: stopping the gRPC server failed", self.name)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._loop_thread.join(grace_s + 1)
        self.executor.shutdown(wait=False, cancel_futures=True)
        logger.info("%s stopped", self.name)
