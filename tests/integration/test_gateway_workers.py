"""A gateway of several worker processes (`num.workers`) in front of a real cluster answers as one
gateway: produce requests spread over its workers by fresh connections to the front port are
counted once each in `/metrics` on the front port and on every worker's own port, and every worker
answers `/ui/api/series` with the one history worker 0 samples."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import wait_until
from tests.integration.conftest import create_topic, gateway_module_cluster, worker_gateway

WORKERS = 3
PRODUCE_REQUESTS = 60
RECORDS_PER_REQUEST = 2
SAMPLE_INTERVAL_MS = 200
V2_BINARY = "application/vnd.kafka.binary.v2+json"
PRODUCE = {"method": "POST", "route": "/topics/{topic}", "status": "200"}


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    with gateway_module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "gwworkers",
                                gateways=0) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def gateway(cluster: LocalCluster, tmp_path_factory) -> Iterator[dict]:
    log = tmp_path_factory.mktemp("gateway-workers") / "gateway.log"
    with worker_gateway(cluster, log, WORKERS, **{"ui.sample.interval.ms": SAMPLE_INTERVAL_MS,
                                                  "request.timeout.ms": 10000}) as gateway:
        yield gateway


def metric(url: str, name: str, **labels: str) -> float:
    """The sum of the samples `name` with `labels` that `url`/metrics answers."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return sum(sample.value for family in text_string_to_metric_families(text) for sample in family.samples
               if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()))


def test_every_port_counts_the_requests_of_every_worker(gateway: dict, admin):
    topic = create_topic(admin, "spread", partitions=3)
    body = json.dumps({"records": [{"value": base64.b64encode(b"value-%d" % i).decode()}
                                   for i in range(RECORDS_PER_REQUEST)]})
    for _ in range(PRODUCE_REQUESTS):  # a connection each, so the kernel spreads them over the workers
        answer = httpx.post(f"{gateway['front']}/topics/{topic}", content=body,
                            headers={"Content-Type": V2_BINARY}, timeout=20)
        assert answer.status_code == 200, answer.text
    ports = [gateway["front"], *gateway["workers"]]

    def totals() -> list[tuple[float, float]]:
        return [(metric(url, "odradek_gateway_requests_total", **PRODUCE),
                 metric(url, "odradek_gateway_records_total", direction="produced")) for url in ports]

    expected = (PRODUCE_REQUESTS, PRODUCE_REQUESTS * RECORDS_PER_REQUEST)
    # a request is counted once its answer is sent, so the last may lag its answer by a moment
    wait_until(lambda: totals() == [expected] * len(ports), 10, message=lambda: f"totals {totals()}")
    assert metric(gateway["front"], "odradek_gateway_request_seconds_count",
                  method="POST", route="/topics/{topic}") == PRODUCE_REQUESTS
    assert {metric(url, "odradek_gateway_consumer_instances") for url in ports} == {0}


def test_every_worker_answers_with_worker_zeros_series(gateway: dict):
    answers: list[dict] = []

    def one_history() -> bool:
        """Every answer holds the same points at the sample times they share (at least two): a
        sample may land between two of the answers, so their windows may be shifted by one."""
        answers[:] = [httpx.get(f"{url}/ui/api/series", params={"top_topics": 3}, timeout=10).json()
                      for url in (*gateway["workers"], gateway["front"])]
        by_time = [{point["time_ms"]: point for point in answer["points"]} for answer in answers]
        shared = set.intersection(*(set(points) for points in by_time))
        return len(shared) >= 2 and all(points[t] == by_time[0][t] for points in by_time[1:] for t in shared)

    wait_until(one_history, 30, interval_s=0.05, message=lambda: "one history; the last sample times asked: "
               f"{[[point['time_ms'] for point in answer['points'][-3:]] for answer in answers]}")
    times = [point["time_ms"] for point in answers[0]["points"]]
    assert times == sorted(times) and len(set(times)) == len(times)
    assert answers[0]["interval_ms"] == SAMPLE_INTERVAL_MS
