"""REST Proxy v3 through a real uvicorn gateway in front of a real cluster: clusters, brokers,
topics (created, described, listed, configured, deleted), partitions, records produced one at a
time (every key and value type, headers, timestamps, read back byte for byte by a Consumer) and
as streams (1,000 records in one chunked request answered in order; reports written while the
request is still being sent; bad records answered in place), consumer groups with their lags,
bad input refused with REST Proxy's errors and nothing written, and a cluster that is down
answered 5xx in bounded time."""

from __future__ import annotations

import base64
import datetime
import json
import re
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

import h11
import httpx
import pytest

from services.clients.admin import Admin
from services.clients.consumer.consumer import Consumer
from services.common.topic_partition import TopicPartition
from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import wait_until
from tests.integration.conftest import CLIENT_CONFIG, SESSION_TIMEOUT_MS, create_topic, gateway_module_cluster

JSON_HEADERS = {"Content-Type": "application/json"}
TIMESTAMP_TEXT = "2021-02-05T19:14:42.123Z"
TIMESTAMP_MS = 1612552482123


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    with gateway_module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "gateway-v3") as local:
        yield local


@pytest.fixture(scope="module")
def http(cluster: LocalCluster) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=cluster.gateway_url(), timeout=30) as client:
        yield client


@pytest.fixture(scope="module")
def cluster_id(admin: Admin) -> str:
    return admin.describe_cluster().cluster_id


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def records_path(cluster_id: str, topic: str) -> str:
    return f"/v3/clusters/{cluster_id}/topics/{topic}/records"


def read_back(cluster: LocalCluster, tp: TopicPartition, count: int) -> list:
    """The first `count` records of the partition, as a Consumer reads them."""
    with Consumer(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG, fetch_max_wait_ms=100) as consumer:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        records: list = []

        def enough() -> bool:
            records.extend(consumer.poll(timeout_ms=200))
            return len(records) >= count

        wait_until(enough, 20, 0, message=lambda: f"{count} records of {tp}, got {len(records)}")
        return records


def log_end(admin: Admin, tp: TopicPartition) -> int:
    return admin.list_offsets({tp: "latest"})[tp].offset


# --------------------------------------------------------------------------------------------- clusters

def test_the_cluster_and_its_brokers(http: httpx.Client, cluster: LocalCluster, cluster_id: str, admin: Admin):
    listed = http.get("/v3/clusters").json()
    assert listed["kind"] == "KafkaClusterList"
    assert listed["metadata"] == {"self": f"{cluster.gateway_url()}/v3/clusters", "next": None}
    [data] = listed["data"]
    base = f"{cluster.gateway_url()}/v3/clusters/{cluster_id}"
    assert data["kind"] == "KafkaCluster" and data["cluster_id"] == cluster_id
    assert data["metadata"] == {"self": base, "resource_name": f"crn:///kafka={cluster_id}"}
    assert data["topics"] == {"related": f"{base}/topics"}
    assert data["consumer_groups"] == {"related": f"{base}/consumer-groups"}
    assert "controller" not in data  # Odradek's controller is a service of its own, not a broker
    assert http.get(f"/v3/clusters/{cluster_id}").json() == data

    brokers = http.get(f"/v3/clusters/{cluster_id}/brokers").json()
    assert brokers["kind"] == "KafkaBrokerList"
    nodes = {node.node_id: node for node in admin.describe_cluster().nodes}
    assert [b["broker_id"] for b in brokers["data"]] == sorted(nodes)
    for broker in brokers["data"]:
        node = nodes[broker["broker_id"]]
        assert (broker["kind"], broker["host"], broker["port"]) == ("KafkaBroker", node.host, node.port)
        assert broker["metadata"]["self"] == f"{base}/brokers/{node.node_id}"
        assert http.get(f"/v3/clusters/{cluster_id}/brokers/{node.node_id}").json() == broker
    assert http.get(f"/v3/clusters/{cluster_id}/brokers/999").status_code == 404


@pytest.mark.parametrize("method, path", [
    ("GET", ""), ("GET", "/brokers"), ("GET", "/topics"), ("GET", "/topics/any"), ("GET", "/consumer-groups"),
    ("GET", "/consumer-groups/any/lags"), ("POST", "/topics/any/records"), ("DELETE", "/topics/any")])
def test_an_unknown_cluster_is_404(http: httpx.Client, method: str, path: str):
    answer = http.request(method, f"/v3/clusters/no-such-cluster{path}", headers=JSON_HEADERS,
                          content=b'{"value": {"type": "STRING", "data": "x"}}')
    assert answer.status_code == 404
    assert answer.json() == {"error_code": 404, "message": "Cluster no-such-cluster cannot be found."}


# --------------------------------------------------------------------------------------------- topics

def test_a_topic_is_created_described_configured_and_deleted(http: httpx.Client, cluster: LocalCluster,
                                                              cluster_id: str, admin: Admin):
    topics = f"/v3/clusters/{cluster_id}/topics"
    base = f"{cluster.gateway_url()}{topics}"
    body = {"topic_name": "v3-round-trip", "partitions_count": 3, "replication_factor": 1,
            "configs": [{"name": "cleanup.policy", "value": "compact"}]}
    created = http.post(topics, json=body)
    assert created.status_code == 201, created.text
    assert created.headers["location"] == f"{base}/v3-round-trip"
    data = created.json()
    assert (data["kind"], data["topic_name"], data["partitions_count"], data["replication_factor"],
            data["is_internal"]) == ("KafkaTopic", "v3-round-trip", 3, 1, False)
    assert data["metadata"] == {"self": f"{base}/v3-round-trip",
                                "resource_name": f"crn:///kafka={cluster_id}/topic=v3-round-trip"}
    assert data["partitions"] == {"related": f"{base}/v3-round-trip/partitions"}
    admin.wait_for_topic("v3-round-trip", 30, partitions=3)

    again = http.post(topics, json=body)
    assert again.status_code == 400 and again.json()["error_code"] == 40002, again.text
    too_many = http.post(topics, json={"topic_name": "v3-replicated", "partitions_count": 1, "replication_factor": 3})
    assert too_many.status_code == 400 and too_many.json()["error_code"] == 40002, too_many.text
    checked = http.post(topics, json={"topic_name": "v3-checked-only", "partitions_count": 2, "validate_only": True})
    assert checked.status_code == 200 and checked.json()["partitions_count"] == 2, checked.text
    assert http.post(topics, json={"topic_name": "v3-bad", "partitions_count": "many"}).status_code == 400

    described = http.get(f"{topics}/v3-round-trip").json()
    assert {k: described[k] for k in ("topic_name", "partitions_count", "replication_factor")} == \
        {"topic_name": "v3-round-trip", "partitions_count": 3, "replication_factor": 1}
    listed = http.get(topics).json()
    assert listed["kind"] == "KafkaTopicList"
    names = [t["topic_name"] for t in listed["data"]]
    assert "v3-round-trip" in names and "v3-checked-only" not in names and names == sorted(names)
    assert not any(name.startswith("__") for name in names)

    partitions = http.get(f"{topics}/v3-round-trip/partitions").json()
    assert partitions["kind"] == "KafkaPartitionList"
    assert [p["partition_id"] for p in partitions["data"]] == [0, 1, 2]
    leaders = {p.partition: p.leader for p in admin.describe_topics(["v3-round-trip"])["v3-round-trip"].partitions}
    one = http.get(f"{topics}/v3-round-trip/partitions/2").json()
    assert one == partitions["data"][2]
    assert one["leader"] == {"related": f"{base}/v3-round-trip/partitions/2/replicas/{leaders[2]}"}
    assert one["metadata"]["resource_name"] == f"crn:///kafka={cluster_id}/topic=v3-round-trip/partition=2"
    missing = http.get(f"{topics}/v3-round-trip/partitions/7")
    assert missing.status_code == 404 and missing.json()["error_code"] == 404

    configs = http.get(f"{topics}/v3-round-trip/configs").json()
    assert configs["kind"] == "KafkaTopicConfigList"
    by_name = {c["name"]: c for c in configs["data"]}
    policy = by_name["cleanup.policy"]
    assert (policy["value"], policy["source"], policy["is_default"], policy["topic_name"]) == \
        ("compact", "DYNAMIC_TOPIC_CONFIG", False, "v3-round-trip")
    assert policy["metadata"]["self"] == f"{base}/v3-round-trip/configs/cleanup.policy"
    assert by_name["retention.ms"]["is_default"] is True

    assert http.delete(f"{topics}/v3-round-trip").status_code == 204
    # brokers forget the topic a moment before the controller finishes deleting it (and is told of it again)
    wait_until(lambda: http.delete(f"{topics}/v3-round-trip").status_code == 404, 30, message="the topic gone")
    for answer in (http.delete(f"{topics}/v3-round-trip"), http.get(f"{topics}/v3-round-trip"),
                   http.get(f"{topics}/v3-round-trip/partitions"), http.get(f"{topics}/v3-round-trip/configs")):
        assert answer.status_code == 404 and answer.json()["error_code"] == 40403, answer.text


def test_a_topic_created_is_usable_the_moment_it_is_answered(http: httpx.Client, cluster_id: str, admin: Admin):
    """Each of 30 topics takes a record, by v3 and by v2, and is described, right after its 201."""
    topics = f"/v3/clusters/{cluster_id}/topics"
    for index in range(30):
        name = f"v3-at-once-{index}"
        created = http.post(topics, json={"topic_name": name, "partitions_count": 2})
        assert created.status_code == 201, created.text
        produced = http.post(records_path(cluster_id, name), json={"value": {"type": "STRING", "data": "x"}})
        assert produced.status_code == 200 and produced.json()["error_code"] == 200, (name, produced.text)
        v2 = http.post(f"/topics/{name}", headers={"Content-Type": "application/vnd.kafka.json.v2+json"},
                       json={"records": [{"value": {"n": index}}]})
        assert v2.status_code == 200 and v2.json()["offsets"][0]["error_code"] is None, (name, v2.text)
        assert http.get(f"{topics}/{name}").json()["partitions_count"] == 2
    admin.delete_topics([f"v3-at-once-{index}" for index in range(30)])


# --------------------------------------------------------------------------------------------- one record

def test_single_records_of_every_type_are_read_back_byte_for_byte(http: httpx.Client, cluster: LocalCluster,
                                                                  cluster_id: str, admin: Admin):
    topic = create_topic(admin, "v3-typed", partitions=2)
    json_value = {"name": "Zoë", "n": [1, 2.5, None, True], "nested": {"k": "v"}}
    cases = [
        ({"type": "BINARY", "data": b64(b"\x00\xffkey")}, {"type": "BINARY", "data": b64(bytes(range(256)))},
         b"\x00\xffkey", bytes(range(256))),
        ({"type": "STRING", "data": "clé"}, {"type": "JSON", "data": json_value},
         "clé".encode(), json.dumps(json_value, separators=(",", ":"), ensure_ascii=False).encode()),
        ({"type": "JSON", "data": 42}, {"type": "STRING", "data": ""}, b"42", b""),
        (None, {"type": "BINARY", "data": b64(b"no key")}, None, b"no key"),
        ({"type": "STRING", "data": "only a key"}, None, b"only a key", None),
        ({"type": "BINARY", "data": None}, {"type": "JSON", "data": None}, None, None),
    ]
    headers = [{"name": "trace", "value": b64(b"\x01\x02")}, {"name": "empty", "value": None},
               {"name": "trace", "value": b64(b"again")}]
    for index, (key, value, _, _) in enumerate(cases):
        record = {"partition_id": 1, "headers": headers, "timestamp": TIMESTAMP_TEXT}
        record.update({name: part for name, part in (("key", key), ("value", value)) if part is not None})
        answer = http.post(records_path(cluster_id, topic), json=record)
        assert answer.status_code == 200, answer.text
        report = answer.json()
        assert report == {"error_code": 200, "cluster_id": cluster_id, "topic_name": topic, "partition_id": 1,
                          "offset": index, "timestamp": TIMESTAMP_TEXT, **report_parts(key, value, report)}

    records = read_back(cluster, TopicPartition(topic, 1), len(cases))
    for record, (_, _, key_bytes, value_bytes) in zip(records, cases, strict=True):
        assert (record.key, record.value, record.timestamp) == (key_bytes, value_bytes, TIMESTAMP_MS)
        assert list(record.headers) == [("trace", b"\x01\x02"), ("empty", None), ("trace", b"again")]
        sizes = tuple(-1 if part is None else len(part) for part in (key_bytes, value_bytes))
        assert (record.serialized_key_size, record.serialized_value_size) == sizes

    keyed = http.post(records_path(cluster_id, topic), json={"key": {"type": "STRING", "data": "k"},
                                                              "value": {"type": "STRING", "data": "v"}}).json()
    assert keyed["error_code"] == 200 and keyed["partition_id"] in (0, 1)
    assert abs(_ms(keyed["timestamp"]) - _now_ms()) < 60_000


def report_parts(key: dict | None, value: dict | None, report: dict) -> dict:
    """The key and value parts a report should have: the type asked for and the size written."""
    parts = {}
    for name, asked in (("key", key), ("value", value)):
        if asked is not None:
            parts[name] = {"type": asked["type"], "size": report[name]["size"]}
    return parts


def _ms(text: str) -> int:
    return int(datetime.datetime.fromisoformat(text).timestamp() * 1000)


def _now_ms() -> int:
    return int(time.time() * 1000)


# --------------------------------------------------------------------------------------------- streams

def test_a_stream_of_a_thousand_records_is_answered_in_order(http: httpx.Client, cluster: LocalCluster,
                                                             cluster_id: str, admin: Admin):
    topic = create_topic(admin, "v3-stream", partitions=2)
    count = 1000

    def body() -> Iterator[bytes]:
        for i in range(count):
            yield json.dumps({"partition_id": i % 2, "key": {"type": "STRING", "data": f"k{i}"},
                              "value": {"type": "STRING", "data": f"value-{i:04d}"}}).encode()

    reports = []
    with http.stream("POST", records_path(cluster_id, topic), content=body(), headers=JSON_HEADERS) as answer:
        assert answer.status_code == 200
        assert answer.headers.get("content-length") is None
        for line in answer.iter_lines():
            if line.strip():
                reports.append(json.loads(line))
    assert len(reports) == count
    assert all(r["error_code"] == 200 and r["topic_name"] == topic for r in reports)
    assert [(r["partition_id"], r["offset"]) for r in reports] == [(i % 2, i // 2) for i in range(count)]
    assert all(r["value"] == {"type": "STRING", "size": len(f"value-{i:04d}")} for i, r in enumerate(reports))

    records = read_back(cluster, TopicPartition(topic, 1), count // 2)
    assert [r.value for r in records] == [f"value-{i:04d}".encode() for i in range(1, count, 2)]
    metrics = http.get("/metrics").text
    produced = [line for line in metrics.splitlines()
                if line.startswith('odradek_gateway_records_total{direction="produced"}')]
    assert produced and float(produced[0].split()[-1]) >= count


def test_one_whole_body_of_more_records_than_reports_wait_is_answered(http: httpx.Client, cluster_id: str,
                                                                      admin: Admin):
    """25,000 records in one body with a Content-Length: more than MAX_IN_FLIGHT_REPORTS wait at once."""
    topic = create_topic(admin, "v3-whole-body")
    count = 25_000
    body = b"".join(json.dumps({"value": {"type": "STRING", "data": f"v{i}"}}).encode() for i in range(count))
    answer = http.post(records_path(cluster_id, topic), content=body, headers=JSON_HEADERS, timeout=120)
    reports = [json.loads(line) for line in answer.text.splitlines() if line.strip()]
    assert answer.status_code == 200 and len(reports) == count
    assert [r["offset"] for r in reports] == list(range(count))


def test_bad_records_in_a_stream_get_error_reports_and_the_stream_goes_on(http: httpx.Client, cluster: LocalCluster,
                                                                          cluster_id: str, admin: Admin):
    topic = create_topic(admin, "v3-mixed")
    good = [{"value": {"type": "STRING", "data": f"good-{i}"}} for i in range(4)]
    pieces = [json.dumps(good[0]), '{"value": {"type": "BINARY", "data": "not base64!"}}', json.dumps(good[1]),
              '{"value": oops}', '[1, 2]', json.dumps(good[2]), '{"partition_id": 9}', "  \n",
              json.dumps(good[3]), '{"value": {"type": "AVRO", "data": 1}}', '{"value": {"type": "STRI']

    def body() -> Iterator[bytes]:
        for piece in pieces:  # a record split over two chunks, the next one in the same chunk
            yield piece[: len(piece) // 2].encode()
            yield piece[len(piece) // 2:].encode() + b"\n"

    with http.stream("POST", records_path(cluster_id, topic), content=body(), headers=JSON_HEADERS) as answer:
        assert answer.status_code == 200
        reports = [json.loads(line) for line in answer.iter_lines() if line.strip()]
    codes = [r["error_code"] for r in reports]
    assert codes == [200, 400, 200, 400, 400, 200, 40402, 200, 42206, 400], reports
    assert [r["offset"] for r in reports if r["error_code"] == 200] == [0, 1, 2, 3]
    assert all(r["message"] for r in reports if r["error_code"] != 200)
    assert "base64" in reports[1]["message"]
    records = read_back(cluster, TopicPartition(topic, 0), 4)
    assert [r.value for r in records] == [f"good-{i}".encode() for i in range(4)]
    assert log_end(admin, TopicPartition(topic, 0)) == 4


def test_each_report_is_written_while_the_request_is_still_being_sent(cluster: LocalCluster, cluster_id: str,
                                                                      admin: Admin):
    """Full duplex: the next record is sent only after the report of the one before has arrived."""
    topic = create_topic(admin, "v3-duplex")
    address = urlsplit(cluster.gateway_url())
    connection = h11.Connection(h11.CLIENT)
    with socket.create_connection((address.hostname, address.port), timeout=15) as sock:
        sock.sendall(connection.send(h11.Request(method="POST", target=records_path(cluster_id, topic), headers=[
            ("Host", address.netloc), ("Content-Type", "application/json"), ("Transfer-Encoding", "chunked")])))
        received = bytearray()

        def next_report() -> dict:
            while b"\r\n" not in received:
                event = connection.next_event()
                if event is h11.NEED_DATA:
                    connection.receive_data(sock.recv(65536))
                elif isinstance(event, h11.Response):
                    assert event.status_code == 200
                elif isinstance(event, h11.Data):
                    received.extend(event.data)
                else:
                    raise AssertionError(f"unexpected {event!r}")
            line, _, rest = bytes(received).partition(b"\r\n")
            received[:] = rest
            return json.loads(line)

        for i in range(3):
            record = {"value": {"type": "STRING", "data": f"duplex-{i}"}}
            sock.sendall(connection.send(h11.Data(data=json.dumps(record).encode())))
            report = next_report()  # a timeout here means the report waited for the end of the request
            assert (report["error_code"], report["offset"]) == (200, i)
        sock.sendall(connection.send(h11.EndOfMessage()))
        while not isinstance(event := connection.next_event(), h11.EndOfMessage):
            if event is h11.NEED_DATA:
                connection.receive_data(sock.recv(65536))
    assert log_end(admin, TopicPartition(topic, 0)) == 3


# --------------------------------------------------------------------------------------------- consumer groups

def test_a_consumer_groups_lags(http: httpx.Client, cluster: LocalCluster, cluster_id: str, admin: Admin):
    topic = create_topic(admin, "v3-lagged", partitions=2)
    for partition, count in ((0, 10), (1, 5)):
        lines = b"".join(json.dumps({"partition_id": partition, "value": {"type": "STRING", "data": f"r{i}"}}).encode()
                         for i in range(count))
        with http.stream("POST", records_path(cluster_id, topic), content=iter([lines]),
                         headers=JSON_HEADERS) as answer:
            assert all(json.loads(line)["error_code"] == 200 for line in answer.iter_lines() if line.strip())
    group = "v3-lag-group"
    groups = f"/v3/clusters/{cluster_id}/consumer-groups"
    with Consumer(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG, group_id=group, client_id="lag-client",
                  auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=SESSION_TIMEOUT_MS,
                  heartbeat_interval_ms=500, fetch_max_wait_ms=100) as consumer:
        consumer.subscribe([topic])
        wait_until(lambda: consumer.poll(timeout_ms=100) is not None and len(consumer.assignment()) == 2, 30,
                   message="the consumer assigned both partitions")
        consumer.commit_sync({TopicPartition(topic, 0): 4, TopicPartition(topic, 1): 5})

        described = http.get(f"{groups}/{group}").json()
        assert (described["kind"], described["consumer_group_id"], described["state"], described["is_simple"],
                described["type"]) == ("KafkaConsumerGroup", group, "STABLE", False, "CLASSIC")
        assert described["lag_summary"]["related"].endswith(f"/consumer-groups/{group}/lag-summary")
        listed = http.get(groups).json()
        assert listed["kind"] == "KafkaConsumerGroupList"
        assert group in [g["consumer_group_id"] for g in listed["data"]]
        [member] = http.get(f"{groups}/{group}/consumers").json()["data"]
        assert (member["kind"], member["client_id"], member["consumer_group_id"]) == \
            ("KafkaConsumer", "lag-client", group)

        lags = http.get(f"{groups}/{group}/lags").json()
        assert lags["kind"] == "KafkaConsumerLagList"
        shown = [{k: lag[k] for k in ("topic_name", "partition_id", "current_offset", "log_end_offset", "lag",
                                      "consumer_id", "client_id")} for lag in lags["data"]]
        assert shown == [
            {"topic_name": topic, "partition_id": 0, "current_offset": 4, "log_end_offset": 10, "lag": 6,
             "consumer_id": member["consumer_id"], "client_id": "lag-client"},
            {"topic_name": topic, "partition_id": 1, "current_offset": 5, "log_end_offset": 5, "lag": 0,
             "consumer_id": member["consumer_id"], "client_id": "lag-client"}]
        assert lags["data"][0]["metadata"]["self"].endswith(f"/consumer-groups/{group}/lags/{topic}/partitions/0")
        assert http.get(f"{groups}/{group}/lags/{topic}/partitions/1").json() == lags["data"][1]
        assert http.get(f"{groups}/{group}/lags/{topic}/partitions/2").status_code == 404
        assert http.get(f"{groups}/{group}/consumers/{member['consumer_id']}").json() == member
        assert http.get(f"{groups}/{group}/consumers/nobody").status_code == 404

        summary = http.get(f"{groups}/{group}/lag-summary").json()
        assert {k: summary[k] for k in ("kind", "max_lag", "total_lag", "max_lag_topic_name", "max_lag_partition_id",
                                        "max_lag_consumer_id", "max_lag_client_id")} == {
            "kind": "KafkaConsumerGroupLagSummary", "max_lag": 6, "total_lag": 6, "max_lag_topic_name": topic,
            "max_lag_partition_id": 0, "max_lag_consumer_id": member["consumer_id"], "max_lag_client_id": "lag-client"}
        assert summary["max_lag_partition"]["related"].endswith(f"/topics/{topic}/partitions/0")

    for path in ("", "/consumers", "/lags", "/lag-summary"):
        answer = http.get(f"{groups}/no-such-group{path}")
        assert answer.status_code == 404 and answer.json()["error_code"] == 404, (path, answer.text)


def links_of(answer: Any) -> Iterator[str]:
    """Every `self` and `related` URL a v3 answer holds."""
    if isinstance(answer, dict):
        for key, value in answer.items():
            if key in ("self", "related") and isinstance(value, str):
                yield value
            else:
                yield from links_of(value)
    elif isinstance(answer, list):
        for item in answer:
            yield from links_of(item)


def test_every_link_of_every_v3_answer_names_a_resource(http: httpx.Client, cluster: LocalCluster, admin: Admin):
    """From /v3/clusters, every `self` and `related` link of every answer is followed: each answers
    200, through a topic with records, a group with a member, assignments and committed offsets, and
    a group that has committed nothing."""
    topic = create_topic(admin, "v3-crawled", partitions=2)
    produced = http.post(f"{records_path(admin.describe_cluster().cluster_id, topic)}",
                         json={"partition_id": 0, "value": {"type": "STRING", "data": "x"}})
    assert produced.status_code == 200, produced.text
    settings = {**CLIENT_CONFIG, "session_timeout_ms": SESSION_TIMEOUT_MS, "heartbeat_interval_ms": 500,
                "fetch_max_wait_ms": 100, "enable_auto_commit": False, "auto_offset_reset": "earliest"}
    with Consumer(bootstrap_servers=cluster.bootstrap_servers, group_id="v3-crawl-group", **settings) as committing, \
            Consumer(bootstrap_servers=cluster.bootstrap_servers, group_id="v3-crawl-idle", **settings) as idle:
        for consumer in (committing, idle):
            consumer.subscribe([topic])
            wait_until(lambda c=consumer: c.poll(timeout_ms=100) is not None and len(c.assignment()) == 2, 30,
                       message="the consumer assigned both partitions")
        committing.commit_sync({TopicPartition(topic, 0): 1})

        base = cluster.gateway_url()
        referrers = {f"{base}/v3/clusters": "the start"}
        kinds: set[str] = set()
        pending = list(referrers)
        while pending:
            url = pending.pop()
            assert url.startswith(f"{base}/v3/clusters"), (url, referrers[url])
            answer = http.get(url)
            assert answer.status_code == 200, f"{url} (from {referrers[url]}): {answer.status_code} {answer.text}"
            body = answer.json()
            kinds.update(item["kind"] for item in (body, *body.get("data", ())))
            for link in links_of(body):
                if link not in referrers:
                    referrers[link] = url
                    pending.append(link)
    assert kinds >= {"KafkaClusterList", "KafkaCluster", "KafkaBrokerList", "KafkaBroker", "KafkaReplicaList",
                     "KafkaReplica", "KafkaTopicList", "KafkaTopic", "KafkaPartitionList", "KafkaPartition",
                     "KafkaTopicConfigList", "KafkaTopicConfig", "KafkaConsumerGroupList", "KafkaConsumerGroup",
                     "KafkaConsumerList", "KafkaConsumer", "KafkaConsumerAssignmentList",
                     "KafkaConsumerAssignment", "KafkaConsumerGroupLagSummary"}, kinds
    print(f"{len(referrers)} links followed")


# --------------------------------------------------------------------------------------------- bad input

@pytest.mark.parametrize("name, body, headers, status, error_code", [
    ("garbage JSON", b'{"value": {"type": "STRING", "data": ', JSON_HEADERS, 400, 400),
    ("not JSON", b"hello there", JSON_HEADERS, 400, 400),
    ("not UTF-8", b'{"value": {"type": "STRING", "data": "\xff"}}', JSON_HEADERS, 400, 400),
    ("a JSON array", b"[1, 2, 3]", JSON_HEADERS, 400, 400),
    ("bad base64", b'{"value": {"type": "BINARY", "data": "fooba"}}', JSON_HEADERS, 400, 400),
    ("a number as base64", b'{"value": {"type": "BINARY", "data": 1}}', JSON_HEADERS, 400, 400),
    ("bad header base64", b'{"headers": [{"name": "h", "value": "%%"}], "value": {"type": "STRING", "data": "x"}}',
     JSON_HEADERS, 400, 400),
    ("bad timestamp", b'{"timestamp": "yesterday", "value": {"type": "STRING", "data": "x"}}', JSON_HEADERS, 400, 400),
    ("an unknown type", b'{"value": {"type": "XML", "data": "x"}}', JSON_HEADERS, 400, 400),
    ("a schema type", b'{"value": {"type": "AVRO", "data": "x"}}', JSON_HEADERS, 422, 42206),
    ("no type", b'{"value": {"data": "x"}}', JSON_HEADERS, 422, 42206),
    ("an unknown partition", b'{"partition_id": 3, "value": {"type": "STRING", "data": "x"}}', JSON_HEADERS,
     404, 40402),
    ("a negative partition", b'{"partition_id": -1, "value": {"type": "STRING", "data": "x"}}', JSON_HEADERS,
     404, 40402),
    ("an empty body", b"", JSON_HEADERS, 422, 42206),
    ("a record over max.record.bytes", b'{"value": {"type": "STRING", "data": "%s"}}' % (b"x" * (1048576 + 1)),
     JSON_HEADERS, 422, 42206),
    ("another content type", b'{"value": {"type": "STRING", "data": "x"}}', {"Content-Type": "text/plain"}, 415, 415),
])
def test_bad_input_is_refused_and_nothing_is_written(http: httpx.Client, cluster_id: str, admin: Admin, name: str,
                                                    body: bytes, headers: dict, status: int, error_code: int):
    topic = "v3-guarded"
    if topic not in admin.list_topics():
        create_topic(admin, topic)
    answer = http.post(records_path(cluster_id, topic), content=body, headers=headers)
    assert answer.status_code == status, (name, answer.text)
    assert answer.json()["error_code"] == error_code and answer.json()["message"], (name, answer.text)
    assert log_end(admin, TopicPartition(topic, 0)) == 0


def test_records_for_an_unknown_topic_are_404(http: httpx.Client, cluster_id: str, admin: Admin):
    answer = http.post(records_path(cluster_id, "v3-no-such-topic"), json={"value": {"type": "STRING", "data": "x"}})
    assert answer.status_code == 404 and answer.json()["error_code"] == 40403, answer.text
    assert "v3-no-such-topic" not in admin.list_topics()


# --------------------------------------------------------------------------------------------- a cluster down (last)

def test_a_cluster_that_is_down_is_answered_5xx_naming_the_kafka_error(http: httpx.Client, cluster: LocalCluster,
                                                                       cluster_id: str, admin: Admin):
    """Stops the module's broker: every request is answered 5xx within request.timeout.ms (10 s here)."""
    topic = create_topic(admin, "v3-before-the-fall")
    cluster.stop_service("broker-1")
    requests = [("GET", f"/v3/clusters/{cluster_id}/topics/{topic}"),
                ("POST", records_path(cluster_id, topic)),
                ("GET", f"/v3/clusters/{cluster_id}/consumer-groups/v3-lag-group/lags")]
    started = time.monotonic()
    with ThreadPoolExecutor(len(requests)) as pool:
        answers = list(pool.map(lambda asked: http.request(*asked, headers=JSON_HEADERS,
                                                           content=b'{"value": {"type": "STRING", "data": "x"}}'),
                                requests))
    assert time.monotonic() - started < 10 + 5
    for asked, answer in zip(requests, answers, strict=True):
        assert 500 <= answer.status_code < 600, (asked, answer.text)
        body = answer.json()
        assert body["error_code"] in (50002, 50003, 50302), (asked, body)
        assert re.search(r"\b[A-Z]+(_[A-Z]+)+\b", body["message"]), (asked, body)  # the Kafka error's name
