"""The gateway under a property-based fuzzer (schemathesis) driven by its own `/openapi.json`: every
operation is called with generated paths, queries, headers and bodies, valid and not. No answer is a
5xx, none hangs (each call is bounded), and a request the gateway refuses leaves the topic it names
unchanged: the path's topic parameter is pinned to a topic holding records, so generated bodies
reach the produce handlers instead of stopping at 404."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from services.clients.admin import Admin
from services.clients.lowlevel import LowLevelClient
from services.common.records import build_batch
from services.devcluster.launcher import LocalCluster
from tests.integration.conftest import CLIENT_CONFIG, TEST_GATEWAY_CONFIG, create_topic, gateway_module_cluster

TOPIC = "fuzzed"
TOPIC_PARAMETERS = ("topic", "topic_name")
GROUP = "fuzz-group"
INSTANCE = "fuzz-instance"
CALL_TIMEOUT_S = TEST_GATEWAY_CONFIG["request.timeout.ms"] / 1000 + 10
calls: Counter[tuple[str, str, int]] = Counter()  # (method, path template, status) -> calls

SCHEMATHESIS_CONFIG = Path(__file__).with_name("schemathesis.toml")  # loads schemathesis_hooks (bodies as bytes)
CHECKS_ALL_EXAMPLES = 8  # per operation and phase: the run takes about a minute here
from tests.integration.schemathesis_hooks import keep_created_topics_small  # noqa: E402 - also Arrow as bytes


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    with gateway_module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "fuzz",
                                gateway_config={"consumer.instance.timeout.ms": 120000}) as cluster:
        with Admin(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as admin:
            create_topic(admin, TOPIC, 2)
            cluster.cluster_id = admin.describe_cluster().cluster_id
        with LowLevelClient(bootstrap_servers=cluster.bootstrap_servers) as client:
            for partition in (0, 1):
                client.produce(TOPIC, partition, build_batch([b"kept-1", b"kept-2"]))
        # an instance of a group with a committed offset, for the consumer routes' generated bodies
        with httpx.Client(base_url=cluster.gateway_url(), timeout=CALL_TIMEOUT_S) as http:
            v2 = {"Content-Type": "application/vnd.kafka.v2+json"}
            created = http.post(f"/consumers/{GROUP}", json={"name": INSTANCE, "format": "binary"}, headers=v2)
            assert created.status_code == 200, created.text
            instance = f"/consumers/{GROUP}/instances/{INSTANCE}"
            assert http.post(f"{instance}/assignments", headers=v2,
                             json={"partitions": [{"topic": TOPIC, "partition": 0}]}).status_code == 204
            committed = http.post(f"{instance}/offsets", headers=v2,
                                  json={"offsets": [{"topic": TOPIC, "partition": 0, "offset": 0}]})
            assert committed.status_code == 200, committed.text
        yield cluster


@pytest.fixture(scope="module")
def gateway_schema(cluster: LocalCluster):
    schema = schemathesis.openapi.from_url(f"{cluster.gateway_url()}/openapi.json")
    schema.config.update(base_url=cluster.gateway_url())
    return schema


@pytest.fixture(scope="module")
def end_offsets(cluster: LocalCluster):
    client = LowLevelClient(bootstrap_servers=cluster.bootstrap_servers)

    def read() -> dict[int, int]:
        answer = client.list_offsets({(TOPIC, 0): "latest", (TOPIC, 1): "latest"})
        return {tp.partition: result.offset for tp, result in answer.items()}

    yield read
    client.close()


schema = schemathesis.pytest.from_fixture("gateway_schema")


@schema.parametrize()
@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                 HealthCheck.function_scoped_fixture])
def test_no_answer_is_a_5xx_and_refused_requests_change_nothing(case, cluster: LocalCluster, end_offsets) -> None:
    parameters = case.path_parameters or {}
    if case.method.upper() != "DELETE":
        for name in TOPIC_PARAMETERS:
            if name in parameters:
                parameters[name] = TOPIC
        if "group" in parameters:
            parameters["group"] = GROUP
        if "instance" in parameters:
            parameters["instance"] = INSTANCE
        if "consumer_group_id" in parameters:
            parameters["consumer_group_id"] = GROUP
    if "cluster_id" in parameters:
        parameters["cluster_id"] = cluster.cluster_id
    if "partition" in parameters or "partition_id" in parameters:
        key = "partition" if "partition" in parameters else "partition_id"
        if not isinstance(parameters[key], int) or parameters[key] not in (0, 1):
            parameters[key] = 0
    keep_created_topics_small(case.body)  # topics are created for real: small ones
    before = end_offsets()
    try:
        response = case.call(base_url=cluster.gateway_url(), timeout=CALL_TIMEOUT_S)
    except httpx.TimeoutException as exc:  # pragma: no cover - a failure's report
        pytest.fail(f"{case.method} {case.formatted_path} hung past {CALL_TIMEOUT_S} s: {exc}")
    calls[(case.method.upper(), case.path, response.status_code)] += 1
    assert response.status_code < 500, f"{case.method} {case.formatted_path}: {response.status_code} {response.text}"
    if response.status_code >= 400:
        assert end_offsets() == before, f"{case.method} {case.formatted_path} was refused but wrote records"


def test_every_operation_was_called(gateway_schema) -> None:
    """Runs after the fuzzing above: each operation of the description was called and answered."""
    per_operation = Counter()
    for (method, path, _status), count in calls.items():
        per_operation[(method, path)] += count
    operations = [(operation.method.upper(), operation.path)
                  for operation in (result.ok() for result in gateway_schema.get_all_operations())]
    print("\n".join(f"{method} {path}: {dict((s, c) for (m, p, s), c in calls.items() if (m, p) == (method, path))}"
                    for method, path in operations))
    assert operations and all(per_operation[op] for op in operations), per_operation
    with_inputs = [op for op in operations if "{" in op[1] or op[0] == "POST"]
    assert all(per_operation[op] >= 10 for op in with_inputs), per_operation



def test_schemathesis_checks_all_find_nothing(cluster: LocalCluster, tmp_path: Path) -> None:
    """`schemathesis run --checks all` on the gateway's own OpenAPI (its coverage and fuzzing
    phases, a bounded number of examples): every answer is documented (status, content type, body
    schema, Allow of a 405), every schema-valid request accepted and every other refused."""
    root = Path(__file__).resolve().parents[2]
    report = tmp_path / "report.json"
    command = [str(Path(sys.executable).with_name("schemathesis")), "--config-file", str(SCHEMATHESIS_CONFIG), "run",
               "--checks", "all", "--phases", "coverage,fuzzing", "--max-examples", str(CHECKS_ALL_EXAMPLES),
               "--seed", "1", "--workers", "1", "--request-timeout", str(CALL_TIMEOUT_S), "--report", "json",
               "--report-json-path", str(report), f"{cluster.gateway_url()}/openapi.json"]
    run = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600,
                         env={**os.environ, "PYTHONPATH": str(root)})
    summary = run.stdout[run.stdout.find("SUMMARY"):]
    print(summary)
    assert run.returncode == 0, run.stdout[-20000:] + run.stderr[-3000:]
