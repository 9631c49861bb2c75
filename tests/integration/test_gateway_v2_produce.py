"""REST Proxy v2 topics, partitions, brokers and produce through a real uvicorn gateway in front of a
real cluster (two brokers): the metadata answers match the cluster's; records produced in both
embedded formats, with keys and explicit partitions, read back byte for byte with a LowLevelClient;
every refused request is answered with REST Proxy's status and code and leaves every partition's
end offset where it was."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator

import httpx
import pytest

from services.clients.admin import Admin
from services.clients.lowlevel import LowLevelClient
from services.common.errors import ERRORS_BY_NAME
from services.common.hashing import partition_for_key
from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import wait_until
from services.gateway.errors import (
    INVALID_BODY,
    INVALID_KEY,
    INVALID_VALUE,
    KAFKA_ERROR,
    KAFKA_RETRIABLE_ERROR,
    PARTITION_NOT_FOUND,
    TOPIC_NOT_FOUND,
)
from services.gateway.media import V2_BINARY, V2_EMBEDDED_JSON, V2_JSON
from tests.integration.conftest import CLIENT_CONFIG, create_topic, gateway_module_cluster

EVENTS = "events"  # 3 partitions, replication factor 2
SINGLE = "single"  # 1 partition, replication factor 1, a topic config of its own
GATEWAY_MAX_RECORD_BYTES = 4096
GATEWAY_REQUEST_TIMEOUT_MS = 3000  # short, so answers without brokers come quickly


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    with gateway_module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "gwtopics", brokers=2,
                                gateway_config={"max.record.bytes": GATEWAY_MAX_RECORD_BYTES,
                                                "request.timeout.ms": GATEWAY_REQUEST_TIMEOUT_MS}) as cluster:
        with Admin(bootstrap_servers=cluster.bootstrap_servers, **CLIENT_CONFIG) as admin:
            create_topic(admin, EVENTS, 3, 2)
            create_topic(admin, SINGLE, 1, 1, configs={"retention.ms": "3600000"})
        yield cluster


@pytest.fixture(scope="module")
def http(cluster: LocalCluster) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=cluster.gateway_url(), timeout=30) as client:
        yield client


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def produce(http: httpx.Client, path: str, records: list[dict], content_type: str = V2_BINARY) -> httpx.Response:
    return http.post(path, json=None, content=json.dumps({"records": records}),
                     headers={"Content-Type": content_type, "Accept": V2_JSON})


def ok(response: httpx.Response) -> object:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith(V2_JSON)
    return response.json()


def end_offsets(writer: LowLevelClient, topic: str, partitions: int) -> list[int]:
    return [writer.list_offset(topic, p, "latest").offset for p in range(partitions)]


def read(writer: LowLevelClient, topic: str, partition: int, offset: int, count: int) -> list:
    records, _ = writer.fetch_records(topic, partition, offset, max_wait_ms=0)
    return records[:count]


# ---------------------------------------------------------------------- metadata

def test_brokers_are_listed_by_id(http: httpx.Client):
    assert ok(http.get("/brokers")) == {"brokers": [1, 2]}


def test_topics_are_listed_by_name_without_internal_topics(http: httpx.Client, admin: Admin):
    names = ok(http.get("/topics"))
    assert EVENTS in names and SINGLE in names
    assert not [name for name in names if name.startswith("__")]
    assert sorted(names) == sorted(admin.list_topics(include_internal=False))


def test_a_topic_shows_its_configs_and_partitions_with_leaders_replicas_and_isr(http: httpx.Client, admin: Admin):
    topic = ok(http.get(f"/topics/{EVENTS}"))
    assert topic["name"] == EVENTS
    assert topic["configs"]["cleanup.policy"] == "delete"
    described = admin.describe_topics([EVENTS])[EVENTS]
    assert [p["partition"] for p in topic["partitions"]] == [0, 1, 2]
    for body, info in zip(topic["partitions"], sorted(described.partitions, key=lambda p: p.partition), strict=True):
        assert body["leader"] == info.leader
        assert body["replicas"] == [{"broker": b, "leader": b == info.leader, "in_sync": b in info.isr}
                                    for b in info.replicas]
        assert sorted(r["broker"] for r in body["replicas"]) == [1, 2]
    assert ok(http.get(f"/topics/{SINGLE}"))["configs"]["retention.ms"] == "3600000"
    assert ok(http.get(f"/topics/{EVENTS}/partitions")) == topic["partitions"]
    assert ok(http.get(f"/topics/{EVENTS}/partitions/2")) == topic["partitions"][2]


@pytest.mark.parametrize("path", ["/topics/nope", "/topics/nope/partitions", "/topics/nope/partitions/0",
                                  "/topics/bad%20name", f"/topics/{'x' * 300}"])
def test_an_unknown_topic_is_404_40401(http: httpx.Client, path: str):
    response = http.get(path)
    assert response.status_code == 404
    assert response.json()["error_code"] == TOPIC_NOT_FOUND


@pytest.mark.parametrize("partition", ["3", "99", "-1", "x", "1.0"])
def test_reading_an_unknown_partition_is_404_40402(http: httpx.Client, partition: str):
    response = http.get(f"/topics/{EVENTS}/partitions/{partition}")
    assert (response.status_code, response.json()["error_code"]) == (404, PARTITION_NOT_FOUND)


def test_answers_v2_json_only(http: httpx.Client):
    assert http.get("/brokers", headers={"Accept": "application/xml"}).status_code == 406
    assert http.get("/brokers", headers={"Accept": f"{V2_JSON}, */*;q=0.1"}).status_code == 200


# ---------------------------------------------------------------------- produce

def test_binary_records_with_keys_go_to_their_key_partition_and_read_back_byte_for_byte(
        http: httpx.Client, writer: LowLevelClient):
    sent = [(f"key-{i}".encode(), bytes([i, 0, 255]) * (i + 1)) for i in range(12)] + [(None, b"no key"), (b"k", None)]
    body = ok(produce(http, f"/topics/{EVENTS}", [
        {"value": None if v is None else b64(v), **({} if k is None else {"key": b64(k)})} for k, v in sent]))
    assert body["key_schema_id"] is None and body["value_schema_id"] is None
    offsets = body["offsets"]
    assert len(offsets) == len(sent)
    for (key, value), entry in zip(sent, offsets, strict=True):
        assert entry["error_code"] is None and entry["error"] is None, entry
        if key is not None:
            assert entry["partition"] == partition_for_key(key, 3)
        [record] = read(writer, EVENTS, entry["partition"], entry["offset"], 1)
        assert (record.offset, record.key, record.value) == (entry["offset"], key, value)


def test_json_records_are_sent_as_compact_json_text(http: httpx.Client, writer: LowLevelClient):
    values = [{"user": "zoë", "tags": ["a", "b"], "n": 1.5}, "text", 42, None, [True, None]]
    body = ok(produce(http, f"/topics/{SINGLE}", [{"key": {"id": i}, "value": v} for i, v in enumerate(values)],
                      V2_EMBEDDED_JSON))
    first = body["offsets"][0]["offset"]
    assert [(e["partition"], e["offset"]) for e in body["offsets"]] == [(0, first + i) for i in range(5)]
    records = read(writer, SINGLE, 0, first, 5)
    assert [r.key for r in records] == [f'{{"id":{i}}}'.encode() for i in range(5)]
    assert [r.value for r in records] == ['{"user":"zoë","tags":["a","b"],"n":1.5}'.encode(), b'"text"', b"42",
                                          None, b"[true,null]"]


def test_records_naming_partitions_and_the_partition_path_write_there(http: httpx.Client, writer: LowLevelClient):
    body = ok(produce(http, f"/topics/{EVENTS}", [{"value": b64(b"to-2"), "partition": 2},
                                                   {"key": b64(b"k"), "value": b64(b"to-0"), "partition": 0}]))
    assert [e["partition"] for e in body["offsets"]] == [2, 0]
    body = ok(produce(http, f"/topics/{EVENTS}/partitions/1", [{"key": b64(b"any"), "value": b64(b"to-1")},
                                                               {"value": b64(b"also")}]))
    assert [e["partition"] for e in body["offsets"]] == [1, 1]
    assert body["offsets"][1]["offset"] == body["offsets"][0]["offset"] + 1
    records = read(writer, EVENTS, 1, body["offsets"][0]["offset"], 2)
    assert [(r.key, r.value) for r in records] == [(b"any", b"to-1"), (None, b"also")]
    body = ok(produce(http, f"/topics/{SINGLE}/partitions/0", [{"value": {"a": 1}}], V2_EMBEDDED_JSON))
    assert read(writer, SINGLE, 0, body["offsets"][0]["offset"], 1)[0].value == b'{"a":1}'


def test_a_request_of_500_records_is_answered_in_record_order(http: httpx.Client, writer: LowLevelClient):
    before = end_offsets(writer, EVENTS, 3)
    records = [{"key": {"n": i % 7}, "value": {"i": i, "pad": "x" * 100}} for i in range(500)]
    offsets = ok(produce(http, f"/topics/{EVENTS}", records, V2_EMBEDDED_JSON))["offsets"]
    assert len(offsets) == 500 and all(e["error_code"] is None for e in offsets)
    for partition in range(3):
        mine = [e["offset"] for e in offsets if e["partition"] == partition]
        assert mine == list(range(before[partition], before[partition] + len(mine)))
    assert end_offsets(writer, EVENTS, 3) == [b + sum(e["partition"] == p for e in offsets)
                                              for p, b in enumerate(before)]
    by_position = {(e["partition"], e["offset"]): i for i, e in enumerate(offsets)}
    for partition in range(3):
        for record in read(writer, EVENTS, partition, before[partition], 500):
            i = by_position[(partition, record.offset)]
            assert json.loads(record.value) == records[i]["value"]


def test_produced_records_are_counted_in_the_metrics(http: httpx.Client):
    def produced() -> float:
        for line in http.get("/metrics").text.splitlines():
            if line.startswith('odradek_gateway_records_total{direction="produced"}'):
                return float(line.split()[-1])
        return 0.0

    before = produced()
    ok(produce(http, f"/topics/{SINGLE}", [{"value": b64(b"counted")}] * 3))
    assert produced() == before + 3



def test_records_kafka_refuses_carry_the_kafka_error_in_their_own_entry(http: httpx.Client, admin: Admin):
    """The brokers take no records for internal topics from clients: every record is answered 50002."""
    wait_until(lambda: "__consumer_offsets" in admin.list_topics(include_internal=True), timeout_s=30)
    offsets = ok(produce(http, "/topics/__consumer_offsets/partitions/0", [GOOD, GOOD]))["offsets"]
    assert [(e["partition"], e["offset"], e["error_code"]) for e in offsets] == [(None, None, KAFKA_ERROR)] * 2
    assert all("INVALID_TOPIC_EXCEPTION" in e["error"] for e in offsets), offsets

# ---------------------------------------------------------------------- refusals

def refused(http: httpx.Client, writer: LowLevelClient, path: str, body: bytes | str, status: int,
            error_code: int, content_type: str = V2_BINARY) -> str:
    """Posts `body` and checks the answer; no partition of EVENTS or SINGLE has grown."""
    before = end_offsets(writer, EVENTS, 3) + end_offsets(writer, SINGLE, 1)
    response = http.post(path, content=body, headers={"Content-Type": content_type})
    assert response.status_code == status, response.text
    answer = response.json()
    assert answer["error_code"] == error_code and answer["message"], answer
    assert end_offsets(writer, EVENTS, 3) + end_offsets(writer, SINGLE, 1) == before
    return answer["message"]


GOOD = {"key": b64(b"k"), "value": b64(b"v")}


@pytest.mark.parametrize("body", ['{"records": [', "not json", '{"records": [{"value": NaN}]}', ""])
def test_malformed_json_is_400(http: httpx.Client, writer: LowLevelClient, body: str):
    refused(http, writer, f"/topics/{EVENTS}", body, 400, 400)


@pytest.mark.parametrize("body", [{}, {"records": []}, {"records": "x"}, {"records": [GOOD, 7]},
                                  {"records": [GOOD], "other": 1}, {"records": [GOOD, {"value": "dg==", "x": 1}]},
                                  {"records": [GOOD, {"value": "dg==", "partition": "1"}]}, [GOOD]])
def test_a_body_of_the_wrong_shape_is_422_42202(http: httpx.Client, writer: LowLevelClient, body: object):
    refused(http, writer, f"/topics/{EVENTS}", json.dumps(body), 422, INVALID_BODY)


def test_invalid_base64_is_42204_for_a_key_and_42205_for_a_value(http: httpx.Client, writer: LowLevelClient):
    bad_key = {"records": [GOOD, {"key": "%%%", "value": "dg=="}]}
    message = refused(http, writer, f"/topics/{EVENTS}", json.dumps(bad_key), 422, INVALID_KEY)
    assert "records[1].key" in message
    message = refused(http, writer, f"/topics/{EVENTS}", json.dumps({"records": [GOOD, {"value": "dg=\n="}]}),
                      422, INVALID_VALUE)
    assert "records[1].value" in message


def test_a_record_over_max_record_bytes_is_refused_with_the_others(http: httpx.Client, writer: LowLevelClient):
    large = {"key": b64(b"k" * 96), "value": b64(b"v" * (GATEWAY_MAX_RECORD_BYTES - 95))}
    message = refused(http, writer, f"/topics/{EVENTS}", json.dumps({"records": [GOOD, large]}), 422, INVALID_BODY)
    assert f"max.record.bytes ({GATEWAY_MAX_RECORD_BYTES})" in message
    fits = {"key": b64(b"k" * 96), "value": b64(b"v" * (GATEWAY_MAX_RECORD_BYTES - 96))}
    assert ok(produce(http, f"/topics/{SINGLE}", [fits]))["offsets"][0]["error_code"] is None


def test_an_unknown_topic_is_404_and_is_not_created(http: httpx.Client, writer: LowLevelClient, admin: Admin):
    refused(http, writer, "/topics/never-created", json.dumps({"records": [GOOD]}), 404, TOPIC_NOT_FOUND)
    refused(http, writer, "/topics/never-created/partitions/0", json.dumps({"records": [GOOD]}), 404,
            TOPIC_NOT_FOUND)
    assert "never-created" not in admin.list_topics()


@pytest.mark.parametrize("path, records", [
    (f"/topics/{EVENTS}/partitions/3", [GOOD]),
    (f"/topics/{EVENTS}/partitions/x", [GOOD]),
    (f"/topics/{EVENTS}", [GOOD, {**GOOD, "partition": 3}]),
    (f"/topics/{SINGLE}", [{**GOOD, "partition": 0}, {**GOOD, "partition": 1}]),
])
def test_producing_to_an_unknown_partition_is_404_40402(http: httpx.Client, writer: LowLevelClient, path: str,
                                                        records: list):
    refused(http, writer, path, json.dumps({"records": records}), 404, PARTITION_NOT_FOUND)


@pytest.mark.parametrize("content_type", ["application/json", V2_JSON, "application/vnd.kafka.avro.v2+json",
                                          "text/plain", ""])
def test_a_content_type_other_than_binary_or_json_is_415(http: httpx.Client, writer: LowLevelClient,
                                                         content_type: str):
    refused(http, writer, f"/topics/{EVENTS}", json.dumps({"records": [GOOD]}), 415, 415, content_type)



# ---------------------------------------------------------------------- last: the cluster goes away

def test_with_the_brokers_stopped_requests_are_5xx_naming_the_kafka_error_in_time(cluster: LocalCluster,
                                                                                  http: httpx.Client):
    """Runs last in the module: it stops the brokers."""
    for name in cluster.broker_names:
        cluster.stop_service(name)
    limit_s = GATEWAY_REQUEST_TIMEOUT_MS / 1000 + 2
    for request in (lambda: produce(http, f"/topics/{EVENTS}", [GOOD]), lambda: http.get(f"/topics/{EVENTS}"),
                    lambda: http.get("/brokers")):
        started = time.monotonic()
        response = request()
        assert time.monotonic() - started < limit_s
        assert response.status_code >= 500, response.text
        answer = response.json()
        assert answer["error_code"] in (KAFKA_ERROR, KAFKA_RETRIABLE_ERROR), answer
        assert any(name in answer["message"] for name in ERRORS_BY_NAME), answer
