"""`create_app(config)`: the gateway's FastAPI application.

The lifespan opens the process's clients (`GatewayState`) and closes them; each route module of
`services.gateway.routes` brings an `APIRouter` named `router` and may define `startup(state)` and
`shutdown(state)` coroutines for what it owns (consumer instances, say). Besides the routes:
`/health` (200 only while the cluster answers), `/metrics` (Prometheus), a request body cap
(`max.request.bytes`, 413 beyond it, counted as the body arrives so a chunked body is capped too)
and REST Proxy's error bodies for everything (`errors.install_error_handlers`).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from fastapi_offline import FastAPIOffline
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.concurrency import run_in_threadpool

from services.clients.admin import Admin
from services.clients.producer import Producer
from services.common.service import listener_address, listener_scheme
from services.gateway import routes
from services.gateway.config import GatewayConfig
from services.gateway.errors import CLUSTER_UNAVAILABLE, error_responses, install_error_handlers
from services.gateway.metrics import GatewayMetrics, MetricsMiddleware
from services.gateway.security import AuthenticationMiddleware, GatewaySecurity, authorize_route
from services.gateway.state import GatewayState, gateway_state

HEALTH_TIMEOUT_S = 2.0


ALL_INTERFACES = ("0.0.0.0", "::", "")


def advertised_url(config: GatewayConfig, port: int | None = None) -> str:
    """The base URL clients reach this process at: `advertised.listeners`, else `listeners` with
    127.0.0.1 for an all-interfaces host; `port` replaces the port (a worker's own listener)."""
    listener = config.advertised_listeners or config.listeners
    host, listen_port = listener_address(listener)
    if host in ALL_INTERFACES:
        host = "127.0.0.1"
    return f"{listener_scheme(listener)}://{host}:{port or listen_port}"


def local_url(config: GatewayConfig, port: int) -> str:
    """The base URL another process of this gateway reaches port `port` of `listeners` at: the
    listener's own host (loopback for all interfaces), whatever `advertised.listeners` says."""
    host = listener_address(config.listeners)[0]
    if host in ALL_INTERFACES:
        host = "::1" if host == "::" else "127.0.0.1"
    scheme = listener_scheme(config.listeners)
    return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"


class BodyLimitMiddleware:
    """Answers 413 to a body larger than `max_bytes`, by Content-Length or as it is received."""

    def __init__(self, app, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or ()).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._too_large(scope, receive, send)
            return
        received = 0

        async def limited_receive():
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise BodyTooLarge()
            return message

        try:
            await self.app(scope, limited_receive, send)
        except BodyTooLarge:
            await self._too_large(scope, receive, send)

    async def _too_large(self, scope, receive, send) -> None:
        response = JSONResponse({"error_code": 413, "message": f"The request body exceeds max.request.bytes "
                                                                f"({self.max_bytes} bytes)."}, status_code=413)
        await response(scope, receive, send)


class BodyTooLarge(Exception):
    pass


def create_app(config: GatewayConfig, *, worker_index: int = 0, base_url: str | None = None,
               metrics_dir: str | None = None) -> FastAPI:
    """The app of worker `worker_index` (0 alone), reached at `base_url`; `metrics_dir`: the
    workers' shared metrics directory (see `metrics`)."""
    metrics = GatewayMetrics(metrics_dir)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        admin = Admin(bootstrap_servers=config.bootstrap_servers, **config.client_settings(),
                      request_timeout_ms=config.request_timeout_ms,
                      default_api_timeout_ms=config.request_timeout_ms)
        producer = Producer(bootstrap_servers=config.bootstrap_servers, **config.client_settings(),
                            enable_idempotence=True, acks="all",
                            linger_ms=5, max_request_size=max(config.max_request_bytes, 1048576),
                            delivery_timeout_ms=config.request_timeout_ms + 1000,
                            request_timeout_ms=config.request_timeout_ms)
        state = GatewayState(config, admin, producer, metrics, base_url or advertised_url(config), worker_index)
        app.state.gateway = state
        started = []
        security = None
        try:
            security = app.state.security = await run_in_threadpool(GatewaySecurity.start, config)
            for module in routes.MODULES:
                if hasattr(module, "startup"):
                    await module.startup(state)
                started.append(module)
            yield
        finally:
            for module in reversed(started):
                if hasattr(module, "shutdown"):
                    await module.shutdown(state)
            producer.close(timeout=5)
            admin.close()
            if security is not None:
                security.close()

    # /docs and /redoc from the files fastapi-offline ships, so they work without the internet
    app = FastAPIOffline(title="Odradek HTTP gateway", version="1.0",
                  description="Confluent REST Proxy v2 and v3 over an Odradek cluster, with Arrow range reads.",
                  lifespan=lifespan, responses=error_responses(500), dependencies=[Depends(authorize_route)])
    install_error_handlers(app)
    for module in routes.MODULES:
        app.include_router(module.router)

    @app.get("/health", tags=["gateway"], summary="Ready while the cluster answers", responses=error_responses(503))
    async def health(request: Request) -> JSONResponse:
        state = gateway_state(request)
        try:
            cluster = await state.blocking(state.admin.describe_cluster, timeout_ms=int(HEALTH_TIMEOUT_S * 1000),
                                           timeout_s=HEALTH_TIMEOUT_S + 1)
        except Exception as exc:  # noqa: BLE001 - any failure means not ready
            return JSONResponse({"error_code": CLUSTER_UNAVAILABLE, "message": f"The cluster is unreachable: {exc}"},
                                status_code=503)
        return JSONResponse({"status": "ready", "cluster_id": cluster.cluster_id, "brokers": len(cluster.nodes)})

    @app.get("/metrics", tags=["gateway"], summary="Prometheus metrics of the gateway",
             response_class=PlainTextResponse)
    async def prometheus_metrics() -> Response:
        return Response(metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    app.add_middleware(AuthenticationMiddleware, security_of=lambda: getattr(app.state, "security", None))
    app.add_middleware(BodyLimitMiddleware, max_bytes=config.max_request_bytes)
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    return app
