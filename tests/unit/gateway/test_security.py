"""The gateway's authentication and route checks without a cluster: BASIC against a password file,
a SCRAM password verified against its stored key, JWT bearer tokens signed with an HMAC secret and
an Ed25519 key (accepted, and refused when expired, tampered or signed by another key), 401 with
REST Proxy's body and challenge, and the Kafka operation each route needs."""

from __future__ import annotations

import base64
import time

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from services.common.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from services.common.security.sasl import make_scram_credential, verify_scram_password
from services.gateway.config import GatewayConfig
from services.gateway.security import ANY_RESOURCE, AuthenticationMiddleware, GatewaySecurity, route_checks


def whoami(request: Request) -> JSONResponse:
    return JSONResponse({"principal": request.state.principal})


def client_of(security: GatewaySecurity) -> TestClient:
    app = Starlette(routes=[Route("/v3/clusters", whoami), Route("/health", whoami)])
    app.add_middleware(AuthenticationMiddleware, security_of=lambda: security)
    return TestClient(app, base_url="http://gateway")


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_scram_password_verified_against_the_stored_key() -> None:
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        credential = make_scram_credential(mechanism, "alice-secret", 4096)
        assert verify_scram_password(mechanism, credential, "alice-secret")
        assert not verify_scram_password(mechanism, credential, "alice-secreT")


def test_basic_against_a_password_file(tmp_path) -> None:
    users = tmp_path / "users.properties"
    users.write_text("# users\nadmin: admin-secret,admin\nops:ops-secret\n")
    config = GatewayConfig.load({"bootstrap.servers": "x:1", "authentication.method": "BASIC",
                                 "authentication.password.file": str(users)})
    security = GatewaySecurity.start(config)
    with client_of(security) as client:
        assert (client.get("/v3/clusters", headers=basic("admin", "admin-secret"))).json() == {
            "principal": "User:admin"}
        assert (client.get("/v3/clusters", headers=basic("ops", "ops-secret"))).json()["principal"] == "User:ops"
        for headers in ({}, basic("admin", "wrong"), basic("nobody", "x"), {"Authorization": "Basic !!"},
                        bearer("a.b.c")):
            answer = client.get("/v3/clusters", headers=headers)
            assert answer.status_code == 401, headers
            assert answer.json()["error_code"] == 40101
            assert answer.headers["WWW-Authenticate"] == 'Basic realm="KafkaRest"'
        assert (client.get("/health")).json() == {"principal": "User:ANONYMOUS"}


def test_bearer_with_an_hmac_secret() -> None:
    config = GatewayConfig.load({"bootstrap.servers": "x:1", "authentication.method": "BEARER",
                                 "bearer.jwt.secret": "s" * 32, "bearer.jwt.issuer": "odradek-tests"})
    security = GatewaySecurity.start(config)
    now = int(time.time())
    good = jwt.encode({"sub": "alice", "exp": now + 60, "iss": "odradek-tests"}, "s" * 32, algorithm="HS256")
    expired = jwt.encode({"sub": "alice", "exp": now - 60, "iss": "odradek-tests"}, "s" * 32, algorithm="HS256")
    other_key = jwt.encode({"sub": "alice", "exp": now + 60, "iss": "odradek-tests"}, "t" * 32, algorithm="HS256")
    other_issuer = jwt.encode({"sub": "alice", "exp": now + 60, "iss": "elsewhere"}, "s" * 32, algorithm="HS256")
    no_expiry = jwt.encode({"sub": "alice", "iss": "odradek-tests"}, "s" * 32, algorithm="HS256")
    with client_of(security) as client:
        assert (client.get("/v3/clusters", headers=bearer(good))).json() == {"principal": "User:alice"}
        for token in (expired, other_key, other_issuer, no_expiry, good[:-2] + "xx"):
            answer = client.get("/v3/clusters", headers=bearer(token))
            assert answer.status_code == 401 and answer.json()["error_code"] == 40101, answer.text
            assert answer.headers["WWW-Authenticate"] == 'Bearer realm="KafkaRest"'
        assert (client.get("/v3/clusters", headers=basic("alice", "x"))).status_code == 401


def test_bearer_with_a_public_key(tmp_path) -> None:
    key = Ed25519PrivateKey.generate()
    public = tmp_path / "jwt.pem"
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                     serialization.PublicFormat.SubjectPublicKeyInfo))
    config = GatewayConfig.load({"bootstrap.servers": "x:1", "authentication.method": "BEARER",
                                 "bearer.jwt.public.key.file": str(public)})
    security = GatewaySecurity.start(config)
    claims = {"sub": "bob", "exp": int(time.time()) + 60}
    good = jwt.encode(claims, key, algorithm="EdDSA")
    forged = jwt.encode(claims, Ed25519PrivateKey.generate(), algorithm="EdDSA")
    with client_of(security) as client:
        assert (client.get("/v3/clusters", headers=bearer(good))).json() == {"principal": "User:bob"}
        assert (client.get("/v3/clusters", headers=bearer(forged))).status_code == 401


def test_bearer_needs_a_key() -> None:
    config = GatewayConfig.load({"bootstrap.servers": "x:1", "authentication.method": "BEARER"})
    with pytest.raises(ValueError, match="bearer.jwt"):
        GatewaySecurity.start(config)


@pytest.mark.parametrize(("method", "template", "expected"), [
    ("POST", "/v3/clusters/{cluster_id}/topics/{topic_name}/records",
     ((AclOperation.WRITE, ResourceType.TOPIC, "{topic_name}"),)),
    ("GET", "/v3/clusters/{cluster_id}/topics/{topic_name}/partitions/{partition_id}/records",
     ((AclOperation.READ, ResourceType.TOPIC, "{topic_name}"),)),
    ("GET", "/v3/clusters/{cluster_id}/topics", ((AclOperation.DESCRIBE, ResourceType.TOPIC, ANY_RESOURCE),)),
    ("DELETE", "/v3/clusters/{cluster_id}/topics/{topic_name}",
     ((AclOperation.DELETE, ResourceType.TOPIC, "{topic_name}"),)),
    ("GET", "/v3/clusters/{cluster_id}/topics/{topic_name}/partitions",
     ((AclOperation.DESCRIBE, ResourceType.TOPIC, "{topic_name}"),)),
    ("GET", "/consumers/{group}/instances/{instance}/records", ((AclOperation.READ, ResourceType.GROUP, "{group}"),)),
    ("GET", "/v3/clusters/{cluster_id}/consumer-groups/{consumer_group_id}/lags/{topic_name}/partitions/{partition_id}",
     ((AclOperation.DESCRIBE, ResourceType.GROUP, "{consumer_group_id}"),
      (AclOperation.DESCRIBE, ResourceType.TOPIC, "{topic_name}"))),
    ("GET", "/v3/clusters/{cluster_id}/brokers", ((AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME),)),
    ("POST", "/v3/clusters/{cluster_id}/acls", ((AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME),)),
])
def test_route_checks(method: str, template: str, expected) -> None:
    assert route_checks(method, template) == expected


class FakeUsers:
    """`get_user_config` of the ZooKeeper client, from a dict."""

    def __init__(self) -> None:
        self.configs: dict[str, dict[str, str]] = {}

    def get_user_config(self, user: str) -> dict[str, str]:
        return self.configs.get(user, {})


def test_basic_against_scram_users_sees_a_changed_password() -> None:
    config = GatewayConfig.load({"bootstrap.servers": "x:1", "authentication.method": "BASIC"})
    security = GatewaySecurity(config)
    users = security.zk = FakeUsers()
    users.configs["alice"] = {"SCRAM-SHA-512": make_scram_credential("SCRAM-SHA-512", "one").encode()}
    with client_of(security) as client:
        for _ in range(2):  # the second time from the remembered verification
            assert client.get("/v3/clusters", headers=basic("alice", "one")).json() == {"principal": "User:alice"}
        assert client.get("/v3/clusters", headers=basic("alice", "two")).status_code == 401
        users.configs["alice"] = {"SCRAM-SHA-256": make_scram_credential("SCRAM-SHA-256", "two").encode()}
        assert client.get("/v3/clusters", headers=basic("alice", "one")).status_code == 401
        assert client.get("/v3/clusters", headers=basic("alice", "two")).json() == {"principal": "User:alice"}
        assert client.get("/v3/clusters", headers=basic("bob", "two")).status_code == 401
