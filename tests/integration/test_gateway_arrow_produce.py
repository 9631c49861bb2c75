"""Arrow produce through a real uvicorn gateway against a real cluster: records posted as Arrow IPC
streams (keys, null keys, null values, headers, explicit partitions, string and binary columns, a
topic column beside the topic parameter) read back from the range endpoint; a range answer
written back as it is; every refusal answered as documented with nothing written; a record the
broker refuses answered with its Kafka error and the count of records acknowledged."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import httpx
import pyarrow as pa
import pytest
from prometheus_client.parser import text_string_to_metric_families

from services.clients.admin import Admin
from services.clients.lowlevel import LowLevelClient
from services.clients.spark.writer import ipc_stream
from services.devcluster.launcher import LocalCluster
from services.gateway.arrow_records import HEADER_TYPE
from tests.integration.conftest import CLIENT_CONFIG, create_topic, gateway_module_cluster

FIRST = "arrow-first"
SECOND = "arrow-second"
SMALL = "arrow-small"  # max.message.bytes=1000: the broker refuses larger batches
MAX_RECORD_BYTES = 20_000
ARROW = {"Content-Type": "application/vnd.apache.arrow.stream"}
TOPICS = {FIRST: 3, SECOND: 2, SMALL: 1}


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    with gateway_module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "gwarrow",
                                gateway_config={"max.record.bytes": MAX_RECORD_BYTES}) as cluster:
        create_topics(cluster, TOPICS, SMALL)
        yield cluster


def create_topics(cluster: LocalCluster, topics: dict[str, int], small: str) -> None:
    """Creates each topic with its number of partitions; `small` refuses batches over 1000 bytes."""
    with Admin(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as admin:
        for topic, partitions in topics.items():
            create_topic(admin, topic, partitions, configs={"max.message.bytes": "1000"} if topic == small else None)


@pytest.fixture(scope="module")
def http(cluster: LocalCluster) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=cluster.gateway_url(), timeout=30) as client:
        yield client


@pytest.fixture(scope="module")
def cluster_path(http: httpx.Client) -> str:
    return f"/v3/clusters/{http.get('/health').json()['cluster_id']}"


@pytest.fixture(scope="module")
def end_offsets(cluster: LocalCluster) -> Iterator:
    client = LowLevelClient(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG)

    def read() -> dict[tuple[str, int], int]:
        specs = {(topic, p): "latest" for topic, count in TOPICS.items() for p in range(count)}
        return {(tp.topic, tp.partition): result.offset for tp, result in client.list_offsets(specs).items()}

    yield read
    client.close()


def read_back(http: httpx.Client, cluster_path: str, topic: str, partition: int, offset: int = 0) -> list[tuple]:
    """(key, value, headers) of each record of the partition from `offset`, by the range endpoint."""
    def unbase64(text: str | None) -> bytes | None:
        return None if text is None else base64.b64decode(text)

    response = http.get(f"{cluster_path}/topics/{topic}/partitions/{partition}/records", params={"offset": offset})
    assert response.status_code == 200, response.text
    return [(unbase64(r["key"]), unbase64(r["value"]), tuple((h["key"], unbase64(h["value"])) for h in r["headers"]))
            for r in response.json()["records"]]


def test_records_round_trip_with_keys_headers_and_partitions(http: httpx.Client, cluster_path: str, end_offsets):
    before = end_offsets()
    count = 60
    keys = [None if n % 5 == 0 else b"key-%d" % n for n in range(count)]
    values = [None if n % 7 == 3 else b"value-%d" % n for n in range(count)]
    headers = [None if n % 3 == 0 else [{"key": f"h{n}", "value": b"\x00\xff"}, {"key": "empty", "value": None}]
               for n in range(count)]
    partitions = [n % 3 if n % 2 else None for n in range(count)]
    table = pa.table({"key": pa.array(keys, pa.binary()), "value": pa.array(values, pa.binary()),
                      "partition": pa.array(partitions, pa.int32()),
                      "headers": pa.array(headers, pa.list_(HEADER_TYPE))})
    response = http.post(f"{cluster_path}/records", params={"topic": FIRST}, content=ipc_stream(table), headers=ARROW)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["records"] == count and sum(entry["records"] for entry in body["partitions"]) == count
    written = {}
    for entry in body["partitions"]:
        assert entry["topic"] == FIRST
        assert entry["first_offset"] == before[(FIRST, entry["partition"])]
        assert entry["last_offset"] == entry["first_offset"] + entry["records"] - 1
        written[entry["partition"]] = read_back(http, cluster_path, FIRST, entry["partition"], entry["first_offset"])
    expected = [(key, value, tuple((h["key"], h["value"]) for h in header or ()))
                for key, value, header in zip(keys, values, headers, strict=True)]
    assert sorted(map(repr, (row for rows in written.values() for row in rows))) == sorted(map(repr, expected))
    for n, partition in enumerate(partitions):
        if partition is not None:
            assert expected[n] in written[partition]
    for rows in written.values():  # each partition keeps the rows' order
        assert rows == [row for row in expected if row in rows]


def test_a_topic_column_takes_the_topic_parameter_where_null(http: httpx.Client, cluster_path: str, end_offsets):
    before = end_offsets()
    topics = [FIRST if n % 2 else (SECOND if n % 3 else None) for n in range(30)]
    table = pa.table({"topic": pa.array(topics, pa.string()),
                      "value": pa.array([f"text-{n}" for n in range(30)], pa.string()),
                      "key": pa.array(["same-key"] * 30, pa.large_string())})
    response = http.post(f"{cluster_path}/records", params={"topic": SECOND}, content=ipc_stream(table), headers=ARROW)
    assert response.status_code == 200, response.text
    per_topic = {}
    for entry in response.json()["partitions"]:
        per_topic[entry["topic"]] = per_topic.get(entry["topic"], 0) + entry["records"]
    assert per_topic == {FIRST: 15, SECOND: 15}
    after = end_offsets()
    assert sum(after[tp] - before[tp] for tp in after if tp[0] == SECOND) == 15
    moved = [tp for tp in after if after[tp] != before[tp]]
    assert len({tp for tp in moved if tp[0] == FIRST}) == 1  # one key: one partition
    [(_, partition)] = [tp for tp in moved if tp[0] == SECOND]
    assert [value for _, value, _ in read_back(http, cluster_path, SECOND, partition, before[(SECOND, partition)])] \
        == [f"text-{n}".encode() for n in range(30) if topics[n] != FIRST]


def test_a_range_answer_is_written_back_as_it_is(http: httpx.Client, cluster_path: str, end_offsets):
    first = end_offsets()[(FIRST, 0)]
    answer = http.get(f"{cluster_path}/topics/{FIRST}/partitions/0/records", params={"offset": 0},
                      headers={"Accept": "application/vnd.apache.arrow.stream"})
    table = pa.ipc.open_stream(answer.content).read_all()
    assert table.num_rows == first > 0 and "offset" in table.schema.names
    response = http.post(f"{cluster_path}/records", content=answer.content, headers=ARROW)
    assert response.status_code == 200, response.text
    assert response.json()["partitions"] == [{"topic": FIRST, "partition": 0, "first_offset": first,
                                              "last_offset": 2 * first - 1, "records": first}]
    rows = read_back(http, cluster_path, FIRST, 0)
    assert rows[first:] == rows[:first]


def value_table(**columns) -> pa.Table:
    return pa.table({"value": pa.array([b"v"], pa.binary()), **columns})


@pytest.mark.parametrize(("case", "status", "error_code", "says"), [
    ({"headers": {"Content-Type": "application/json"}}, 415, 415, "Unsupported Media Type"),
    ({"content": b"not arrow at all"}, 400, 400, "not an Arrow IPC stream"),
    ({"content": b""}, 400, 400, "not an Arrow IPC stream"),
    ({"table": pa.table({"key": pa.array([b"k"])})}, 422, 42206, "'value' is required"),
    ({"table": value_table(colour=pa.array(["red"]))}, 422, 42206, "Unknown column 'colour'"),
    ({"table": value_table(key=pa.array([1]))}, 422, 42206, "Column 'key' is int64"),
    ({"table": value_table(partition=pa.array(["0"]))}, 422, 42206, "Column 'partition' is string"),
    ({"table": value_table(headers=pa.array([[1]]))}, 422, 42206, "Column 'headers'"),
    ({"table": pa.table({"value": [b"a", b"b"], "topic": [FIRST, None]}), "params": {}}, 422, 42206,
     "Row 1 has no topic"),
    ({"params": {}}, 422, 42206, "Row 0 has no topic"),
    ({"params": {"topic": "no-such-topic"}}, 404, 40403, "no-such-topic"),
    ({"table": pa.table({"value": [b"a"], "topic": ["no-such-topic"]})}, 404, 40403, "no-such-topic"),
    ({"table": value_table(partition=pa.array([3], pa.int32()))}, 404, 40402, "Partition 3"),
    ({"table": value_table(partition=pa.array([-1], pa.int64()))}, 404, 40402, "Partition -1"),
    ({"table": pa.table({"value": [b"small", b"x" * MAX_RECORD_BYTES], "key": [None, b"k"]})}, 422, 42206,
     "MESSAGE_TOO_LARGE (10): row 1:"),
    ({"path": "/v3/clusters/another/records"}, 404, 404, "another"),
])
def test_refused_requests_are_answered_and_write_nothing(http: httpx.Client, cluster_path: str, end_offsets,
                                                         case: dict, status: int, error_code: int, says: str):
    before = end_offsets()
    content = case.get("content", ipc_stream(case.get("table", value_table())))
    response = http.post(case.get("path", f"{cluster_path}/records"), params=case.get("params", {"topic": FIRST}),
                         content=content, headers=case.get("headers", ARROW))
    assert (response.status_code, response.json()["error_code"]) == (status, error_code), response.text
    assert says in response.json()["message"]
    assert end_offsets() == before


def test_a_record_the_broker_refuses_is_answered_with_its_kafka_error(http: httpx.Client, cluster_path: str,
                                                                      end_offsets):
    before = end_offsets()
    table = pa.table({"value": [b"x" * 5000]})
    response = http.post(f"{cluster_path}/records", params={"topic": SMALL}, content=ipc_stream(table), headers=ARROW)
    assert response.status_code == 500, response.text
    body = response.json()
    assert body["error_code"] == 50002
    assert body["message"].startswith("MESSAGE_TOO_LARGE (10): ") and "0 of 1 records were acknowledged" in \
        body["message"]
    assert end_offsets() == before


def test_produced_records_are_counted(http: httpx.Client, cluster_path: str):
    def produced() -> float:
        return sum(sample.value for family in text_string_to_metric_families(http.get("/metrics").text)
                   for sample in family.samples
                   if sample.name == "odradek_gateway_records_total" and sample.labels["direction"] == "produced")

    before = produced()
    table = pa.table({"value": [b"a", b"b", b"c"]})
    assert http.post(f"{cluster_path}/records", params={"topic": SECOND}, content=ipc_stream(table),
                     headers=ARROW).status_code == 200
    assert produced() == before + 3
