"""The secured gateway in front of a real cluster (BASIC authentication, the ACL authorizer, User:admin
a super user from a password file, alice and bob SCRAM users in ZooKeeper): every route of the
OpenAPI document and the console's views answered 401 anonymously and with a wrong password, 403 with
Kafka's error name to alice, who has no ACL; bob, given the ACLs of each operation, produces, reads,
lists, creates, alters and deletes topics, consumes in a group through a v2 consumer and reads the
cluster; REST v3's ACL resources round-trip (create, batch create, list with a filter, delete) and are
seen in ZooKeeper; the refusals reach the `odradek.audit` log of the gateway."""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator

import httpx
import pyarrow as pa
import pytest

from services.common.security.acl import AclBindingFilter
from services.common.security.authorizer import AclAuthorizer
from services.common.security.sasl import make_scram_credential
from services.devcluster.launcher import LocalCluster
from services.devcluster.proc import wait_until
from tests.integration.conftest import gateway_module_cluster, zk_session

JSON = {"Content-Type": "application/json"}
V2_JSON = {"Content-Type": "application/vnd.kafka.json.v2+json", "Accept": "application/vnd.kafka.json.v2+json"}
ADMIN, ALICE, BOB = ("admin", "admin-secret"), ("alice", "alice-secret"), ("bob", "bob-secret")
TOPIC = "secured"
CONSOLE_VIEWS = ["/ui/api/health", "/ui/api/topics", f"/ui/api/topics/{TOPIC}/partitions", "/ui/api/groups",
                 "/ui/api/series"]


def basic(user: tuple[str, str]) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user[0]}:{user[1]}".encode()).decode()}


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest, zookeeper, _zk_root_client, tmp_path_factory) -> Iterator[LocalCluster]:
    users = tmp_path_factory.mktemp("gateway-users") / "users.properties"
    users.write_text("admin: admin-secret,admin\n")
    settings = {"authentication.method": "BASIC", "authentication.password.file": str(users),
                "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:admin"}
    with gateway_module_cluster(request, zookeeper, _zk_root_client, tmp_path_factory, "gateway-security",
                                gateway_config=settings) as local:
        with zk_session(local.zookeeper_connect) as zk:
            for name, password in (ALICE, BOB):
                zk.set_user_config(name, {"SCRAM-SHA-512": make_scram_credential("SCRAM-SHA-512", password).encode()})
        yield local


@pytest.fixture(scope="module")
def http(cluster: LocalCluster) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=cluster.gateway_url(), timeout=30) as client:
        yield client


@pytest.fixture(scope="module")
def cluster_id(http: httpx.Client) -> str:
    answer = http.get("/v3/clusters", headers=basic(ADMIN))
    assert answer.status_code == 200, answer.text
    cluster_id = answer.json()["data"][0]["cluster_id"]
    created = http.post(f"/v3/clusters/{cluster_id}/topics", headers={**basic(ADMIN), **JSON},
                        json={"topic_name": TOPIC, "partitions_count": 1, "replication_factor": 1})
    assert created.status_code == 201, created.text
    return cluster_id


@pytest.fixture(scope="module")
def every_route(http: httpx.Client, cluster_id: str) -> list[tuple[str, str]]:
    """(method, concrete path) of each operation of the OpenAPI document, then the console's views."""
    values = {"cluster_id": cluster_id, "topic_name": TOPIC, "topic": TOPIC, "group": "g", "instance": "i",
              "partition": "0", "partition_id": "0", "broker_id": "1", "config_name": "cleanup.policy",
              "consumer_group_id": "g", "consumer_id": "c"}
    document = http.get("/openapi.json").json()
    routes = []
    for template, operations in document["paths"].items():
        if template in ("/health",):
            continue
        path = re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], template)
        routes += [(method.upper(), path) for method in operations]
    return routes + [("GET", view) for view in CONSOLE_VIEWS]


def arrow_stream() -> bytes:
    table = pa.table({"value": pa.array([b"v"], pa.binary()), "topic": pa.array([TOPIC])})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def body_of(method: str, path: str) -> dict:
    """A body the route takes, so what it answers is about who asks."""
    if method not in ("POST", "PUT", "PATCH"):
        return {}
    if path.endswith("/topics"):
        return {"headers": JSON, "json": {"topic_name": "made-by-anyone", "partitions_count": 1}}
    if re.fullmatch(r"/v3/clusters/[^/]+/records", path):
        return {"headers": {"Content-Type": "application/vnd.apache.arrow.stream"}, "content": arrow_stream()}
    if path.endswith("/records") and "/v3/" in path:
        return {"headers": JSON, "json": {"value": {"type": "JSON", "data": 1}}}
    if "/v3/" in path:
        return {"headers": JSON, "json": {}}
    return {"headers": V2_JSON, "json": {}}


def test_every_route_refuses_anonymous_requests(http: httpx.Client, every_route: list[tuple[str, str]]) -> None:
    assert len(every_route) > 50
    for method, path in every_route:
        for headers in ({}, basic(("alice", "wrong")), basic(("nobody", "x"))):
            answer = http.request(method, path, headers=headers)
            assert answer.status_code == 401, (method, path, answer.text)
            assert answer.json()["error_code"] == 40101
            assert answer.headers["WWW-Authenticate"] == 'Basic realm="KafkaRest"'
    assert http.get("/health").status_code == 200
    assert http.get("/openapi.json").status_code == 200


def test_a_user_without_acls_is_refused_everywhere(http: httpx.Client, every_route: list[tuple[str, str]]) -> None:
    names = set()
    for method, path in every_route:
        extra = body_of(method, path)
        answer = http.request(method, path, headers={**basic(ALICE), **extra.get("headers", {})},
                              json=extra.get("json"), content=extra.get("content"))
        assert answer.status_code == 403, (method, path, answer.text)
        body = answer.json()
        assert body["error_code"] == 40301, body
        names.add(body["message"].split(":")[0])
    assert names == {"TOPIC_AUTHORIZATION_FAILED", "GROUP_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED"}


def acl(resource_type: str, name: str, operation: str, principal: str = "User:bob",
        pattern_type: str = "LITERAL", permission: str = "ALLOW") -> dict[str, str]:
    return {"resource_type": resource_type, "resource_name": name, "pattern_type": pattern_type,
            "principal": principal, "host": "*", "operation": operation, "permission": permission}


def test_acls_round_trip(http: httpx.Client, cluster: LocalCluster, cluster_id: str) -> None:
    acls = f"/v3/clusters/{cluster_id}/acls"
    admin = {**basic(ADMIN), **JSON}
    answer = http.post(acls, headers=admin, json=acl("TOPIC", "audit-", "READ", "User:carol", "PREFIXED"))
    assert answer.status_code == 201, answer.text
    answer = http.post(acls + ":batch", headers=admin, json={"data": [
        acl("GROUP", "audit", "READ", "User:carol"),
        acl("TOPIC", "audit-x", "WRITE", "User:carol", permission="DENY")]})
    assert answer.status_code == 201, answer.text
    listed = http.get(acls, headers=basic(ADMIN), params={"principal": "User:carol"})
    assert listed.status_code == 200, listed.text
    assert listed.json()["kind"] == "KafkaAclList"
    found = {(a["resource_type"], a["resource_name"], a["pattern_type"], a["operation"], a["permission"])
             for a in listed.json()["data"]}
    assert found == {("TOPIC", "audit-", "PREFIXED", "READ", "ALLOW"), ("GROUP", "audit", "LITERAL", "READ", "ALLOW"),
                     ("TOPIC", "audit-x", "LITERAL", "WRITE", "DENY")}
    assert all(a["kind"] == "KafkaAcl" and a["cluster_id"] == cluster_id for a in listed.json()["data"])
    matched = http.get(acls, headers=basic(ADMIN), params={"resource_type": "TOPIC", "resource_name": "audit-x",
                                                            "pattern_type": "MATCH"})
    assert {a["permission"] for a in matched.json()["data"]} == {"ALLOW", "DENY"}
    with zk_session(cluster.zookeeper_connect) as zk:
        authorizer = AclAuthorizer(zk.zk)
        authorizer.reload()
        assert len(authorizer.acls(AclBindingFilter(principal="User:carol"))) == 3
    deleted = http.request("DELETE", acls, headers=basic(ADMIN), params={
        "resource_type": "ANY", "pattern_type": "ANY", "operation": "ANY", "permission": "ANY",
        "principal": "User:carol"})
    assert deleted.status_code == 200, deleted.text
    assert len(deleted.json()["data"]) == 3
    assert http.get(acls, headers=basic(ADMIN), params={"principal": "User:carol"}).json()["data"] == []
    bad = http.post(acls, headers=admin, json=acl("ANY", "x", "READ"))
    assert bad.status_code == 422 and bad.json()["error_code"] == 42206, bad.text
    refused = http.get(acls, headers=basic(ALICE))
    assert refused.status_code == 403 and refused.json()["message"].startswith("CLUSTER_AUTHORIZATION_FAILED")


def grant(http: httpx.Client, cluster_id: str, *acls: dict[str, str]) -> None:
    answer = http.post(f"/v3/clusters/{cluster_id}/acls:batch", headers={**basic(ADMIN), **JSON},
                       json={"data": list(acls)})
    assert answer.status_code == 201, answer.text


def test_the_right_acl_lets_each_operation_through(http: httpx.Client, cluster_id: str) -> None:
    v3 = f"/v3/clusters/{cluster_id}"
    bob = basic(BOB)

    def status(method: str, path: str, **kwargs) -> int:
        headers = {**bob, **kwargs.pop("headers", {})}
        return http.request(method, path, headers=headers, **kwargs).status_code

    produce = (f"{v3}/topics/{TOPIC}/records", {"headers": JSON, "json": {"value": {"type": "JSON", "data": 1}}})
    assert status("POST", produce[0], **produce[1]) == 403
    grant(http, cluster_id, acl("TOPIC", TOPIC, "WRITE"))
    # the authorizer rereads the ACLs on ZooKeeper's change notification
    wait_until(lambda: status("POST", produce[0], **produce[1]) == 200, timeout_s=10, message="bob to produce")
    assert status("GET", f"{v3}/topics/{TOPIC}") == 200  # WRITE implies DESCRIBE
    assert status("GET", f"{v3}/topics") == 200
    read = f"{v3}/topics/{TOPIC}/partitions/0/records"
    assert status("GET", read) == 403
    assert status("GET", f"{v3}/topics/{TOPIC}/configs") == 403
    assert status("GET", f"{v3}/brokers") == 403
    grant(http, cluster_id, acl("TOPIC", TOPIC, "READ"), acl("TOPIC", TOPIC, "DESCRIBE_CONFIGS"),
          acl("CLUSTER", "kafka-cluster", "DESCRIBE"), acl("TOPIC", "bob-", "CREATE", pattern_type="PREFIXED"),
          acl("TOPIC", "bob-", "DELETE", pattern_type="PREFIXED"), acl("GROUP", "bob-group", "READ"))
    wait_until(lambda: status("GET", read) == 200, timeout_s=10, message="bob to read")
    assert status("GET", f"{v3}/topics/{TOPIC}/configs") == 200
    assert status("PUT", f"{v3}/topics/{TOPIC}/configs/retention.ms", headers=JSON, json={"value": "100000"}) == 403
    assert status("GET", f"{v3}/brokers") == 200
    assert status("POST", f"{v3}/topics", headers=JSON, json={"topic_name": "other", "partitions_count": 1}) == 403
    assert status("POST", f"{v3}/topics", headers=JSON, json={"topic_name": "bob-made", "partitions_count": 1}) == 201
    assert status("DELETE", f"{v3}/topics/bob-made") == 204
    assert status("DELETE", f"{v3}/topics/{TOPIC}") == 403
    # a v2 consumer in bob-group reads what bob produced
    created = http.post("/consumers/bob-group", headers={**bob, **V2_JSON},
                        json={"name": "c1", "format": "json", "auto.offset.reset": "earliest"})
    assert created.status_code == 200, created.text
    instance = "/consumers/bob-group/instances/c1"
    assert status("POST", f"{instance}/subscription", headers=V2_JSON, json={"topics": ["made-by-anyone"]}) == 403
    assert status("POST", f"{instance}/subscription", headers=V2_JSON, json={"topics": [TOPIC]}) == 204

    def records() -> list:
        answer = http.get(f"{instance}/records", headers={**bob, "Accept": V2_JSON["Accept"]})
        assert answer.status_code == 200, answer.text
        return answer.json()

    wait_until(lambda: len(records()) > 0, timeout_s=15, message="bob's consumer to get the record")
    assert status("DELETE", instance, headers=V2_JSON) == 204
    assert status("POST", "/consumers/other-group", headers=V2_JSON, json={"name": "c2", "format": "json"}) == 403


def test_refusals_reach_the_audit_log(cluster: LocalCluster) -> None:
    log = cluster.log_path("gateway-1").read_text()
    assert "Principal = User:alice is Denied Operation = Write" in log


def test_the_console_login_gives_a_session_cookie(http: httpx.Client, cluster: LocalCluster) -> None:
    base = cluster.gateway_url()
    with httpx.Client(base_url=base, timeout=30) as browser:
        assert browser.get("/ui/api/health").status_code == 401
        console_call = browser.get("/ui/api/health", headers={"X-Requested-With": "XMLHttpRequest"})
        assert console_call.status_code == 401 and "WWW-Authenticate" not in console_call.headers
        assert browser.get("/ui/").status_code == 200  # the page itself is served; its fetches need a login
        refused = browser.post("/ui/login", data={"username": "admin", "password": "wrong"})
        assert refused.status_code == 303 and refused.headers["location"] == "/ui/login?failed=1"
        assert "odradek_session" not in browser.cookies
        accepted = browser.post("/ui/login", data={"username": "admin", "password": "admin-secret"})
        assert accepted.status_code == 303 and accepted.headers["location"] == "/ui/"
        assert "httponly" in accepted.headers["set-cookie"].lower()
        assert browser.get("/ui/api/health").status_code == 200
        assert browser.get("/v3/clusters").status_code == 200
    with httpx.Client(base_url=base, timeout=30) as browser:
        assert browser.post("/ui/login", data={"username": "alice", "password": "alice-secret"}).status_code == 303
        refused = browser.get("/ui/api/health")  # alice is logged in, and has no ACL
        assert refused.status_code == 403 and refused.json()["error_code"] == 40301
    forged = httpx.get(f"{base}/ui/api/health", cookies={"odradek_session": "a.b.c"})
    assert forged.status_code == 401


def test_the_console_in_a_browser_asks_for_a_login(cluster: LocalCluster, cluster_id: str) -> None:
    from tests.integration.browser_support import chromium

    base = cluster.gateway_url()
    with chromium() as browser:
        page = browser.new_page()
        page.goto(f"{base}/ui/")
        page.wait_for_url(lambda url: url.endswith("/ui/login?method=BASIC"), timeout=10000)
        page.fill("input[name=username]", "admin")
        page.fill("input[name=password]", "wrong")
        page.click("button[type=submit]")
        page.wait_for_url(lambda url: url.endswith("/ui/login?failed=1&method=BASIC"), timeout=10000)
        assert page.is_visible("#login-failed")
        page.fill("input[name=username]", "admin")
        page.fill("input[name=password]", "admin-secret")
        page.click("button[type=submit]")
        page.wait_for_url(f"{base}/ui/", timeout=10000)
        page.wait_for_function(f"document.getElementById('cluster-id').textContent.includes('{cluster_id}')",
                               timeout=15000)
        page.close()
