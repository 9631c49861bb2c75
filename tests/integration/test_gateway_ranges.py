"""Offset-range reads through a real uvicorn gateway against a real cluster: records produced by our
Producer (keys, null keys, values, null values, headers, timestamps; batches of every codec) read
back in JSON and as Arrow IPC streams decoded by pyarrow, equal byte for byte; ranges cut at
end_offset; max_bytes paging that reads the whole partition; the partition's offsets; REST Proxy
errors for bad input; an empty answer past the end; a 5xx naming the Kafka error, within
request.timeout.ms, while the broker is down; reads that follow the partition's leader to another
broker; random paths, query values and Accept headers answered as documented (RangeAnswer, an Arrow
stream, or a REST Proxy error), never 5xx."""

from __future__ import annotations

import base64
import re
import time
from collections.abc import Iterator

import httpx
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.clients.admin import Admin
from services.clients.producer import Producer
from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import wait_until
from services.gateway.arrow_records import SCHEMA
from services.gateway.errors import KAFKA_ERROR, KAFKA_RETRIABLE_ERROR
from services.gateway.routes.ranges import RangeAnswer
from tests.integration.conftest import CLIENT_CONFIG, TEST_GATEWAY_CONFIG, create_topic, gateway_module_cluster

TOPIC = "ranges"
MOVING = "ranges-moving"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
PER_CODEC = 40
TOTAL = PER_CODEC * len(CODECS)
START_MS = 1_700_000_000_000
ARROW = {"Accept": "application/vnd.apache.arrow.stream"}

Row = tuple  # (offset, key, value, timestamp ms, headers as ((key, value), ...))


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    with gateway_module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "gwranges",
                                brokers=2) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def produced(cluster: LocalCluster) -> list[Row]:
    """TOTAL records in partition 0 of TOPIC (and nothing in partition 1), one run of batches per codec."""
    with Admin(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as admin:
        create_topic(admin, TOPIC, assignment={0: [1], 1: [1]})
    rows = []
    for codec_index, codec in enumerate(CODECS):
        with Producer(bootstrap_servers=cluster.bootstrap_servers, compression_type=codec, linger_ms=20,
                      batch_size=2048) as producer:
            futures = []
            for i in range(PER_CODEC):
                n = codec_index * PER_CODEC + i
                key = None if n % 7 == 0 else b"key-%d" % n
                value = None if n % 11 == 5 else bytes([n % 256]) * (n % 50) + b"|value-%d" % n
                headers = tuple((f"h{j}", None if j == 1 else b"\x00\xff%d" % j) for j in range(n % 3))
                timestamp_ms = START_MS + n * 1000 - (n % 5)
                future = producer.send(TOPIC, value, key=key, partition=0, timestamp_ms=timestamp_ms,
                                       headers=list(headers) or None)
                futures.append((future, key, value, timestamp_ms, headers))
            producer.flush()
            rows += [(future.get(timeout=30).offset, key, value, timestamp_ms, headers)
                     for future, key, value, timestamp_ms, headers in futures]
    assert [row[0] for row in rows] == list(range(TOTAL))
    return rows


@pytest.fixture(scope="module")
def http(cluster: LocalCluster) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=cluster.gateway_url(), timeout=30) as client:
        yield client


@pytest.fixture(scope="module")
def records_path(cluster: LocalCluster, http: httpx.Client) -> str:
    cluster_id = http.get("/health").json()["cluster_id"]
    return f"/v3/clusters/{cluster_id}/topics/{TOPIC}/partitions/0/records"


def json_rows(body: dict) -> list[Row]:
    def unbase64(text: str | None) -> bytes | None:
        return None if text is None else base64.b64decode(text)

    rows = []
    for record in body["records"]:
        assert (record["topic"], record["partition"], record["timestamp_type"]) == (TOPIC, 0, "CREATE_TIME")
        rows.append((record["offset"], unbase64(record["key"]), unbase64(record["value"]), record["timestamp"],
                     tuple((h["key"], unbase64(h["value"])) for h in record["headers"])))
    return rows


def arrow_rows(response: httpx.Response) -> list[Row]:
    assert response.headers["content-type"] == "application/vnd.apache.arrow.stream"
    table = pa.ipc.open_stream(response.content).read_all()
    assert table.schema == SCHEMA
    columns = table.to_pydict()
    assert set(columns["topic"]) <= {TOPIC} and set(columns["partition"]) <= {0}
    assert set(columns["timestampType"]) <= {0}
    micros = table.column("timestamp").cast(pa.int64()).to_pylist()
    assert all(micro % 1000 == 0 for micro in micros)
    return [(offset, key, value, micro // 1000, tuple((h["key"], h["value"]) for h in headers or ()))
            for offset, key, value, micro, headers in zip(columns["offset"], columns["key"], columns["value"], micros,
                                                           columns["headers"], strict=True)]


def offsets_of(response: httpx.Response) -> tuple[int, int, int, int]:
    headers = response.headers
    return tuple(int(headers[f"x-odradek-{name}"])
                 for name in ("earliest-offset", "latest-offset", "high-watermark", "next-offset"))


def test_the_whole_partition_reads_back_in_json_byte_for_byte(http: httpx.Client, records_path: str,
                                                               produced: list[Row]):
    response = http.get(records_path, params={"offset": 0})
    assert response.status_code == 200, response.text
    body = response.json()
    assert json_rows(body) == produced
    assert (body["earliest_offset"], body["latest_offset"], body["high_watermark"], body["next_offset"]) == (
        0, TOTAL, TOTAL, TOTAL)
    assert offsets_of(response) == (0, TOTAL, TOTAL, TOTAL)


def test_the_whole_partition_reads_back_as_arrow_byte_for_byte(http: httpx.Client, records_path: str,
                                                               produced: list[Row]):
    response = http.get(records_path, params={"offset": 0}, headers=ARROW)
    assert response.status_code == 200, response.text
    assert arrow_rows(response) == produced
    assert offsets_of(response) == (0, TOTAL, TOTAL, TOTAL)
    table = pa.ipc.open_stream(response.content).read_all()
    assert table.column("key").null_count == sum(row[1] is None for row in produced)
    assert table.column("headers").null_count == sum(not row[4] for row in produced)  # as Spark's source


@pytest.mark.parametrize(("first", "end"), [(5, 17), (39, 41), (0, 1), (TOTAL - 3, TOTAL), (60, 60)])
def test_a_range_is_cut_at_its_offsets(http: httpx.Client, records_path: str, produced: list[Row],
                                       first: int, end: int):
    params = {"offset": first, "end_offset": end}
    json_answer = http.get(records_path, params=params)
    arrow_answer = http.get(records_path, params=params, headers=ARROW)
    assert json_rows(json_answer.json()) == produced[first:end] == arrow_rows(arrow_answer)
    assert json_answer.json()["next_offset"] == end == offsets_of(arrow_answer)[3]


def test_the_range_defaults_from_the_earliest_offset_to_the_high_watermark(http: httpx.Client, records_path: str,
                                                                           produced: list[Row]):
    assert json_rows(http.get(records_path).json()) == produced
    committed = http.get(records_path, params={"offset": 150, "isolation_level": "read_committed"}, headers=ARROW)
    assert arrow_rows(committed) == produced[150:]
    assert offsets_of(committed) == (0, TOTAL, TOTAL, TOTAL)


@pytest.mark.parametrize("media", ["json", "arrow"])
def test_max_bytes_pages_through_the_whole_partition(http: httpx.Client, records_path: str, produced: list[Row],
                                                     media: str):
    rows, offset, pages = [], 0, 0
    while offset < TOTAL:
        params = {"offset": offset, "max_bytes": 1500}
        if media == "json":
            response = http.get(records_path, params=params)
            page, offset = json_rows(response.json()), response.json()["next_offset"]
        else:
            response = http.get(records_path, params=params, headers=ARROW)
            page, offset = arrow_rows(response), offsets_of(response)[3]
        assert page, f"no progress at offset {offset}"
        rows += page
        pages += 1
    assert rows == produced and pages > 3


def test_a_range_past_the_end_is_empty_with_the_offsets(http: httpx.Client, records_path: str, produced: list[Row]):
    for offset in (TOTAL, TOTAL + 1000):
        body = http.get(records_path, params={"offset": offset}).json()
        assert body == {"records": [], "earliest_offset": 0, "latest_offset": TOTAL, "high_watermark": TOTAL,
                        "next_offset": offset}
        response = http.get(records_path, params={"offset": offset, "end_offset": offset + 10}, headers=ARROW)
        assert arrow_rows(response) == [] and offsets_of(response) == (0, TOTAL, TOTAL, offset)
    empty = http.get(records_path.replace("/partitions/0/", "/partitions/1/"), headers=ARROW)
    assert arrow_rows(empty) == [] and offsets_of(empty) == (0, 0, 0, 0)


@pytest.mark.parametrize(("change", "status", "error_code"), [
    ({"params": {"offset": -1}}, 422, 42203),
    ({"params": {"offset": 10, "end_offset": 9}}, 422, 42203),
    ({"params": {"isolation_level": "read_everything"}}, 422, 42202),
    ({"params": {"max_bytes": 0}}, 422, 42202),
    ({"params": {"offset": "ten"}}, 422, 42202),
    ({"params": {"offset": 2**63}}, 422, 42203),
    ({"params": {"offset": 0, "end_offset": 2**70}}, 422, 42203),
    ({"headers": {"Accept": "text/csv"}}, 406, 406),
    ({"path": ("/topics/ranges/", "/topics/no-such-topic/")}, 404, 40401),
    ({"path": ("/partitions/0/", "/partitions/7/")}, 404, 40402),
    ({"path": ("/partitions/0/", "/partitions/-1/")}, 404, 40402),
    ({"path": ("/partitions/0/", f"/partitions/{2**40}/")}, 404, 40402),
    ({"path": ("/topics/ranges/", "/topics/bad$name/")}, 404, 40401),
    ({"path": ("/topics/ranges/", f"/topics/{'x' * 300}/")}, 404, 40401),
    ({"path": ("/v3/clusters/", "/v3/clusters/another-")}, 404, 404),
])
def test_bad_input_gets_a_rest_proxy_error(http: httpx.Client, records_path: str, produced: list[Row],
                                           change: dict, status: int, error_code: int):
    path = records_path.replace(*change["path"]) if "path" in change else records_path
    response = http.get(path, params=change.get("params"), headers=change.get("headers"))
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error_code"] == error_code and body["message"]


query_value = st.one_of(st.integers(-2**64, 2**64), st.integers(-5, TOTAL + 5).map(str),
                        st.sampled_from(["read_committed", "read_uncommitted", "", "1e3", "0x10", "null"]),
                        st.text(max_size=12))
accept = st.sampled_from([None, "application/json", "application/vnd.apache.arrow.stream", "*/*", "text/csv",
                          "application/*", "application/vnd.kafka.v2+json"])


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(params=st.dictionaries(st.sampled_from(["offset", "end_offset", "max_bytes", "isolation_level"]), query_value,
                              max_size=4),
       accept_header=accept, topic=st.sampled_from([TOPIC, "nope", "bad$", "%20"]),
       partition=st.one_of(st.integers(-3, 3).map(str), st.sampled_from(["x", "1.5", str(2**64)])))
def test_fuzzed_range_reads_answer_as_documented_and_never_5xx(http: httpx.Client, records_path: str,
                                                               produced: list[Row], params: dict, accept_header,
                                                               topic: str, partition: str):
    path = records_path.replace(f"/topics/{TOPIC}/partitions/0/", f"/topics/{topic}/partitions/{partition}/")
    response = http.get(path, params=params, headers={"Accept": accept_header} if accept_header else {})
    assert response.status_code < 500, response.text
    if response.status_code != 200:
        body = response.json()
        assert set(body) == {"error_code", "message"} and isinstance(body["error_code"], int), body
    elif response.headers["content-type"] == "application/json":
        body = response.json()
        RangeAnswer.model_validate(body)
        assert_a_run_of(produced, json_rows(body), body["next_offset"])
    else:
        assert_a_run_of(produced, arrow_rows(response), offsets_of(response)[3])


def assert_a_run_of(produced: list[Row], rows: list[Row], next_offset: int) -> None:
    """`rows` are produced records in a row, the last of them before `next_offset`."""
    if rows:
        assert rows == produced[rows[0][0]:rows[-1][0] + 1] and rows[-1][0] < next_offset


def test_range_reads_follow_the_partition_leader(cluster: LocalCluster, http: httpx.Client, records_path: str):
    """A partition led by broker 2 and followed by broker 1: reads go on after broker 2 stops."""
    with Admin(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as admin:
        create_topic(admin, MOVING, assignment={0: [2, 1]})
        wait_until(lambda: set(admin.describe_topics([MOVING])[MOVING].partitions[0].isr) == {1, 2}, 30,
                   message="both replicas in the ISR")
    with Producer(bootstrap_servers=cluster.bootstrap_servers, acks="all") as producer:
        for n in range(50):
            producer.send(MOVING, b"moving-%d" % n, key=b"%d" % n, partition=0)
        producer.flush()
    path = records_path.replace(f"/topics/{TOPIC}/", f"/topics/{MOVING}/")
    expected = [b"moving-%d" % n for n in range(50)]
    before = pa.ipc.open_stream(http.get(path, headers=ARROW).content).read_all()
    assert before.column("value").to_pylist() == expected
    cluster.stop_service("broker-2")
    try:
        after = http.get(path, params={"offset": 10}, headers=ARROW)
        assert after.status_code == 200, after.text
        assert pa.ipc.open_stream(after.content).read_all().column("value").to_pylist() == expected[10:]
    finally:
        cluster.start_service("broker-2")


def test_a_stopped_broker_is_answered_5xx_within_the_request_timeout(cluster: LocalCluster, http: httpx.Client,
                                                                      records_path: str, produced: list[Row]):
    """Last in the module: the broker is stopped, then started again."""
    timeout_s = TEST_GATEWAY_CONFIG["request.timeout.ms"] / 1000
    cluster.stop_service("broker-1")
    try:
        started = time.monotonic()
        response = http.get(records_path, params={"offset": 0}, headers=ARROW)
        assert response.status_code >= 500 and time.monotonic() - started < timeout_s + 3
        body = response.json()
        assert body["error_code"] in (KAFKA_ERROR, KAFKA_RETRIABLE_ERROR), body
        named = re.match(r"([A-Z_]+) \(\d+\): ", body["message"])  # NETWORK_EXCEPTION or LEADER_NOT_AVAILABLE
        assert named and body["message"].count(named.group(1)) == 1, body
    finally:
        cluster.start_service("broker-1")
    wait_until(lambda: http.get(records_path, params={"offset": 0, "end_offset": 1}).status_code == 200, 30,
               message="range reads answered again")


def test_topic_offsets_answer_every_partition_and_the_offset_of_a_timestamp(http, records_path, produced) -> None:
    offsets_path = records_path.replace("/partitions/0/records", "/offsets")
    # other tests of the module may move partition 0's start: the records' timestamps grow with their offsets
    earliest = int(http.get(records_path, params={"max_bytes": 1}).headers["X-Odradek-Earliest-Offset"])
    at_timestamp = max(5, earliest) if max(5, earliest) < TOTAL else None
    body = http.get(offsets_path, params={"timestamp": START_MS + 5000}).json()
    assert body == {"topic": TOPIC, "partitions": [
        {"partition": 0, "earliest_offset": earliest, "latest_offset": TOTAL, "high_watermark": TOTAL,
         "timestamp_offset": at_timestamp},
        {"partition": 1, "earliest_offset": 0, "latest_offset": 0, "high_watermark": 0, "timestamp_offset": None}]}
    committed = http.get(offsets_path, params={"isolation_level": "read_committed"}).json()
    assert [p["latest_offset"] for p in committed["partitions"]] == [TOTAL, 0]
    assert all(p["timestamp_offset"] is None for p in committed["partitions"])
    late = http.get(offsets_path, params={"timestamp": START_MS + 10**9}).json()
    assert [p["timestamp_offset"] for p in late["partitions"]] == [None, None]
    missing = http.get(offsets_path.replace(f"/topics/{TOPIC}/", "/topics/no-such-topic/"))
    assert (missing.status_code, missing.json()["error_code"]) == (404, 40403)
    assert http.get(offsets_path, params={"timestamp": -1}).status_code == 422
