"""gRPC clients' SASL-style credentials: the Basic metadata, the password verifier and its memory,
the server interceptor on a runtime, the clients' settings and the transport attaching them."""

from __future__ import annotations

import logging

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.clients.client_config import CommonClientConfig
from services.clients.transport.channels import ChannelPool, error_from_rpc
from services.common.clock import ManualClock
from services.common.config import ConfigError
from services.common.errors import Errors
from services.common.security import grpc_credentials
from services.common.security.grpc_credentials import (
    CREDENTIAL_RECHECK_MS,
    MalformedCredentials,
    PasswordVerifier,
    basic_authorization,
    basic_credentials,
)
from services.common.security.sasl import client_jaas_login, make_scram_credential
from services.common.service import ServiceRuntime
from tests.tls_support import tls_runtime

SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="s3cret";'
PLAIN_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="bob" password="pw";'


def test_basic_metadata_round_trips_and_ignores_other_schemes():
    assert basic_credentials([("authorization", basic_authorization("alice", "a:b"))]) == ("alice", "a:b")
    assert basic_credentials([("x-other", "1")]) is None
    with pytest.raises(MalformedCredentials, match="Bearer authorization scheme is not supported"):
        basic_credentials([("authorization", "Bearer abc")])
    with pytest.raises(MalformedCredentials):
        basic_credentials([("authorization", "Basic !!!")])
    with pytest.raises(MalformedCredentials):
        basic_credentials([("authorization", basic_authorization("", "pw"))])


def test_client_jaas_config_of_either_login_module():
    assert client_jaas_login(SCRAM_JAAS) == ("alice", "s3cret")
    assert client_jaas_login(PLAIN_JAAS) == ("bob", "pw")
    assert client_jaas_login('org.apache.kafka.common.security.plain.PlainLoginModule required\n'
                             '  username=carol password="a \\"quoted\\" one";') == ("carol", 'a "quoted" one')
    with pytest.raises(ValueError, match="not supported"):
        client_jaas_login("com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;")
    with pytest.raises(ValueError, match="needs password"):
        client_jaas_login('org.apache.kafka.common.security.scram.ScramLoginModule required username="u";')


class Users:
    """A /config/users stand-in counting its reads."""

    def __init__(self) -> None:
        self.configs: dict[str, dict[str, str]] = {}
        self.reads = 0

    def set(self, user: str, mechanism: str, password: str) -> None:
        self.configs[user] = {mechanism: make_scram_credential(mechanism, password).encode()}

    def __call__(self, user: str) -> dict[str, str]:
        self.reads += 1
        return self.configs.get(user, {})


@pytest.fixture
def derivations(monkeypatch):
    counted = []
    real = grpc_credentials.verify_scram_password

    def counting(*args):
        counted.append(args[0])
        return real(*args)

    monkeypatch.setattr(grpc_credentials, "verify_scram_password", counting)
    return counted


def test_verifier_takes_any_scram_mechanism_and_plain_users(derivations):
    users = Users()
    users.set("alice", "SCRAM-SHA-512", "s3cret")
    users.set("dave", "SCRAM-SHA-256", "d")
    verifier = PasswordVerifier(users, {"bob": "pw"}, clock=ManualClock())
    assert verifier.verify("alice", "s3cret")
    assert verifier.verify("dave", "d")
    assert verifier.verify("bob", "pw")
    assert not verifier.verify("alice", "wrong")
    assert not verifier.verify("bob", "wrong")
    assert not verifier.verify("nobody", "x")
    assert derivations == ["SCRAM-SHA-512", "SCRAM-SHA-256", "SCRAM-SHA-512"]


def test_verified_pair_is_remembered_briefly_and_forgotten_when_the_credential_changes(derivations):
    users, clock = Users(), ManualClock()
    users.set("alice", "SCRAM-SHA-512", "s3cret")
    verifier = PasswordVerifier(users, clock=clock)
    assert not verifier.recently_verified("alice", "s3cret")
    assert verifier.verify("alice", "s3cret")
    assert verifier.recently_verified("alice", "s3cret")
    assert not verifier.recently_verified("alice", "other")
    clock.advance(CREDENTIAL_RECHECK_MS)
    assert not verifier.recently_verified("alice", "s3cret")
    assert verifier.verify("alice", "s3cret")  # the credential is read again, unchanged: no PBKDF2
    assert len(derivations) == 1 and users.reads == 2
    users.set("alice", "SCRAM-SHA-512", "new")
    clock.advance(CREDENTIAL_RECHECK_MS)
    assert not verifier.verify("alice", "s3cret")
    assert verifier.verify("alice", "new")
    del users.configs["alice"]
    clock.advance(CREDENTIAL_RECHECK_MS)
    assert not verifier.verify("alice", "new")


@pytest.fixture
def runtime():
    runtime = ServiceRuntime("credentials-test", "127.0.0.1:0", max_workers=2)
    runtime.start()
    runtime.set_serving(True)
    yield runtime
    runtime.shutdown(grace_s=0.1)


def _check(runtime: ServiceRuntime, metadata=()):
    with grpc.insecure_channel(f"127.0.0.1:{runtime.bound_port}") as channel:
        return health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5,
                                                          metadata=metadata)


def test_interceptor_passes_good_credentials_and_calls_without_them(runtime):
    users = Users()
    users.set("alice", "SCRAM-SHA-512", "s3cret")
    runtime.password_verifier = PasswordVerifier(users)
    serving = health_pb2.HealthCheckResponse.SERVING
    assert _check(runtime).status == serving
    assert _check(runtime, [("authorization", basic_authorization("alice", "s3cret"))]).status == serving
    assert _check(runtime, [("authorization", basic_authorization("alice", "s3cret"))]).status == serving


@pytest.mark.parametrize("authorization", [basic_authorization("alice", "wrong"),
                                           basic_authorization("mallory", "x"), "Basic ???", "Bearer x"])
def test_interceptor_refuses_bad_credentials_with_sasl_authentication_failed(runtime, caplog, authorization):
    users = Users()
    users.set("alice", "SCRAM-SHA-512", "s3cret")
    runtime.password_verifier = PasswordVerifier(users)
    with caplog.at_level(logging.INFO, logger="odradek.audit"), pytest.raises(grpc.RpcError) as failure:
        _check(runtime, [("authorization", authorization)])
    assert failure.value.code() is grpc.StatusCode.UNAUTHENTICATED
    assert error_from_rpc(failure.value).error is Errors.SASL_AUTHENTICATION_FAILED
    assert any("Failed authentication with 127.0.0.1" in record.getMessage() for record in caplog.records)


def test_interceptor_answers_unavailable_until_the_node_has_its_credential_store(runtime):
    with pytest.raises(grpc.RpcError) as failure:
        _check(runtime, [("authorization", basic_authorization("alice", "s3cret"))])
    assert failure.value.code() is grpc.StatusCode.UNAVAILABLE


def test_interceptor_answers_unavailable_when_the_credential_store_fails(runtime):
    def unreachable(user: str) -> dict[str, str]:
        raise ConnectionError("ZooKeeper is unreachable")

    runtime.password_verifier = PasswordVerifier(unreachable)
    with pytest.raises(grpc.RpcError) as failure:
        _check(runtime, [("authorization", basic_authorization("alice", "s3cret"))])
    assert failure.value.code() is grpc.StatusCode.UNAVAILABLE


def _config(**settings) -> CommonClientConfig:
    return CommonClientConfig.load({"bootstrap.servers": "127.0.0.1:9092", **settings}, env={})


def test_client_settings_give_sasl_credentials():
    assert _config().sasl_credentials() is None
    assert _config(**{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
                      "sasl.username": "alice", "sasl.password": "s3cret"}).sasl_credentials() == ("alice", "s3cret")
    assert _config(**{"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                      "sasl.jaas.config": PLAIN_JAAS}).sasl_credentials() == ("bob", "pw")
    # credentials without a SASL protocol are not sent
    assert _config(**{"sasl.username": "alice", "sasl.password": "s3cret"}).sasl_credentials() is None


@pytest.mark.parametrize(("settings", "complaint"), [
    ({"sasl.username": "alice", "sasl.password": "x"}, "GSSAPI is not supported"),
    ({"sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config": SCRAM_JAAS}, "OAUTHBEARER is not supported"),
    ({"sasl.mechanism": "SCRAM-SHA-1", "sasl.jaas.config": SCRAM_JAAS}, "use one of"),
    ({"sasl.mechanism": "PLAIN", "sasl.username": "alice"}, "needs both"),
    ({"sasl.mechanism": "PLAIN"}, "needs sasl.username"),
    ({"sasl.mechanism": "PLAIN", "sasl.jaas.config": "x required;"}, "not supported"),
])
def test_client_settings_refuse_what_cannot_authenticate(settings, complaint):
    config = _config(**{"security.protocol": "SASL_PLAINTEXT", **settings})
    with pytest.raises(ConfigError, match=complaint):
        config.sasl_credentials()


def assert_health_check(config: CommonClientConfig, target: str, works: bool) -> None:
    """A health check through a pool of `config`: served, or refused SASL_AUTHENTICATION_FAILED."""
    with ChannelPool.from_config(config) as pool:
        stub = health_pb2_grpc.HealthStub(pool.channel(target))
        if works:
            assert stub.Check(health_pb2.HealthCheckRequest(), timeout=5).status == \
                health_pb2.HealthCheckResponse.SERVING
        else:
            with pytest.raises(grpc.RpcError) as failure:
                stub.Check(health_pb2.HealthCheckRequest(), timeout=5)
            assert error_from_rpc(failure.value).error is Errors.SASL_AUTHENTICATION_FAILED


def test_sasl_plaintext_pool_sends_the_credentials_with_every_call(runtime):
    users = Users()
    users.set("alice", "SCRAM-SHA-256", "s3cret")
    runtime.password_verifier = PasswordVerifier(users)
    target = f"127.0.0.1:{runtime.bound_port}"
    for password, works in (("s3cret", True), ("wrong", False)):
        config = _config(**{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
                            "sasl.username": "alice", "sasl.password": password})
        assert_health_check(config, target, works)


def test_sasl_ssl_pool_sends_the_credentials_as_call_credentials_over_tls(tmp_path):
    users = Users()
    users.set("alice", "SCRAM-SHA-512", "s3cret")
    with tls_runtime(tmp_path, "credentials-tls-test", PasswordVerifier(users)) as served:
        for password, works in (("s3cret", True), ("wrong", False)):
            config = _config(**{"security.protocol": "SASL_SSL", "ssl.ca.location": served.ca_path,
                                "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config":
                                    SCRAM_JAAS.replace("s3cret", password)})
            assert_health_check(config, served.target, works)


def test_gateway_clients_take_rest_proxy_client_sasl_settings():
    from services.gateway.config import GatewayConfig

    config = GatewayConfig.load({"bootstrap.servers": "127.0.0.1:9092", "client.security.protocol": "SASL_PLAINTEXT",
                                 "client.sasl.mechanism": "SCRAM-SHA-512", "client.sasl.jaas.config": SCRAM_JAAS},
                                env={})
    assert CommonClientConfig.load({"bootstrap.servers": "127.0.0.1:9092"}, env={},
                                   **config.client_settings()).sasl_credentials() == ("alice", "s3cret")
