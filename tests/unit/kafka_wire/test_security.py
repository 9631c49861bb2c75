"""SASL mechanisms (SCRAM against a client of the same RFC, PLAIN against a JAAS config), Kafka's
SCRAM credential format (also from a client-salted password, as AlterUserScramCredentials sends
it), and the ACL authorizer's rules and filters."""

from __future__ import annotations

import hashlib

import pytest
from scramp import ScramClient
from scramp.core import Nonce

from services.common.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    PatternType,
    PermissionType,
    Resource,
    ResourcePattern,
    ResourceType,
    by_name,
)
from services.common.security.authorizer import AclAuthorizer
from services.common.security.sasl import (
    SaslAuthenticationFailed,
    SaslServer,
    ScramCredential,
    jaas_login,
    make_scram_credential,
    plain_users,
    scram_credential_from_salted_password,
)
from services.common.zk.acls import decode_entries, encode_change, encode_entries, pattern_path

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')


def scram_exchange(mechanism: str, stored: dict[str, ScramCredential], user: str, password: str) -> SaslServer:
    server = SaslServer(mechanism, lambda name, m: stored.get(name) if m == mechanism else None, {})
    client = ScramClient([mechanism], user, password)
    client.set_server_first(server.step(client.get_client_first().encode()).decode())
    client.set_server_final(server.step(client.get_client_final().encode()).decode())
    return server


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_authenticates_the_right_password_only(mechanism: str) -> None:
    stored = {"alice": make_scram_credential(mechanism, "alice-secret")}
    server = scram_exchange(mechanism, stored, "alice", "alice-secret")
    assert server.complete and server.user == "alice"
    with pytest.raises(SaslAuthenticationFailed):
        scram_exchange(mechanism, stored, "alice", "wrong")
    with pytest.raises(SaslAuthenticationFailed):
        scram_exchange(mechanism, stored, "bob", "alice-secret")


@pytest.mark.parametrize("prefix", ["its own nonce", "", "x"])
def test_a_final_nonce_that_ends_with_the_servers_is_taken_as_kafka_takes_it(prefix: str) -> None:
    """Debian's kcat (librdkafka 2.0.2) sends its own nonce again in front of the server's."""
    stored = {"alice": make_scram_credential("SCRAM-SHA-512", "alice-secret")}
    server = SaslServer("SCRAM-SHA-512", lambda name, m: stored.get(name), {})
    client = ScramClient(["SCRAM-SHA-512"], "alice", "alice-secret")
    client_first = client.get_client_first()
    client.set_server_first(server.step(client_first.encode()).decode())
    own = client_first.split("r=", 1)[1]
    client.nonce = Nonce((own if prefix == "its own nonce" else prefix) + str(client.nonce))
    client.set_server_final(server.step(client.get_client_final().encode()).decode())
    assert server.complete and server.user == "alice"


def test_a_final_nonce_that_does_not_end_with_the_servers_is_refused() -> None:
    stored = {"alice": make_scram_credential("SCRAM-SHA-512", "alice-secret")}
    server = SaslServer("SCRAM-SHA-512", lambda name, m: stored.get(name), {})
    client = ScramClient(["SCRAM-SHA-512"], "alice", "alice-secret")
    client.set_server_first(server.step(client.get_client_first().encode()).decode())
    client.nonce = Nonce(str(client.nonce) + "tail")
    with pytest.raises(SaslAuthenticationFailed):
        server.step(client.get_client_final().encode())


def test_scram_credential_in_kafkas_form() -> None:
    credential = make_scram_credential("SCRAM-SHA-512", "pw", iterations=8192)
    text = credential.encode()
    assert [item.split("=", 1)[0] for item in text.split(",")] == ["salt", "stored_key", "server_key", "iterations"]
    assert text.endswith(",iterations=8192")
    assert ScramCredential.decode(text) == credential
    with pytest.raises(ValueError):
        make_scram_credential("SCRAM-SHA-512", "pw", iterations=100)


@pytest.mark.parametrize(("mechanism", "digest"), [("SCRAM-SHA-256", "sha256"), ("SCRAM-SHA-512", "sha512")])
def test_a_client_salted_password_gives_the_same_credential(mechanism: str, digest: str) -> None:
    credential = make_scram_credential(mechanism, "pw", iterations=4096)
    salted = hashlib.pbkdf2_hmac(digest, b"pw", credential.salt, 4096)
    assert scram_credential_from_salted_password(mechanism, credential.salt, salted, 4096) == credential


def test_plain_against_jaas_users() -> None:
    assert plain_users(JAAS) == {"admin": "admin-secret", "alice": "alice-secret"}
    assert jaas_login(JAAS) == ("admin", "admin-secret")
    server = SaslServer("PLAIN", lambda *_: None, plain_users(JAAS))
    assert server.step(b"\0alice\0alice-secret") == b"" and server.user == "alice"
    for wrong in (b"\0alice\0nope", b"\0carol\0x", b"garbage", b"bob\0alice\0alice-secret"):
        with pytest.raises(SaslAuthenticationFailed):
            SaslServer("PLAIN", lambda *_: None, plain_users(JAAS)).step(wrong)


def allow(principal: str, operation: AclOperation, host: str = "*") -> AccessControlEntry:
    return AccessControlEntry(principal, host, operation, PermissionType.ALLOW)


def deny(principal: str, operation: AclOperation, host: str = "*") -> AccessControlEntry:
    return AccessControlEntry(principal, host, operation, PermissionType.DENY)


def topic(name: str, pattern_type: PatternType = PatternType.LITERAL) -> ResourcePattern:
    return ResourcePattern(ResourceType.TOPIC, name, pattern_type)


def test_authorizer_rules() -> None:
    authorizer = AclAuthorizer(None, super_users={"User:admin"})
    authorizer.set_acls({
        topic("orders"): [allow("User:alice", AclOperation.READ), deny("User:alice", AclOperation.WRITE)],
        topic("logs-", PatternType.PREFIXED): [allow("User:bob", AclOperation.WRITE)],
        topic("*"): [allow("User:*", AclOperation.DESCRIBE, host="10.0.0.1")],
        ResourcePattern(ResourceType.GROUP, "g"): [allow("User:alice", AclOperation.ALL),
                                                   deny("User:alice", AclOperation.DELETE, host="10.0.0.9")],
        topic("cfg"): [allow("User:alice", AclOperation.ALTER_CONFIGS)],
    })
    def ok(principal: str, host: str, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        return authorizer.authorize(principal, host, operation, Resource(resource_type, name))
    T, G = ResourceType.TOPIC, ResourceType.GROUP
    assert ok("User:alice", "h", AclOperation.READ, T, "orders")
    assert ok("User:alice", "h", AclOperation.DESCRIBE, T, "orders")  # implied by READ
    assert not ok("User:alice", "h", AclOperation.WRITE, T, "orders")  # deny wins
    assert not ok("User:bob", "h", AclOperation.READ, T, "orders")
    assert ok("User:bob", "h", AclOperation.WRITE, T, "logs-app")  # prefixed
    assert ok("User:bob", "h", AclOperation.DESCRIBE, T, "logs-app")
    assert not ok("User:bob", "h", AclOperation.WRITE, T, "log")
    assert ok("User:carol", "10.0.0.1", AclOperation.DESCRIBE, T, "anything")  # wildcard resource and principal
    assert not ok("User:carol", "10.0.0.2", AclOperation.DESCRIBE, T, "anything")  # host
    assert ok("User:alice", "h", AclOperation.DELETE, G, "g")  # ALL
    assert not ok("User:alice", "10.0.0.9", AclOperation.DELETE, G, "g")
    assert ok("User:alice", "h", AclOperation.DESCRIBE_CONFIGS, T, "cfg")  # implied by ALTER_CONFIGS
    assert not ok("User:alice", "h", AclOperation.DESCRIBE, T, "cfg")
    assert ok("User:admin", "h", AclOperation.ALTER, ResourceType.CLUSTER, "kafka-cluster")  # super user
    assert not ok("User:alice", "h", AclOperation.READ, G, "no-acls")  # no ACL: closed by default
    assert AclAuthorizer(None, allow_everyone_if_no_acl_found=True).authorize(
        "User:x", "h", AclOperation.READ, Resource(G, "no-acls"))
    assert authorizer.authorize_any("User:bob", "h", AclOperation.WRITE, T)
    assert not authorizer.authorize_any("User:carol", "h", AclOperation.WRITE, T)


def test_binding_filters() -> None:
    bindings = [AclBinding(topic("orders"), allow("User:alice", AclOperation.READ)),
                AclBinding(topic("ord", PatternType.PREFIXED), allow("User:bob", AclOperation.READ)),
                AclBinding(topic("*"), allow("User:carol", AclOperation.READ)),
                AclBinding(ResourcePattern(ResourceType.GROUP, "orders"), allow("User:alice", AclOperation.READ))]

    def names(binding_filter: AclBindingFilter) -> list[str]:
        return [b.entry.principal for b in bindings if binding_filter.matches(b)]

    assert names(AclBindingFilter()) == ["User:alice", "User:bob", "User:carol", "User:alice"]
    assert names(AclBindingFilter(ResourceType.TOPIC, "orders", PatternType.MATCH)) == [
        "User:alice", "User:bob", "User:carol"]
    assert names(AclBindingFilter(ResourceType.TOPIC, "orders", PatternType.ANY)) == ["User:alice"]
    assert names(AclBindingFilter(ResourceType.ANY, "ord", PatternType.PREFIXED)) == ["User:bob"]
    assert names(AclBindingFilter(principal="User:alice", resource_type=ResourceType.GROUP)) == ["User:alice"]


def test_zookeeper_forms() -> None:
    entries = {allow("User:alice", AclOperation.DESCRIBE_CONFIGS), deny("User:*", AclOperation.CLUSTER_ACTION)}
    data = encode_entries(entries)
    assert b'"operation":"DescribeConfigs"' in data and b'"permissionType":"Deny"' in data
    assert data.startswith(b'{"version":1,"acls":[')
    assert decode_entries(data, "x") == entries
    assert pattern_path(topic("t")) == "/kafka-acl/Topic/t"
    assert pattern_path(ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx", PatternType.PREFIXED)) == (
        "/kafka-acl-extended/prefixed/TransactionalId/tx")
    assert encode_change(topic("t")) == b"Topic:t"
    assert b'"patternType":"Prefixed"' in encode_change(topic("p", PatternType.PREFIXED))
    assert by_name(ResourceType, "transactional-id") == ResourceType.TRANSACTIONAL_ID
    assert by_name(AclOperation, "IdempotentWrite") == AclOperation.IDEMPOTENT_WRITE
