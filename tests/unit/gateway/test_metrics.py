"""The gateway's HTTP metrics label a request by its route template, method and status, never by
its raw path."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.testclient import TestClient

from services.gateway.metrics import GatewayMetrics, MetricsMiddleware


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
    value = metrics.registry.get_sample_value
    assert value("odradek_gateway_requests_total",
                 {"method": "GET", "route": "/topics/{topic}", "status": "200"}) == 2
    assert value("odradek_gateway_requests_total", {"method": "GET", "route": "unmatched", "status": "404"}) == 1
    assert value("odradek_gateway_request_seconds_count", {"method": "GET", "route": "/topics/{topic}"}) == 2
    assert "/topics/a" not in metrics.exposition().decode()
