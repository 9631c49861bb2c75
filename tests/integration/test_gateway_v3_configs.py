"""REST Proxy v3's config, replica and partition-count resources through a real uvicorn gateway in
front of a real three-broker cluster: a topic's configs listed, read, set, reset and altered in a
batch, each change seen through the Admin; a broker's configs answered as the Admin describes them;
the replicas of a three-replica partition with their leader and in-sync flags; a topic grown to more
partitions; the reassignments in progress listed for the cluster and a topic and read per partition,
404 once there is none; unknown topics, configs, partitions and brokers answered 404, and bad bodies
400, all with REST Proxy's error body; the OpenAPI description naming every new operation."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from services.clients.admin import Admin
from services.clients.admin_types import BROKER_RESOURCE
from services.common.errors import KafkaError
from services.common.topic_partition import TopicPartition
from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import wait_until
from tests.integration.conftest import create_topic, gateway_module_cluster, produce_values
from tests.integration.test_replication import paused

JSON_HEADERS = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    with gateway_module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "gateway-v3-configs",
                                brokers=3) as local:
        yield local


@pytest.fixture(scope="module")
def http(cluster: LocalCluster) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=cluster.gateway_url(), timeout=30) as client:
        yield client


@pytest.fixture(scope="module")
def cluster_id(admin: Admin) -> str:
    return admin.describe_cluster().cluster_id


@pytest.fixture(scope="module")
def broker_ids(admin: Admin) -> list[int]:
    return [node.node_id for node in admin.describe_cluster().nodes]


def topic_config(admin: Admin, topic: str, name: str) -> tuple[str | None, str]:
    entry = admin.describe_configs([topic])[topic][name]
    return entry.value, entry.source_name


def assert_error(answer: httpx.Response, status: int, error_code: int) -> None:
    assert answer.status_code == status, answer.text
    body = answer.json()
    assert set(body) == {"error_code", "message"} and body["error_code"] == error_code, body
    assert isinstance(body["message"], str) and body["message"]


# --------------------------------------------------------------------------------------------- topic configs

def test_a_topics_configs_are_listed_read_set_reset_and_altered(http: httpx.Client, cluster: LocalCluster,
                                                                 cluster_id: str, admin: Admin):
    topic = create_topic(admin, "configured", configs={"cleanup.policy": "compact"})
    configs = f"/v3/clusters/{cluster_id}/topics/{topic}/configs"
    base = f"{cluster.gateway_url()}{configs}"

    listed = http.get(configs).json()
    assert listed["kind"] == "KafkaTopicConfigList" and listed["metadata"]["self"] == base
    by_name = {c["name"]: c for c in listed["data"]}
    assert list(by_name) == sorted(by_name) and set(by_name) == set(admin.describe_configs([topic])[topic])
    retention = by_name["retention.ms"]
    assert (retention["kind"], retention["topic_name"], retention["cluster_id"], retention["is_default"],
            retention["source"], retention["is_read_only"], retention["is_sensitive"]) == \
        ("KafkaTopicConfig", topic, cluster_id, True, "DEFAULT_CONFIG", False, False)
    assert retention["metadata"] == {"self": f"{base}/retention.ms",
                                     "resource_name": f"crn:///kafka={cluster_id}/topic={topic}/config=retention.ms"}
    assert http.get(f"{configs}/cleanup.policy").json() == by_name["cleanup.policy"]

    assert http.put(f"{configs}/retention.ms", json={"value": "3600000"}).status_code == 204
    assert topic_config(admin, topic, "retention.ms") == ("3600000", "DYNAMIC_TOPIC_CONFIG")
    one = http.get(f"{configs}/retention.ms").json()
    assert (one["value"], one["source"], one["is_default"]) == ("3600000", "DYNAMIC_TOPIC_CONFIG", False)
    assert one["synonyms"][0] == {"name": "retention.ms", "value": "3600000", "source": "DYNAMIC_TOPIC_CONFIG"}

    assert http.delete(f"{configs}/retention.ms").status_code == 204
    assert topic_config(admin, topic, "retention.ms") == (retention["value"], "DEFAULT_CONFIG")

    altered = http.post(f"{configs}:alter", json={"data": [
        {"name": "retention.ms", "value": "7200000"},
        {"name": "max.message.bytes", "value": "2048", "operation": "SET"},
        {"name": "cleanup.policy", "operation": "DELETE"}]})
    assert altered.status_code == 204, altered.text
    assert topic_config(admin, topic, "retention.ms") == ("7200000", "DYNAMIC_TOPIC_CONFIG")
    assert topic_config(admin, topic, "max.message.bytes") == ("2048", "DYNAMIC_TOPIC_CONFIG")
    assert topic_config(admin, topic, "cleanup.policy") == ("delete", "DEFAULT_CONFIG")

    checked = http.post(f"{configs}:alter", json={"data": [{"name": "retention.ms", "value": "1"}],
                                                  "validate_only": True})
    assert checked.status_code == 204, checked.text
    assert topic_config(admin, topic, "retention.ms") == ("7200000", "DYNAMIC_TOPIC_CONFIG")

    # what Kafka refuses is its error; nothing changes
    assert_error(http.put(f"{configs}/retention.ms", json={"value": "soon"}), 400, 40002)
    assert_error(http.post(f"{configs}:alter", json={"data": [{"name": "no.such.config", "value": "1"}]}), 400, 40002)
    assert topic_config(admin, topic, "retention.ms") == ("7200000", "DYNAMIC_TOPIC_CONFIG")
    # a config the topic does not have, read, set or reset one at a time
    assert_error(http.get(f"{configs}/no.such.config"), 404, 404)
    assert_error(http.put(f"{configs}/no.such.config", json={"value": "1"}), 404, 404)
    assert_error(http.delete(f"{configs}/no.such.config"), 404, 404)


@pytest.mark.parametrize("method, suffix", [("GET", ""), ("GET", "/retention.ms"), ("PUT", "/retention.ms"),
                                            ("DELETE", "/retention.ms"), ("POST", ":alter")])
def test_configs_of_an_unknown_topic_are_404(http: httpx.Client, cluster_id: str, method: str, suffix: str):
    body = {"value": "1"} if method == "PUT" else {"data": [{"name": "retention.ms", "value": "1"}]}
    answer = http.request(method, f"/v3/clusters/{cluster_id}/topics/no-such-topic/configs{suffix}",
                          json=body if method in ("PUT", "POST") else None)
    assert_error(answer, 404, 40403)


@pytest.fixture(scope="module")
def bodies_topic(admin: Admin) -> str:
    return create_topic(admin, "badly-configured")


@pytest.mark.parametrize("name, method, suffix, content, headers, status, error_code", [
    ("not JSON", "PUT", "/retention.ms", b"hello", JSON_HEADERS, 400, 400),
    ("cut short", "POST", ":alter", b'{"data": [', JSON_HEADERS, 400, 400),
    ("no value", "PUT", "/retention.ms", b'{"valu": "1"}', JSON_HEADERS, 400, 400),
    ("a number as value", "PUT", "/retention.ms", b'{"value": 1}', JSON_HEADERS, 400, 400),
    ("a JSON array", "PUT", "/retention.ms", b"[1]", JSON_HEADERS, 400, 400),
    ("data not a list", "POST", ":alter", b'{"data": "retention.ms"}', JSON_HEADERS, 400, 400),
    ("an unknown operation", "POST", ":alter", b'{"data": [{"name": "retention.ms", "value": "1", '
                                               b'"operation": "EXPLODE"}]}', JSON_HEADERS, 400, 400),
    ("SET without a value", "POST", ":alter", b'{"data": [{"name": "retention.ms"}]}', JSON_HEADERS, 400, 400),
    ("a name twice", "POST", ":alter", b'{"data": [{"name": "retention.ms", "value": "1"}, '
                                       b'{"name": "retention.ms", "operation": "DELETE"}]}', JSON_HEADERS, 400, 400),
    ("validate_only not a boolean", "POST", ":alter", b'{"data": [], "validate_only": "yes"}', JSON_HEADERS,
     400, 400),
    ("an empty body", "PUT", "/retention.ms", b"", JSON_HEADERS, 422, 42206),
    ("another content type", "PUT", "/retention.ms", b'{"value": "1"}', {"Content-Type": "text/plain"}, 415, 415),
])
def test_bad_config_bodies_are_refused_and_change_nothing(http: httpx.Client, cluster_id: str, admin: Admin,
                                                          bodies_topic: str, name: str, method: str, suffix: str,
                                                          content: bytes, headers: dict, status: int,
                                                          error_code: int):
    topic = bodies_topic
    before = admin.describe_configs([topic])[topic]
    answer = http.request(method, f"/v3/clusters/{cluster_id}/topics/{topic}/configs{suffix}", content=content,
                          headers=headers)
    assert_error(answer, status, error_code)
    assert admin.describe_configs([topic])[topic] == before


# --------------------------------------------------------------------------------------------- broker configs

def test_a_brokers_configs_are_answered_as_the_admin_describes_them(http: httpx.Client, cluster: LocalCluster,
                                                                    cluster_id: str, admin: Admin,
                                                                    broker_ids: list[int]):
    broker = broker_ids[0]
    configs = f"/v3/clusters/{cluster_id}/brokers/{broker}/configs"
    # a dynamic broker config, set before it is listed, is then listed as the Admin describes it
    assert http.put(f"{configs}/log.retention.ms", json={"value": "3600000"}).status_code == 204
    described = admin.describe_configs([str(broker)], resource_type=BROKER_RESOURCE, include_synonyms=True,
                                       raise_errors=False)[str(broker)]
    listed = http.get(configs)
    if isinstance(described, KafkaError):  # the cluster does not describe broker configs: its error, as v3's
        assert_error(listed, 400, 40002)
        assert described.error_name in listed.json()["message"]
    else:
        assert listed.status_code == 200, listed.text
        body = listed.json()
        assert body["kind"] == "KafkaBrokerConfigList"
        assert [c["name"] for c in body["data"]] == sorted(described)
        first = body["data"][0]
        assert (first["kind"], first["broker_id"], first["source"]) == \
            ("KafkaBrokerConfig", broker, described[first["name"]].source_name)
        assert first["metadata"]["resource_name"] == \
            f"crn:///kafka={cluster_id}/broker={broker}/config={first['name']}"
        assert http.get(f"{configs}/{first['name']}").json() == first
        assert_error(http.get(f"{configs}/no.such.config"), 404, 404)
        assert body["data"][0]["name"] == "log.retention.ms" and first["source"] == "DYNAMIC_BROKER_CONFIG"
        assert http.delete(f"{configs}/log.retention.ms").status_code == 204
        assert http.get(configs).json()["data"] == []
    # a change the cluster refuses (here, a config it cannot change while the broker runs) is its error
    refused = http.post(f"{configs}:alter", json={"data": [{"name": "broker.id", "value": "77"}]})
    assert_error(refused, 400, 40002)


@pytest.mark.parametrize("method, suffix", [("GET", "/configs"), ("GET", "/configs/log.retention.ms"),
                                            ("PUT", "/configs/log.retention.ms"),
                                            ("DELETE", "/configs/log.retention.ms"),
                                            ("POST", "/configs:alter"), ("GET", "/partition-replicas")])
def test_an_unknown_brokers_configs_and_replicas_are_404(http: httpx.Client, cluster_id: str, method: str,
                                                         suffix: str):
    body = {"value": "1"} if method == "PUT" else {"data": [{"name": "log.retention.ms", "value": "1"}]}
    answer = http.request(method, f"/v3/clusters/{cluster_id}/brokers/4242{suffix}",
                          json=body if method in ("PUT", "POST") else None)
    assert_error(answer, 404, 404)


# --------------------------------------------------------------------------------------------- replicas

def test_the_replicas_of_a_three_replica_partition(http: httpx.Client, cluster: LocalCluster, cluster_id: str,
                                                   admin: Admin, broker_ids: list[int]):
    topic = create_topic(admin, "thrice", partitions=2, replication=3)
    partition = admin.describe_topics([topic])[topic].partitions[0]
    assert partition.partition == 0 and sorted(partition.replicas) == sorted(broker_ids)
    wait_until(lambda: len(admin.describe_topics([topic])[topic].partitions[0].isr) == 3, 30,
               message="every replica in sync")
    partition = admin.describe_topics([topic])[topic].partitions[0]
    replicas = f"/v3/clusters/{cluster_id}/topics/{topic}/partitions/0/replicas"
    base = cluster.gateway_url()

    listed = http.get(replicas).json()
    assert listed["kind"] == "KafkaReplicaList"
    assert [r["broker_id"] for r in listed["data"]] == sorted(broker_ids)
    assert [r["broker_id"] for r in listed["data"] if r["is_leader"]] == [partition.leader]
    assert all(r["is_in_sync"] for r in listed["data"])
    for replica in listed["data"]:
        assert (replica["kind"], replica["topic_name"], replica["partition_id"]) == ("KafkaReplica", topic, 0)
        assert replica["broker"] == {"related": f"{base}/v3/clusters/{cluster_id}/brokers/{replica['broker_id']}"}
        assert http.get(f"{replicas}/{replica['broker_id']}").json() == replica
    leader = http.get(f"{replicas}/{partition.leader}").json()
    assert leader["is_leader"] is True and leader["metadata"]["resource_name"] == \
        f"crn:///kafka={cluster_id}/topic={topic}/partition=0/replica={partition.leader}"

    for broker in broker_ids:
        held = http.get(f"/v3/clusters/{cluster_id}/brokers/{broker}/partition-replicas").json()
        mine = [(r["partition_id"], r["is_leader"]) for r in held["data"] if r["topic_name"] == topic]
        leaders = {p.partition: p.leader for p in admin.describe_topics([topic])[topic].partitions}
        assert mine == [(0, leaders[0] == broker), (1, leaders[1] == broker)], held

    assert_error(http.get(f"{replicas}/4242"), 404, 404)
    assert_error(http.get(f"/v3/clusters/{cluster_id}/topics/{topic}/partitions/9/replicas"), 404, 404)
    assert_error(http.get(f"/v3/clusters/{cluster_id}/topics/{topic}/partitions/9/replicas/{partition.leader}"),
                 404, 404)
    assert_error(http.get(f"/v3/clusters/{cluster_id}/topics/no-such-topic/partitions/0/replicas"), 404, 40403)


# --------------------------------------------------------------------------------------------- partition count

def test_a_topic_grows_to_more_partitions(http: httpx.Client, cluster_id: str, admin: Admin):
    topic = create_topic(admin, "growing")
    path = f"/v3/clusters/{cluster_id}/topics/{topic}"
    grown = http.patch(path, json={"partitions_count": 3})
    assert grown.status_code == 200, grown.text
    assert (grown.json()["kind"], grown.json()["partitions_count"]) == ("KafkaTopic", 3)
    assert len(admin.describe_topics([topic])[topic].partitions) == 3

    assert_error(http.patch(path, json={"partitions_count": 2}), 400, 40002)
    assert_error(http.patch(path, json={"partitions_count": "many"}), 400, 400)
    assert_error(http.patch(path, content=b"{", headers=JSON_HEADERS), 400, 400)
    assert_error(http.patch(f"/v3/clusters/{cluster_id}/topics/no-such-topic", json={"partitions_count": 2}),
                 404, 40403)
    assert len(admin.describe_topics([topic])[topic].partitions) == 3


def test_an_unanswered_method_is_405_naming_those_answered(http: httpx.Client, cluster_id: str):
    answer = http.put(f"/v3/clusters/{cluster_id}/topics/growing/partitions/0/replicas")
    assert_error(answer, 405, 405)
    assert answer.headers["allow"] == "GET"


# --------------------------------------------------------------------------------------------- reassignments

def test_reassignments_in_progress_are_listed_and_read(http: httpx.Client, cluster: LocalCluster, cluster_id: str,
                                                       admin: Admin, broker_ids: list[int], writer):
    b1, _, b3 = sorted(broker_ids)
    topic = create_topic(admin, "reassigned", assignment={0: [b1], 1: [b1]})
    create_topic(admin, "still", assignment={0: [b1]})
    for partition in (0, 1):
        produce_values(writer, topic, partition, [b"a", b"b"])
    t0, t1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    base = f"/v3/clusters/{cluster_id}"
    with paused(cluster, b3):  # the new replicas cannot catch up: the reassignments stay in progress
        assert admin.alter_partition_reassignments({t0: [b3], t1: [b1, b3]}) == {t0: None, t1: None}
        try:
            every = http.get(f"{base}/topics/-/partitions/-/reassignment")
            assert every.status_code == 200, every.text
            body = every.json()
            assert body["kind"] == "KafkaReassignmentList"
            assert body["metadata"]["self"].endswith(f"{base}/topics/-/partitions/-/reassignment")
            assert [(r["topic_name"], r["partition_id"], r["adding_replicas"], r["removing_replicas"])
                    for r in body["data"]] == [(topic, 0, [b3], [b1]), (topic, 1, [b3], [])]
            by_topic = http.get(f"{base}/topics/{topic}/partitions/-/reassignment").json()
            assert by_topic["data"] == body["data"]
            assert by_topic["metadata"]["self"].endswith(f"{base}/topics/{topic}/partitions/-/reassignment")
            assert http.get(f"{base}/topics/still/partitions/-/reassignment").json()["data"] == []
            one = http.get(f"{base}/topics/{topic}/partitions/0/reassignment")
            assert one.status_code == 200, one.text
            resource = one.json()
            assert resource == body["data"][0]
            assert resource["kind"] == "KafkaReassignment" and resource["cluster_id"] == cluster_id
            assert resource["metadata"]["self"] == \
                f"{cluster.gateway_url()}{base}/topics/{topic}/partitions/0/reassignment"
            assert resource["metadata"]["resource_name"] == \
                f"crn:///kafka={cluster_id}/topic={topic}/partition=0/reassignment"
            replicas_url = resource["replicas"]["related"]
            assert_error(http.get(f"{base}/topics/still/partitions/0/reassignment"), 404, 404)
        finally:
            admin.alter_partition_reassignments({t0: None, t1: None})
    replicas = http.get(replicas_url)
    assert replicas.status_code == 200 and replicas.json()["kind"] == "KafkaReplicaList", replicas.text
    assert_error(http.get(f"{base}/topics/{topic}/partitions/0/reassignment"), 404, 404)
    assert http.get(f"{base}/topics/-/partitions/-/reassignment").json()["data"] == []
    assert_error(http.get("/v3/clusters/other/topics/-/partitions/-/reassignment"), 404, 404)


# --------------------------------------------------------------------------------------------- OpenAPI

def test_the_openapi_description_names_every_new_operation(http: httpx.Client):
    paths = http.get("/openapi.json").json()["paths"]
    topic = "/v3/clusters/{cluster_id}/topics/{topic_name}"
    broker = "/v3/clusters/{cluster_id}/brokers/{broker_id}"
    expected = {f"{topic}": {"get", "delete", "patch"}, f"{topic}/configs": {"get"},
                f"{topic}/configs/{{config_name}}": {"get", "put", "delete"}, f"{topic}/configs:alter": {"post"},
                f"{broker}/configs": {"get"}, f"{broker}/configs/{{config_name}}": {"get", "put", "delete"},
                f"{broker}/configs:alter": {"post"}, f"{topic}/partitions/{{partition_id}}/replicas": {"get"},
                f"{topic}/partitions/{{partition_id}}/replicas/{{broker_id}}": {"get"},
                f"{broker}/partition-replicas": {"get"},
                "/v3/clusters/{cluster_id}/topics/-/partitions/-/reassignment": {"get"},
                f"{topic}/partitions/-/reassignment": {"get"},
                f"{topic}/partitions/{{partition_id}}/reassignment": {"get"}}
    for path, methods in expected.items():
        assert set(paths[path]) == methods, (path, set(paths[path]))
    alter = paths[f"{topic}/configs:alter"]["post"]
    assert alter["requestBody"]["content"]["application/json"]["schema"]["required"] == ["data"]
    assert {"204", "400", "404"} <= set(alter["responses"])
