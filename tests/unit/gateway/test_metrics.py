"""The gateway's HTTP metrics label a request by its route template, method and status, never by
its raw path, and not again when another worker asks on a client's behalf; worker processes sharing
a metrics directory answer with their sum."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from fastapi import FastAPI
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from services.gateway.metrics import (
    MULTIPROCESS_DIR_ENV,
    WORKER_HOP_HEADER,
    GatewayMetrics,
    MetricsMiddleware,
    mark_worker_dead,
)

ROOT = Path(__file__).resolve().parents[3]


def test_requests_are_labelled_by_route_template_method_and_status():
    app = FastAPI()

    @app.get("/topics/{topic}")
    def topic(topic: str) -> dict:
        return {"name": topic}

    metrics = GatewayMetrics()
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    with TestClient(app) as client:
        for name in ("a", "b"):
            assert client.get(f"/topics/{name}").status_code == 200
        assert client.get("/nowhere/x").status_code == 404
        # another worker asking on a client's behalf: the client's request was counted where it arrived
        assert client.get("/topics/a", headers={WORKER_HOP_HEADER: "1"}).status_code == 200
    value = metrics.registry.get_sample_value
    assert value("odradek_gateway_requests_total",
                 {"method": "GET", "route": "/topics/{topic}", "status": "200"}) == 2
    assert value("odradek_gateway_requests_total", {"method": "GET", "route": "unmatched", "status": "404"}) == 1
    assert value("odradek_gateway_request_seconds_count", {"method": "GET", "route": "/topics/{topic}"}) == 2
    assert "/topics/a" not in metrics.exposition().decode()


COUNTING_WORKER = """
import os, sys
from services.gateway.metrics import GatewayMetrics
metrics = GatewayMetrics()
for _ in range(int(sys.argv[1])):
    metrics.requests.labels("POST", "/topics/{topic_name}", "200").inc()
    metrics.latency.labels("POST", "/topics/{topic_name}").observe(0.003)
metrics.produced(10 * int(sys.argv[1]))
metrics.consumer_instances.set(int(sys.argv[1]))
print(os.getpid())
"""


def run_worker(metrics_dir: Path, requests: int) -> int:
    """A process counting as a gateway worker does, into `metrics_dir`; its pid."""
    env = {**os.environ, MULTIPROCESS_DIR_ENV: str(metrics_dir), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", COUNTING_WORKER, str(requests)], env=env, check=True,
                          capture_output=True, text=True, timeout=60)
    return int(done.stdout)


def samples(metrics: GatewayMetrics) -> dict[tuple[str, frozenset], float]:
    text = metrics.exposition().decode()
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def test_workers_sharing_a_directory_answer_with_their_sum_and_dead_workers_leave_the_gauge(tmp_path: Path):
    first, second = run_worker(tmp_path, 3), run_worker(tmp_path, 4)
    produce = frozenset({"method": "POST", "route": "/topics/{topic_name}", "status": "200"}.items())
    for answering in (GatewayMetrics(str(tmp_path)), GatewayMetrics(str(tmp_path))):  # any worker: one answer
        seen = samples(answering)
        assert seen[("odradek_gateway_requests_total", produce)] == 7
        assert seen[("odradek_gateway_request_seconds_count", produce - {("status", "200")})] == 7
        assert seen[("odradek_gateway_records_total", frozenset({("direction", "produced")}))] == 70
        assert seen[("odradek_gateway_consumer_instances", frozenset())] == 7
        assert not any(name.endswith("_created") for name, _ in seen)
    mark_worker_dead(first, str(tmp_path))
    seen = samples(GatewayMetrics(str(tmp_path)))
    assert seen[("odradek_gateway_consumer_instances", frozenset())] == 4  # the live worker's instances only
    assert seen[("odradek_gateway_requests_total", produce)] == 7  # what the dead worker answered still counts
    assert second != first
