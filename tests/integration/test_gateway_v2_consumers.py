"""REST Proxy v2 consumer instances through a real uvicorn gateway against a real cluster: an instance
subscribes, reads (binary and json; read_committed skipping aborted transactions), commits, is
deleted, and a new instance of its group resumes at the committed offsets; two instances of one
group share a topic's partitions; assignments and positions (beginning, end, explicit); Confluent's
error codes; 50 long-polling instances leave the gateway's threadpool free; and a gateway of two
worker processes (started here, against the same cluster) whose instances are reached through their
base_uri and by redirect from the front port, and which closes instances idle past
consumer.instance.timeout.ms."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from services.clients.admin import Admin
from services.clients.lowlevel import LowLevelClient
from services.common.errors import Errors
from services.common.health import http_ready
from services.common.records import build_batch
from services.common.shared_types import TxnMarker
from services.common.topic_partition import TopicPartition
from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import wait_until
from services.gateway.consumer_instances import owner_of
from services.gateway.metrics import MULTIPROCESS_DIR_ENV
from tests.integration.conftest import create_topic, gateway_module_cluster, produce_values, worker_gateway

V2 = "application/vnd.kafka.v2+json"
BINARY = "application/vnd.kafka.binary.v2+json"
JSON_EMBEDDED = "application/vnd.kafka.json.v2+json"
EXPIRY_MS = 8000  # long enough for the two-worker test's requests to each instance on a loaded machine
READ_WAIT_MS = 3000
EAGER_WAIT_MS = 30000  # a read past fetch.min.bytes answers long before this


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    with gateway_module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "gwconsumers") as cluster:
        yield cluster


@pytest.fixture(scope="module")
def http(cluster: LocalCluster) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=cluster.gateway_url(), timeout=20, headers={"Content-Type": V2}) as client:
        yield client


@pytest.fixture(scope="module")
def two_workers(cluster: LocalCluster, tmp_path_factory) -> Iterator[dict]:
    """A second gateway of two worker processes, with a short consumer.instance.timeout.ms."""
    log = tmp_path_factory.mktemp("two-workers") / "gateway.log"
    with worker_gateway(cluster, log, 2, **{"gateway.id": 2, "consumer.instance.timeout.ms": EXPIRY_MS,
                                            "consumer.request.timeout.ms": 500, "request.timeout.ms": 10000}) as gw:
        yield gw


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def create_instance(client: httpx.Client, group: str, **settings) -> dict[str, str]:
    response = client.post(f"/consumers/{group}", json=settings, headers={"Content-Type": V2})
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"instance_id", "base_uri"}
    return body


def read_until(client: httpx.Client, base_uri: str, count: int, accept: str = BINARY,
               timeout_s: float = 30) -> list[dict]:
    """Reads the instance until `count` records arrived (more is a failure)."""
    records: list[dict] = []

    def enough() -> bool:
        response = client.get(f"{base_uri}/records", params={"timeout": 300}, headers={"Accept": accept})
        assert response.status_code == 200, response.text
        records.extend(response.json())
        return len(records) >= count

    wait_until(enough, timeout_s, interval_s=0, message=lambda: f"{count} records (got {len(records)})")
    assert len(records) == count, records
    return records


def committed(client: httpx.Client, base_uri: str, topic: str, partitions: range) -> dict[int, int]:
    response = client.request("GET", f"{base_uri}/offsets", headers={"Content-Type": V2},
                              json={"partitions": [{"topic": topic, "partition": p} for p in partitions]})
    assert response.status_code == 200, response.text
    return {item["partition"]: item["offset"] for item in response.json()["offsets"]}


def error_of(response: httpx.Response) -> tuple[int, int]:
    return response.status_code, response.json()["error_code"]


def gauge(url: str) -> float:
    text = httpx.get(f"{url}/metrics").text
    line = next(line for line in text.splitlines() if line.startswith("odradek_gateway_consumer_instances "))
    return float(line.split()[1])


# ---------------------------------------------------------------------------------------------- one worker


def test_an_instance_reads_commits_and_a_new_instance_resumes_at_the_commit(
        cluster: LocalCluster, http: httpx.Client, admin: Admin, writer: LowLevelClient):
    topic = create_topic(admin, "resume", partitions=1)
    values = [f"value-{i}".encode() for i in range(10)]
    produce_values(writer, topic, 0, values, keys=[f"key-{i}".encode() for i in range(10)])
    first = create_instance(http, "resumers", name="first", format="binary",
                            **{"auto.offset.reset": "earliest", "auto.commit.enable": "false"})
    assert first["instance_id"] == "first"
    assert first["base_uri"] == f"{cluster.gateway_url()}/consumers/resumers/instances/first"
    base = first["base_uri"]
    assert http.post(f"{base}/subscription", json={"topics": [topic]}).status_code == 204
    assert http.get(f"{base}/subscription").json() == {"topics": [topic]}

    records = read_until(http, base, 10)
    assert [(r["topic"], r["partition"], r["offset"]) for r in records] == [(topic, 0, i) for i in range(10)]
    assert [base64.b64decode(r["value"]) for r in records] == values
    assert [base64.b64decode(r["key"]) for r in records] == [f"key-{i}".encode() for i in range(10)]
    assert gauge(cluster.gateway_url()) >= 1

    # the offsets body names the last record processed; the group's committed offset is the next one
    response = http.post(f"{base}/offsets", json={"offsets": [{"topic": topic, "partition": 0, "offset": 5}]})
    assert (response.status_code, response.json()) == (200, [])
    assert committed(http, base, topic, range(1)) == {0: 6}
    assert http.delete(base).status_code == 204
    assert error_of(http.get(f"{base}/subscription")) == (404, 40403)
    assert error_of(http.delete(base)) == (404, 40403)

    second = create_instance(http, "resumers", name="second", **{"auto.offset.reset": "earliest",
                                                                "auto.commit.enable": "false"})["base_uri"]
    assert http.post(f"{second}/subscription", json={"topics": [topic]}).status_code == 204
    resumed = read_until(http, second, 4)
    assert [r["offset"] for r in resumed] == [6, 7, 8, 9]
    # no body: commit everything answered so far
    assert http.post(f"{second}/offsets").status_code == 200
    assert committed(http, second, topic, range(1)) == {0: 10}
    assert http.delete(second).status_code == 204


def test_an_instance_created_read_committed_skips_aborted_transactions(
        http: httpx.Client, admin: Admin, writer: LowLevelClient):
    topic = create_topic(admin, "gateway-txn", partitions=1)
    aborted = build_batch([b"aborted"], producer_id=900011, producer_epoch=0, base_sequence=0, is_transactional=True)
    assert writer.produce(topic, 0, aborted, acks=-1).error_code == Errors.NONE
    assert writer.write_txn_marker(TxnMarker(900011, 0, False, 0), [(topic, 0)]) == {
        TopicPartition(topic, 0): Errors.NONE}
    produce_values(writer, topic, 0, [b"plain"])
    for level, expected in (("read_committed", [b"plain"]), ("read_uncommitted", [b"aborted", b"plain"])):
        base = create_instance(http, f"txn-{level}", **{"auto.offset.reset": "earliest",
                                                        "isolation.level": level})["base_uri"]
        assert http.post(f"{base}/subscription", json={"topics": [topic]}).status_code == 204
        assert [base64.b64decode(r["value"]) for r in read_until(http, base, len(expected))] == expected
        assert http.delete(base).status_code == 204


def test_a_json_instance_reads_json_values_and_refuses_the_binary_format(
        http: httpx.Client, admin: Admin, writer: LowLevelClient):
    topic = create_topic(admin, "json-values", partitions=1)
    documents = [{"n": i, "tags": ["a", None]} for i in range(3)]
    produce_values(writer, topic, 0, [json.dumps(d).encode() for d in documents],
                   keys=[b'"k"', None, b"17"])
    base = create_instance(http, "json-readers", format="json", **{"auto.offset.reset": "earliest"})["base_uri"]
    assert http.post(f"{base}/subscription", json={"topic_pattern": "json-val.*"}).status_code == 204
    assert error_of(http.get(f"{base}/records", headers={"Accept": BINARY})) == (406, 40601)
    records = read_until(http, base, 3, accept=JSON_EMBEDDED)
    assert [r["value"] for r in records] == documents
    assert [r["key"] for r in records] == ["k", None, 17]
    binary = create_instance(http, "json-readers", format="binary")["base_uri"]
    assert error_of(http.get(f"{binary}/records", headers={"Accept": JSON_EMBEDDED})) == (406, 40601)
    for uri in (base, binary):
        assert http.delete(uri).status_code == 204


def test_two_instances_of_a_group_share_the_partitions(http: httpx.Client, admin: Admin, writer: LowLevelClient):
    topic = create_topic(admin, "shared", partitions=4)
    for partition in range(4):
        produce_values(writer, topic, partition, [f"p{partition}-{i}".encode() for i in range(3)])
    uris = [create_instance(http, "sharers", **{"auto.offset.reset": "earliest"})["base_uri"] for _ in range(2)]
    for uri in uris:
        assert http.post(f"{uri}/subscription", json={"topics": [topic]}).status_code == 204
    seen: dict[int, set[int]] = {0: set(), 1: set()}

    def shared() -> bool:
        assigned = []
        for index, uri in enumerate(uris):
            response = http.get(f"{uri}/records", params={"timeout": 200}, headers={"Accept": BINARY})
            assert response.status_code == 200, response.text
            seen[index] |= {record["partition"] for record in response.json()}
            assigned.append({p["partition"] for p in http.get(f"{uri}/assignments").json()["partitions"]})
        return all(assigned) and not assigned[0] & assigned[1] and assigned[0] | assigned[1] == set(range(4))

    wait_until(shared, 30, interval_s=0, message="the two instances to split the four partitions")
    for uri in uris:
        assert http.delete(uri).status_code == 204


def test_assignments_and_positions(http: httpx.Client, admin: Admin, writer: LowLevelClient):
    topic = create_topic(admin, "positions", partitions=2)
    for partition in range(2):
        produce_values(writer, topic, partition, [f"{partition}-{i}".encode() for i in range(5)])
    base = create_instance(http, "positioners", **{"auto.offset.reset": "latest"})["base_uri"]
    partitions = [{"topic": topic, "partition": p} for p in range(2)]
    assert http.post(f"{base}/assignments", json={"partitions": partitions}).status_code == 204
    assert http.get(f"{base}/assignments").json() == {"partitions": partitions}
    assert error_of(http.post(f"{base}/subscription", json={"topics": [topic]})) == (409, 40903)

    assert http.post(f"{base}/positions/beginning", json={"partitions": partitions[:1]}).status_code == 204
    assert [r["offset"] for r in read_until(http, base, 5)] == [0, 1, 2, 3, 4]
    body = {"offsets": [{"topic": topic, "partition": 0, "offset": 3}, {"topic": topic, "partition": 1, "offset": 4}]}
    assert http.post(f"{base}/positions", json=body).status_code == 204
    assert sorted((r["partition"], r["offset"]) for r in read_until(http, base, 3)) == [(0, 3), (0, 4), (1, 4)]
    assert http.post(f"{base}/positions/beginning", json={"partitions": []}).status_code == 204  # every partition
    assert len(read_until(http, base, 10)) == 10
    assert http.post(f"{base}/positions/end", json={"partitions": partitions}).status_code == 204
    assert http.get(f"{base}/records", params={"timeout": 300}).json() == []
    produce_values(writer, topic, 1, [b"late"])
    assert [(r["partition"], r["offset"]) for r in read_until(http, base, 1)] == [(1, 5)]

    assert error_of(http.post(f"{base}/assignments", json={"partitions": [{"topic": "nope", "partition": 0}]})) \
        == (404, 40401)
    assert error_of(http.post(f"{base}/assignments", json={"partitions": [{"topic": topic, "partition": 7}]})) \
        == (404, 40402)
    unassigned = {"offsets": [{"topic": "other", "partition": 0, "offset": 1}]}
    assert error_of(http.post(f"{base}/positions", json=unassigned)) == (409, 40903)
    negative = {"offsets": [{"topic": topic, "partition": 0, "offset": -1}]}
    assert error_of(http.post(f"{base}/positions", json=negative)) == (422, 42203)
    assert http.get(f"{base}/assignments").json() == {"partitions": partitions}  # refused requests changed nothing
    assert http.delete(f"{base}/subscription").status_code == 204
    assert http.get(f"{base}/assignments").json() == {"partitions": []}
    assert http.delete(base).status_code == 204


def test_a_read_answers_early_past_fetch_min_bytes(http: httpx.Client, admin: Admin, writer: LowLevelClient):
    topic = create_topic(admin, "eager", partitions=1)
    produce_values(writer, topic, 0, [b"0123456789"] * 3)
    response = http.post("/consumers/eager", headers={"Content-Type": V2})  # no body: every default
    assert response.status_code == 200, response.text
    lazy = response.json()["base_uri"]
    eager = create_instance(http, "eager", **{"fetch.min.bytes": 0, "consumer.request.timeout.ms": EAGER_WAIT_MS})
    for uri in (lazy, eager["base_uri"]):
        assert http.post(f"{uri}/assignments", json={"partitions": [{"topic": topic, "partition": 0}]}).status_code \
            == 204
        assert http.post(f"{uri}/positions/beginning", json={"partitions": []}).status_code == 204
    started = time.monotonic()
    records = http.get(f"{eager['base_uri']}/records", params={"timeout": 60000}).json()
    assert records and time.monotonic() - started < EAGER_WAIT_MS / 1000 / 2  # answered, not timed out
    # without fetch.min.bytes a read gathers until its timeout (REST Proxy's behaviour), at most max_bytes
    records = wait_until(lambda: http.get(f"{lazy}/records", params={"max_bytes": 25}).json(), 15, interval_s=0,
                         message="the first records")
    assert [r["offset"] for r in records] == [0, 1]  # one batch of three came: the third would pass 25 bytes
    for uri in (lazy, eager["base_uri"]):
        assert http.delete(uri).status_code == 204


def test_refused_creations_and_unknown_instances(http: httpx.Client):
    create_instance(http, "refusals", name="taken")
    assert error_of(http.post("/consumers/refusals", json={"name": "taken"})) == (409, 40901)
    assert error_of(http.post("/consumers/refusals", json={"auto.offset.reset": "sometimes"})) == (422, 42206)
    assert error_of(http.post("/consumers/refusals", json={"auto.commit.enable": "maybe"})) == (422, 42206)
    assert error_of(http.post("/consumers/refusals", json={"fetch.min.bytes": "lots"})) == (422, 42206)
    assert error_of(http.post("/consumers/refusals", json={"format": "avro"})) == (422, 42201)
    assert error_of(http.post("/consumers/refusals", json={"format": "xml"})) == (422, 42201)
    assert error_of(http.post("/consumers/refusals", content=b"{not json")) == (422, 42202)
    assert error_of(http.get("/consumers/refusals/instances/ghost/records")) == (404, 40403)
    assert error_of(http.post("/consumers/refusals/instances/taken/subscription", json={})) == (422, 42202)
    taken = "/consumers/refusals/instances/taken"
    assert error_of(http.post(f"{taken}/subscription", json={"topics": ["no spaces"]})) == (422, 42202)
    assert error_of(http.post(f"{taken}/assignments", json={"partitions": [{"topic": "..", "partition": 0}]})) \
        == (422, 42202)
    too_far = {"offsets": [{"topic": "t", "partition": 0, "offset": 2**63}]}
    assert error_of(http.post(f"{taken}/offsets", json=too_far)) == (422, 42202)
    assert http.get(f"{taken}/subscription").json() == {"topics": []}
    assert http.delete(taken).status_code == 204


def test_fifty_long_polls_leave_the_gateway_responsive(cluster: LocalCluster, http: httpx.Client, admin: Admin):
    topic = create_topic(admin, "quiet", partitions=1)
    uris = [create_instance(http, "pollers", **{"consumer.request.timeout.ms": READ_WAIT_MS})["base_uri"]
            for _ in range(50)]
    for uri in uris:
        assert http.post(f"{uri}/assignments", json={"partitions": [{"topic": topic, "partition": 0}]}).status_code \
            == 204

    probed_topic = create_topic(admin, "probed", partitions=1)

    async def poll_and_probe() -> tuple[float, list[float], float]:
        async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=100)) as client:
            async def read(uri: str) -> float:
                response = await client.get(f"{uri}/records", headers={"Accept": BINARY})
                assert (response.status_code, response.json()) == (200, [])
                return time.monotonic()

            started = time.monotonic()
            reads = [asyncio.create_task(read(uri)) for uri in uris]
            await asyncio.sleep(0)  # every read is under way
            for index in range(5):  # a produce and /health call the cluster on the threadpool
                assert (await client.get(f"{cluster.gateway_url()}/health")).status_code == 200
                produced = await client.post(f"{cluster.gateway_url()}/topics/{probed_topic}", headers={
                    "Content-Type": BINARY}, json={"records": [{"value": "cHJvYmU="}]})
                assert produced.status_code == 200 and produced.json()["offsets"][0]["offset"] == index
            probed = time.monotonic()
            return started, await asyncio.gather(*reads), probed

    started, read_ends, probed = asyncio.run(poll_and_probe())
    assert probed < min(read_ends), "the probes waited for the long polls"
    assert min(read_ends) - started >= READ_WAIT_MS / 1000 * 0.9  # the reads really waited
    for uri in uris:
        assert http.delete(uri).status_code == 204


# ---------------------------------------------------------------------------------------------- two workers


def test_two_workers_reach_each_instance_by_base_uri_and_by_redirect(two_workers: dict):
    front, workers = two_workers["front"], two_workers["workers"]
    by_worker: dict[str, dict] = {}

    def one_more() -> bool:  # a connection per request, so the kernel spreads them over both workers
        instance = create_instance(httpx.Client(base_url=front), "spread")
        worker = instance["base_uri"].split("/consumers/")[0]
        if worker in by_worker:  # keep the newest, so neither expires while the other worker is sought
            assert httpx.delete(by_worker[worker]["base_uri"]).status_code == 204
        by_worker[worker] = instance
        return len(by_worker) == 2

    wait_until(one_more, 30, interval_s=0, message="instances on both workers")
    assert set(by_worker) == set(workers)
    instances = list(by_worker.values())
    for position, instance in enumerate(instances):
        worker = instance["base_uri"].split("/consumers/")[0]
        index = workers.index(worker)
        assert instance["instance_id"].startswith(f"rest-consumer-2-{index}-")
        for each in instances[position:]:  # also keeps the next instance from expiring meanwhile
            assert httpx.get(f"{each['base_uri']}/assignments").json() == {"partitions": []}
        path = instance["base_uri"][len(worker):]
        # on the front port a request lands on either worker: served by the owner, else redirected to it
        answers = {httpx.get(f"{front}{path}/assignments").status_code for _ in range(40)}
        assert answers == {200, 307}, answers
        for each in instances[position + 1:]:  # the next instance kept alive through those requests
            assert httpx.get(f"{each['base_uri']}/assignments").status_code == 200
        redirect = httpx.get(f"{workers[1 - index]}{path}/assignments")
        assert (redirect.status_code, redirect.headers["location"]) == (307, f"{instance['base_uri']}/assignments")
        assert httpx.get(f"{front}{path}/assignments", follow_redirects=True).status_code == 200
        assert httpx.delete(f"{workers[1 - index]}{path}", follow_redirects=True).status_code == 204

    for name in ("alice", "bob", "carol"):  # named instances live where their name leads, created via redirect
        owner = owner_of("named ones", name, 2)  # a group name that travels escaped in paths
        refused = httpx.post(f"{workers[1 - owner]}/consumers/named%20ones", json={"name": name},
                             headers={"Content-Type": V2})
        assert (refused.status_code, refused.headers["location"]) == (307, f"{workers[owner]}/consumers/named%20ones")
        with httpx.Client(base_url=front, follow_redirects=True) as client:
            body = create_instance(client, "named ones", name=name)
        assert body["instance_id"] == name
        assert body["base_uri"] == f"{workers[owner]}/consumers/named%20ones/instances/{name}"
        assert httpx.get(f"{body['base_uri']}/subscription").status_code == 200
        assert httpx.delete(f"{front}/consumers/named%20ones/instances/{name}", follow_redirects=True).status_code \
            == 204


def test_idle_instances_are_closed_and_leave_their_group(two_workers: dict, admin: Admin, writer: LowLevelClient):
    topic = create_topic(admin, "expiring", partitions=1)
    produce_values(writer, topic, 0, [b"x"])
    with httpx.Client(base_url=two_workers["front"], follow_redirects=True) as client:
        base = create_instance(client, "expirers", name="idle", **{"auto.offset.reset": "earliest"})["base_uri"]
        assert client.post(f"{base}/subscription", json={"topics": [topic]}).status_code == 204
        read_until(client, base, 1)
    worker = base.split("/consumers/")[0]
    members = admin.describe_consumer_groups(["expirers"])["expirers"].members
    assert len(members) == 1
    assert gauge(worker) == 1
    started = time.monotonic()
    # watched through /metrics only: any request for the instance would keep it in use
    wait_until(lambda: gauge(worker) == 0, EXPIRY_MS / 1000 + 10, message="the idle instance to be closed")
    assert time.monotonic() - started >= EXPIRY_MS / 1000 * 0.8
    assert error_of(httpx.get(f"{base}/subscription")) == (404, 40403)
    assert admin.describe_consumer_groups(["expirers"])["expirers"].members == ()


def test_a_worker_process_stops_with_the_gateway(cluster: LocalCluster, tmp_path: Path):
    """SIGTERM to the supervisor stops both workers: nothing serves on their ports afterwards, and
    the workers' metrics directory is gone."""
    with worker_gateway(cluster, tmp_path / "gateway.log", 2) as gateway:
        process = gateway["process"]
        urls = [f"{url}/health" for url in (gateway["front"], *gateway["workers"])]
        workers = _children(process.pid)
        assert len(workers) >= 2
        metrics_dirs = {_environment(pid).get(MULTIPROCESS_DIR_ENV) for pid in workers}
        assert len(metrics_dirs) == 1 and Path(next(iter(metrics_dirs))).is_dir(), metrics_dirs
    assert process.returncode == 0
    wait_until(lambda: not any(_alive(pid) for pid in workers), 10, message="the workers to exit")
    assert not any(http_ready(url, timeout_s=0.5) for url in urls)
    assert not Path(next(iter(metrics_dirs))).exists()


def _environment(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as environ:
        pairs = (entry.decode().partition("=") for entry in environ.read().split(b"\0") if entry)
        return {name: value for name, _, value in pairs}


def _children(pid: int) -> list[int]:
    with contextlib.suppress(OSError):
        with open(f"/proc/{pid}/task/{pid}/children") as children:
            return [int(child) for child in children.read().split()]
    return []


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
