"""`python -m services.gateway --config gateway.properties [--override key=value ...]`: the HTTP
gateway under uvicorn, on `listeners` (http://0.0.0.0:8080 by default).

With `num.workers` = N > 1 this process supervises N worker processes (spawned, each a uvicorn
server with its own app, clients and consumer instances). Worker i binds the front port with
SO_REUSEPORT, so the kernel spreads connections over the workers, and a port of its own
(`worker.base.port` + i, by default the front port + 1 + i), which the base_uri of its consumer
instances names (see `routes.consumers_v2`). SIGTERM or SIGINT to this process stops every worker
(SIGTERM, SIGKILL after `WORKER_STOP_TIMEOUT_S`); a worker that exits on its own stops the others
and this process (exit status 1); a worker whose supervisor dies is sent SIGTERM by the kernel
(PR_SET_PDEATHSIG), so no worker outlives it.

The workers' metrics are summed (see `metrics`): the supervisor makes a private directory for
them, names it in the environment the workers inherit, marks a worker that exits as dead there, and
removes the directory when it stops.
"""

from __future__ import annotations

import ctypes
import importlib
import logging
import multiprocessing
import multiprocessing.connection
import os
import secrets
import shutil
import signal
import socket
import sys
import tempfile
from collections.abc import Mapping

import uvicorn

from services.common.heap import keep_freed_heap
from services.common.logging_setup import configure_logging
from services.common.service import listener_address, load_service_config
from services.gateway.app import advertised_url, create_app
from services.gateway.config import GatewayConfig
from services.gateway.consumer_instances import worker_port
from services.gateway.metrics import MULTIPROCESS_DIR_ENV, mark_worker_dead

logger = logging.getLogger("services.gateway")

GRACEFUL_SHUTDOWN_S = 10
WORKER_STOP_TIMEOUT_S = 15.0
SUPERVISE_INTERVAL_S = 0.5
PR_SET_PDEATHSIG = 1


def main(argv: list[str] | None = None) -> int:
    loaded = load_service_config("gateway", "Odradek HTTP gateway: REST Proxy v2/v3 and Arrow range reads.",
                                 GatewayConfig, "gateway_id", argv)
    if loaded is None:
        return 2
    config, args = loaded
    if config.num_workers > 1:
        return supervise_workers(config, args.sources, args.overrides)
    keep_freed_heap()
    host, port = listener_address(config.listeners)
    uvicorn.run(create_app(config), host=host, port=port, log_config=None, access_log=False,
                timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S, **config.uvicorn_ssl())
    return 0


# ---------------------------------------------------------------------------------------------- supervisor


def supervise_workers(config: GatewayConfig, sources: list[str], overrides: Mapping[str, str]) -> int:
    """Runs `num.workers` worker processes until a signal (exit 0) or until one of them exits (exit 1)."""
    metrics_dir = tempfile.mkdtemp(prefix=f"odradek-gateway-{config.gateway_id}-metrics-")
    os.environ[MULTIPROCESS_DIR_ENV] = metrics_dir  # spawned workers inherit it before importing anything
    try:
        return run_workers(config, sources, overrides, metrics_dir)
    finally:
        shutil.rmtree(metrics_dir, ignore_errors=True)


def run_workers(config: GatewayConfig, sources: list[str], overrides: Mapping[str, str], metrics_dir: str) -> int:
    stop_requested = []

    def request_stop(signum: int, _frame) -> None:
        stop_requested.append(signum)

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    context = multiprocessing.get_context("spawn")
    # by its importable name: a spawned child cannot find functions of a `python -m` main module
    target = importlib.import_module("services.gateway.__main__").serve_worker
    overrides = dict(overrides)
    if config.authentication_method != "NONE" and not config.authentication_session_secret:
        # one key for every worker, so that a console session opened on one is taken by the others
        overrides["authentication.session.secret"] = secrets.token_urlsafe(32)
    workers = [context.Process(target=target, args=(sources, dict(overrides), index, os.getpid()),
                               name=f"gateway-{config.gateway_id}-worker-{index}")
               for index in range(config.num_workers)]
    for worker in workers:
        worker.start()
        logger.info("started %s (pid %d)", worker.name, worker.pid)
    failed = False
    while not stop_requested:
        ended = multiprocessing.connection.wait([worker.sentinel for worker in workers], SUPERVISE_INTERVAL_S)
        if ended and not stop_requested:
            gone = [worker for worker in workers if worker.sentinel in ended]
            for worker in gone:
                worker.join(1)
                mark_worker_dead(worker.pid, metrics_dir)
                logger.error("%s exited with status %s; stopping the gateway", worker.name, worker.exitcode)
            failed = True
            break
    stop_workers(workers)
    return 1 if failed else 0


def stop_workers(workers: list[multiprocessing.process.BaseProcess]) -> None:
    for worker in workers:
        if worker.is_alive():
            worker.terminate()
    for worker in workers:
        worker.join(WORKER_STOP_TIMEOUT_S)
        if worker.is_alive():
            logger.warning("%s did not stop within %g s; killing it", worker.name, WORKER_STOP_TIMEOUT_S)
            worker.kill()
            worker.join()


# ---------------------------------------------------------------------------------------------- worker


def serve_worker(sources: list[str], overrides: dict[str, str], index: int, supervisor_pid: int) -> None:
    """One worker process: the app of worker `index` on the shared front port and on its own port."""
    die_with_supervisor(supervisor_pid)
    keep_freed_heap()
    config = GatewayConfig.load(*sources, overrides)
    configure_logging(f"gateway-{config.gateway_id}-{index}")
    host, front_port = listener_address(config.listeners)
    own_port = worker_port(config, front_port, index)
    sockets = [listening_socket(host, front_port, reuse_port=True), listening_socket(host, own_port)]
    app = create_app(config, worker_index=index, base_url=advertised_url(config, own_port),
                     metrics_dir=os.environ.get(MULTIPROCESS_DIR_ENV))
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False,
                                           timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S, **config.uvicorn_ssl()))
    server.run(sockets=sockets)


def listening_socket(host: str, port: int, *, reuse_port: bool = False) -> socket.socket:
    """A bound TCP socket for uvicorn; `reuse_port` lets every worker bind the same front port."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.set_inheritable(True)
    return sock


def die_with_supervisor(supervisor_pid: int) -> None:
    """Asks the kernel for SIGTERM when the supervisor dies (Linux), and exits if it already has."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != supervisor_pid:
        sys.exit(1)


if __name__ == "__main__":
    sys.exit(main())
