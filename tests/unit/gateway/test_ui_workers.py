"""A gateway of several workers keeps one console history: a worker other than 0 answers
`/ui/api/series` with worker 0's answer to the same query (worker 0's app here, on ASGI), 503 in the
gateway's error shape when worker 0 does not answer; and where worker 0's own port is."""

from __future__ import annotations

import asyncio

import httpx
from fastapi import FastAPI

from services.devcluster.proc import free_port
from services.gateway.app import advertised_url
from services.gateway.config import GatewayConfig
from services.gateway.errors import install_error_handlers
from services.gateway.metrics import WORKER_HOP_HEADER, GatewayMetrics
from services.gateway.routes import ui
from services.gateway.state import GatewayState
from services.gateway.ui.sampler import Sampler
from services.gateway.ui.series import Sample, SampleRing

CONFIG = GatewayConfig.load({"bootstrap.servers": "127.0.0.1:9092", "listeners": "http://0.0.0.0:8080",
                             "num.workers": "3"})


def worker_app(index: int, **extensions) -> FastAPI:
    app = FastAPI()
    install_error_handlers(app)
    app.include_router(ui.router)
    app.state.gateway = GatewayState(CONFIG, None, None, GatewayMetrics(), "http://127.0.0.1:8080", index,
                                     dict(extensions))
    return app


def sampling_worker() -> FastAPI:
    ring = SampleRing(CONFIG.ui_sample_window_ms, CONFIG.ui_sample_interval_ms)
    for second, (a, b) in enumerate([(0, 0), (30, 3), (90, 4)]):
        ring.add(Sample(1_000_000 + second * 3000, {"a": a, "b": b}, {"g": second}))
    return worker_app(0, **{ui.SAMPLER_KEY: Sampler(None, ring)})


def get(app: FastAPI, path: str) -> httpx.Response:
    async def fetch() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://worker") as http:
            return await http.get(path)

    return asyncio.run(fetch())


def test_another_worker_answers_with_worker_zeros_series_for_the_same_query():
    zero = sampling_worker()
    to_zero = httpx.AsyncClient(transport=httpx.ASGITransport(app=zero), base_url="http://worker-0")
    other = worker_app(2, **{ui.SAMPLING_WORKER_KEY: to_zero})
    for query in ("", "?top_topics=1&top_groups=0"):
        mine, theirs = get(other, f"/ui/api/series{query}"), get(zero, f"/ui/api/series{query}")
        assert (mine.status_code, mine.json()) == (200, theirs.json())
        assert mine.headers["content-type"] == "application/json"
    assert len(get(other, "/ui/api/series?top_topics=1").json()["topics"]) <= 1
    assert get(other, "/ui/api/series?top_topics=99").status_code == 422  # checked here, as worker 0 would


def test_the_other_workers_ask_worker_zero_as_a_worker_hop():
    state = worker_app(1).state.gateway
    asyncio.run(ui.startup(state))
    client = state.extensions[ui.SAMPLING_WORKER_KEY]
    assert (str(client.base_url), client.headers[WORKER_HOP_HEADER]) == ("http://127.0.0.1:8081", "1")
    assert client.timeout.read == CONFIG.request_timeout_ms / 1000
    assert ui.SAMPLER_KEY not in state.extensions
    asyncio.run(ui.shutdown(state))
    assert client.is_closed


def test_a_worker_zero_that_does_not_answer_is_a_503():
    unanswered = httpx.AsyncClient(base_url=f"http://127.0.0.1:{free_port()}", timeout=2)
    answer = get(worker_app(1, **{ui.SAMPLING_WORKER_KEY: unanswered}), "/ui/api/series")
    assert answer.status_code == 503
    assert answer.json()["error_code"] == 503
    assert answer.json()["message"].startswith("The console's sampling worker (0) did not answer: ConnectError")


def test_worker_zero_is_reached_on_its_own_port_of_the_listener_host():
    assert ui.sampling_worker_url(CONFIG) == "http://127.0.0.1:8081"
    base = GatewayConfig.load({"bootstrap.servers": "b:9092", "listeners": "http://10.0.0.5:9000",
                               "advertised.listeners": "http://gateway.example:80", "worker.base.port": "9100"})
    assert ui.sampling_worker_url(base) == "http://10.0.0.5:9100"
    ipv6 = GatewayConfig.load({"bootstrap.servers": "b:9092", "listeners": "http://[::]:9000"})
    assert ui.sampling_worker_url(ipv6) == "http://[::1]:9001"


def test_an_https_gateway_names_its_own_urls_https() -> None:
    config = GatewayConfig.load({"bootstrap.servers": "127.0.0.1:9092", "listeners": "https://0.0.0.0:8443",
                                 "num.workers": "3"})
    assert advertised_url(config) == "https://127.0.0.1:8443"
    assert advertised_url(config, 8500) == "https://127.0.0.1:8500"
    assert ui.sampling_worker_url(config).startswith("https://127.0.0.1:")
    assert advertised_url(CONFIG) == "http://127.0.0.1:8080"
    assert config.own_hop_verify() is not True and CONFIG.own_hop_verify() is True
