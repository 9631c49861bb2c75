"""The web console: its pages at `/ui` and the few JSON views REST Proxy v3 does not serve.

    GET /ui                                   the console (static/index.html); /ui/static/{file}: its assets
    GET | POST /ui/login, POST /ui/logout     the login form (with authentication on) and its session cookie
    GET /ui/api/health                        {"controller": {"id", "host", "port"} or null,
                                               "offline_broker_ids", "partitions",
                                               "under_replicated_partitions", "offline_partitions"}
    GET /ui/api/topics?q=&offset=&limit=      {"total", "topics": [views.topic_row]}, names containing q
    GET /ui/api/topics/{t}/partitions         {"topic", "partitions": [views.partition_row]} (ISR included)
    GET /ui/api/groups?q=&offset=&limit=      {"total", "groups": [views.group_view]}, lag as `odradek
                                               consumer-groups --describe` computes it (the groups
                                               asked at once, one ListOffsets for all their partitions)
    GET /ui/api/series?top_topics=&top_groups=  series.series of the sampler's ring, with its interval,
                                                 the last good sample's time and whether it is stale

Everything else the pages show comes from the v3 routes (cluster id, live brokers, a topic's
offsets, records). `startup` starts the `Sampler` (every `ui.sample.interval.ms`, a window of
`ui.sample.window.ms`), `shutdown` stops it. The routes are left out of the OpenAPI document.

Several workers (`num.workers` > 1) keep one history: only worker 0 samples, and another worker
answers `/ui/api/series` with worker 0's answer to the same query, fetched from worker 0's own
port within `request.timeout.ms` (503 when worker 0 does not answer it; worker 0 does not count
that request in the metrics, see `metrics.WORKER_HOP_HEADER`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode

import httpx
from fastapi import APIRouter, Query, Request
from fastapi.responses import FileResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from services.clients.admin_types import TopicDescription
from services.clients.cli_groups import described_partitions, partition_offsets
from services.common.service import listener_address
from services.gateway.config import GatewayConfig
from services.gateway.consumer_instances import worker_port
from services.gateway.errors import RestError
from services.gateway.metrics import WORKER_HOP_HEADER
from services.gateway.routes.v3_resources import cluster_call, describe_topic, not_found
from services.gateway.security import SESSION_COOKIE, SESSION_TTL_S, AuthenticationFailed, security_of
from services.gateway.state import GatewayState, State
from services.gateway.ui import series, views
from services.gateway.ui.sampler import Sampler

router = APIRouter(tags=["console"], include_in_schema=False)

STATIC_DIR = Path(__file__).resolve().parent.parent / "ui" / "static"
SAMPLER_KEY = "ui.sampler"
SAMPLING_WORKER_KEY = "ui.sampling_worker"  # an httpx.AsyncClient of worker 0's own port
SAMPLING_WORKER = 0
PAGE_LIMIT_MAX = 500


async def startup(state: GatewayState) -> None:
    if state.worker_index != SAMPLING_WORKER:
        state.extensions[SAMPLING_WORKER_KEY] = httpx.AsyncClient(
            base_url=sampling_worker_url(state.config), timeout=state.request_timeout_s,
            verify=state.config.own_hop_verify(),
            headers={WORKER_HOP_HEADER: str(state.worker_index)})
        return
    ring = series.SampleRing(state.config.ui_sample_window_ms, state.config.ui_sample_interval_ms)
    sampler = Sampler(state.admin, ring)
    sampler.start(lambda call: state.blocking(call))
    state.extensions[SAMPLER_KEY] = sampler


async def shutdown(state: GatewayState) -> None:
    sampler = state.extensions.pop(SAMPLER_KEY, None)
    if sampler is not None:
        await sampler.stop()
    client: httpx.AsyncClient | None = state.extensions.pop(SAMPLING_WORKER_KEY, None)
    if client is not None:
        await client.aclose()


def sampling_worker_url(config: GatewayConfig) -> str:
    """Where this host reaches the own port of the worker that samples."""
    from services.gateway.app import local_url  # the app imports the routes

    return local_url(config, worker_port(config, listener_address(config.listeners)[1], SAMPLING_WORKER))


# ------------------------------------------------------------------ pages

@router.get("/ui")
async def console_root() -> RedirectResponse:
    return RedirectResponse("/ui/", status_code=307)


@router.get("/ui/")
async def console_page() -> FileResponse:
    return FileResponse(STATIC_DIR / "index.html", headers={"Cache-Control": "no-cache"})


@router.get("/ui/static/{name}")
async def console_asset(name: str) -> FileResponse:
    path = (STATIC_DIR / name).resolve()
    if path.parent != STATIC_DIR or not path.is_file():
        raise not_found()
    return FileResponse(path, headers={"Cache-Control": "no-cache"})


@router.get("/ui/login")
async def login_page(request: Request) -> Response:
    security = security_of(request)
    if security is None or not security.enabled:
        return RedirectResponse("/ui/", status_code=303)
    if "method" not in request.query_params:
        query = urlencode({**request.query_params, "method": security.config.authentication_method})
        return RedirectResponse(f"/ui/login?{query}", status_code=303)
    return FileResponse(STATIC_DIR / "login.html", headers={"Cache-Control": "no-cache"})


@router.post("/ui/login")
async def login(request: Request) -> RedirectResponse:
    """The login form (application/x-www-form-urlencoded): a session cookie and the console, or the
    form again saying the credentials were refused."""
    security = security_of(request)
    if security is None or not security.enabled:
        return RedirectResponse("/ui/", status_code=303)
    form = {key: values[0] for key, values in parse_qs((await request.body()).decode("utf-8", "replace")).items()}
    try:
        principal = await run_in_threadpool(security.login, form.get("username", ""), form.get("password", ""),
                                            form.get("token", ""))
    except AuthenticationFailed:
        return RedirectResponse("/ui/login?failed=1", status_code=303)
    answer = RedirectResponse("/ui/", status_code=303)
    answer.set_cookie(SESSION_COOKIE, security.new_session(principal), max_age=SESSION_TTL_S, httponly=True,
                      samesite="strict", secure=request.url.scheme == "https")
    return answer


@router.post("/ui/logout")
async def logout() -> RedirectResponse:
    answer = RedirectResponse("/ui/login", status_code=303)
    answer.delete_cookie(SESSION_COOKIE)
    return answer


# ------------------------------------------------------------------ JSON views

Offset = Query(0, ge=0)
Limit = Query(50, ge=1, le=PAGE_LIMIT_MAX)


@router.get("/ui/api/health")
async def health(state: State) -> dict[str, Any]:
    cluster = await cluster_call(state, state.admin.describe_cluster)
    names = await cluster_call(state, state.admin.list_topics)
    described = await cluster_call(state, state.admin.describe_topics, names, raise_errors=False)
    topics = [topic for topic in described.values() if isinstance(topic, TopicDescription)]
    controller = cluster.controller
    where = None if controller is None else {"id": controller.node_id, "host": controller.host, "port": controller.port}
    return {"controller": where, **views.cluster_health((node.node_id for node in cluster.nodes), topics)}


@router.get("/ui/api/topics")
async def topics(state: State, q: str = "", offset: int = Offset, limit: int = Limit) -> dict[str, Any]:
    total, names = views.page(await cluster_call(state, state.admin.list_topics), q, offset, limit)
    described = await cluster_call(state, state.admin.describe_topics, names, raise_errors=False) if names else {}
    found = [described[name] for name in names if isinstance(described.get(name), TopicDescription)]
    specs = {info.topic_partition: None for topic in found for info in topic.partitions}
    earliest = latest = {}
    if specs:
        earliest = await cluster_call(state, state.admin.list_offsets, dict.fromkeys(specs, "earliest"),
                                      raise_errors=False)
        latest = await cluster_call(state, state.admin.list_offsets, dict.fromkeys(specs, "latest"),
                                    raise_errors=False)
    return {"total": total, "offset": offset, "topics": [views.topic_row(t, earliest, latest) for t in found]}


@router.get("/ui/api/topics/{topic_name}/partitions")
async def topic_partitions(topic_name: str, state: State) -> dict[str, Any]:
    topic = await describe_topic(state, topic_name)
    rows = [views.partition_row(info) for info in sorted(topic.partitions, key=lambda info: info.partition)]
    return {"topic": topic.name, "replication_factor": topic.replication_factor, "partitions": rows}


@router.get("/ui/api/groups")
async def groups(state: State, q: str = "", offset: int = Offset, limit: int = Limit) -> dict[str, Any]:
    listings = await cluster_call(state, state.admin.list_consumer_groups)
    total, group_ids = views.page((listing.group_id for listing in listings), q, offset, limit)
    admin = state.admin
    described = await asyncio.gather(*(cluster_call(state, admin.describe_consumer_groups, [g]) for g in group_ids))
    descriptions = {g: answer[g] for g, answer in zip(group_ids, described, strict=True)}
    committed = dict(zip(group_ids, await asyncio.gather(
        *(cluster_call(state, admin.list_consumer_group_offsets, g) for g in group_ids)), strict=True))
    partitions = {tp for g in group_ids for tp in described_partitions(committed[g], descriptions[g])}
    log_end = await cluster_call(state, admin.list_offsets, dict.fromkeys(sorted(partitions), "latest"),
                                 raise_errors=False) if partitions else {}
    answer = [views.group_view(descriptions[g], partition_offsets(descriptions[g], committed[g], log_end))
              for g in group_ids]
    return {"total": total, "offset": offset, "groups": answer}


@router.get("/ui/api/series")
async def sampled_series(request: Request, state: State, top_topics: int = Query(8, ge=0, le=50),
                         top_groups: int = Query(8, ge=0, le=50)) -> Any:
    sampling_worker: httpx.AsyncClient | None = state.extensions.get(SAMPLING_WORKER_KEY)
    if sampling_worker is not None:
        return await series_of_sampling_worker(sampling_worker, request.url.query)
    sampler: Sampler | None = state.extensions.get(SAMPLER_KEY)
    samples = sampler.ring.samples() if sampler else []
    status = sampler.status() if sampler else {"last_sample_ms": None, "stale": True, "failing_since_ms": None,
                                                "failures": 0, "last_error": "the console's sampler is off"}
    return {"interval_ms": state.config.ui_sample_interval_ms, "window_ms": state.config.ui_sample_window_ms,
            **status, **series.series(samples, top_topics=top_topics, top_groups=top_groups)}


async def series_of_sampling_worker(client: httpx.AsyncClient, query: str) -> Response:
    """Worker 0's answer to `/ui/api/series?<query>`, as it sent it; 503 when it gives none."""
    try:
        answer = await client.get("/ui/api/series", params=httpx.QueryParams(query))
    except httpx.HTTPError as exc:
        raise sampler_unavailable(f"{type(exc).__name__}: {exc}") from None
    if answer.status_code != 200:
        raise sampler_unavailable(f"HTTP {answer.status_code}")
    return Response(answer.content, media_type=answer.headers.get("content-type", "application/json"))


def sampler_unavailable(reason: str) -> RestError:
    return RestError(503, 503, f"The console's sampling worker ({SAMPLING_WORKER}) did not answer: {reason}")
