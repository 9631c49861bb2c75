"""The process runtime every Odradek gRPC service shares.

`ServiceRuntime` owns one service process's plumbing: the gRPC server (message sizes bounded by
`GRPC_MAX_MESSAGE_BYTES`), the standard gRPC health service, the Prometheus metrics endpoint,
SIGTERM/SIGINT handling and the ordered shutdown hooks. A service's `__main__` builds its core,
registers its servicers here, calls `start()` and then `run_until_stopped()`.

Listener strings are Kafka's: `PLAINTEXT://host:port` (`listeners`, `advertised.listeners`); an
empty host means all interfaces.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from services.common.config import ConfigError
from services.common.logging_setup import configure_logging
from services.common.zk.errors import DuplicateRegistrationError

logger = logging.getLogger(__name__)

GRPC_MAX_MESSAGE_BYTES = 128 * 1024 * 1024
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


def insecure_channel(target: str) -> grpc.Channel:
    """A client channel with the same message-size bounds as the servers."""
    return grpc.insecure_channel(target, options=GRPC_OPTIONS)


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


def run_service(kind: str, description: str, config_class, server_class, node_id_key: str,
                argv: list[str] | None = None) -> int:
    """The whole of a service's `__main__`: parse `--config` / `--override`, load `config_class`
    (exit 2 with the error on a bad config), log as `<kind>-<id>`, run `server_class(config)`
    until stopped (exit 1 with Kafka's error when its id is registered by a live process).
    `node_id_key` names the config attribute holding the process's id."""
    args = service_arguments(description, argv)
    sources = [args.config] if args.config else []
    try:
        config = config_class.load(*sources, args.overrides)
    except ConfigError as exc:
        print(f"{kind}: {exc}", file=sys.stderr)
        return 2
    configure_logging(f"{kind}-{getattr(config, node_id_key)}")
    try:
        server_class(config).run()
    except DuplicateRegistrationError as exc:
        logger.error("%s cannot start: %s", kind, exc)
        return 1
    return 0


class ServiceRuntime:
    """gRPC server + health + metrics + signal-driven graceful shutdown for one service."""

    def __init__(self, name: str, bind_address: str, *, max_workers: int = 32,
                 metrics_port: int = -1, metrics_host: str = "127.0.0.1"):
        self.name = name
        self.bind_address = bind_address
        self.metrics_port = metrics_port
        self.metrics_host = metrics_host
        self.server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix=f"{name}-rpc"),
            options=GRPC_OPTIONS,
        )
        self.health = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        self.bound_port = 0
        self._stop = threading.Event()
        self._shutdown_hooks: list[tuple[str, Callable[[], None]]] = []

    def add_servicer(self, register: Callable[[object, grpc.Server], None], servicer: object) -> None:
        register(servicer, self.server)

    def on_shutdown(self, name: str, hook: Callable[[], None]) -> None:
        """Hooks run in registration order while the server still serves (then it stops)."""
        self._shutdown_hooks.append((name, hook))

    def set_serving(self, serving: bool, service: str = "") -> None:
        status = health_pb2.HealthCheckResponse.SERVING if serving else \
            health_pb2.HealthCheckResponse.NOT_SERVING
        self.health.set(service, status)
        if service == "":
            self.health.set(self.name, status)

    def start(self) -> int:
        self.bound_port = self.server.add_insecure_port(self.bind_address)
        if self.bound_port == 0:
            raise RuntimeError(f"{self.name}: cannot listen on {self.bind_address}")
        self.set_serving(False)
        self.server.start()
        if self.metrics_port >= 0:
            from prometheus_client import start_http_server

            start_http_server(self.metrics_port, addr=self.metrics_host)
        logger.info("%s listening on %s (port %d)", self.name, self.bind_address, self.bound_port)
        return self.bound_port

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
        self.server.stop(grace_s).wait(grace_s + 1)
        logger.info("%s stopped", self.name)
