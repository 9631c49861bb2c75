"""`odradek-service`, the image's entrypoint: misspelt variables and service names exit 2 with a
suggestion; container defaults (broker id from the pod ordinal, ids from the host name, advertised
listener from a domain) apply only where nothing else sets the key; the health probe, over mutual
TLS for a secured service and HTTPS for a secured gateway."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent import futures

import grpc
import pytest
from grpc_health.v1 import health_pb2_grpc
from grpc_health.v1.health import HealthServicer

from services.broker.config import BrokerConfig
from services.common import entrypoint
from services.common.entrypoint import (
    SERVICES,
    UsageError,
    advertised_listener,
    check_environment,
    derived_settings,
    host_hash_id,
    host_ordinal,
    probe,
)
from services.common.security.tls import TlsSettings
from services.common.service import ServiceRuntime
from services.devcluster.proc import free_port
from services.devcluster.secure import write_certificates
from tests.deploy_support import REPO_ROOT, console_scripts

BROKER = SERVICES["broker"]


def test_a_misspelt_variable_exits_2_naming_it_and_the_closest_key(capsys):
    env = {"ODRADEK_ZOOKEEPER_CONNECT": "zk:2181", "ODRADEK_LOG_SEGMNT_BYTES": "1048576"}
    assert entrypoint.main(["broker"], env=env) == 2
    error = capsys.readouterr().err
    assert "ODRADEK_LOG_SEGMNT_BYTES names no broker configuration key" in error
    assert "did you mean ODRADEK_LOG_SEGMENT_BYTES?" in error


def test_a_key_of_another_service_is_refused():
    with pytest.raises(UsageError, match="ODRADEK_BOOTSTRAP_SERVERS names no broker"):
        check_environment(BROKER, BrokerConfig, {"ODRADEK_BOOTSTRAP_SERVERS": "b:9092"})


def test_declared_keys_and_the_entrypoint_variables_pass():
    check_environment(BROKER, BrokerConfig, {"ODRADEK_LOG_SEGMENT_BYTES": "1", "ODRADEK_LOG_LEVEL": "DEBUG",
                                             "ODRADEK_ADVERTISED_DOMAIN": "x", "HOSTNAME": "h", "PATH": "/bin"})


def test_an_unknown_service_exits_2_with_a_suggestion(capsys):
    assert entrypoint.main(["brokr"], env={}) == 2
    assert "unknown service 'brokr' (did you mean broker?)" in capsys.readouterr().err


def test_the_console_script_runs_the_entrypoint_and_exits_2_on_a_typo():
    assert console_scripts()["odradek-service"] == "services.common.entrypoint:main"
    result = subprocess.run([sys.executable, "-m", "services.common.entrypoint", "coordinator"],
                            env={"ODRADEK_COORDINATOR_IDD": "1", "PYTHONPATH": str(REPO_ROOT)},
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert "did you mean ODRADEK_COORDINATOR_ID?" in result.stderr


def test_broker_id_is_the_pod_ordinal():
    assert host_ordinal("odradek-broker-2") == 2
    assert host_ordinal("broker") is None
    assert derived_settings(BROKER, {"HOSTNAME": "odradek-broker-2"}, {}) == {"broker.id": "2"}
    assert derived_settings(BROKER, {"POD_NAME": "odradek-broker-7", "HOSTNAME": "other-1"}, {}) == \
        {"broker.id": "7"}


def test_an_id_set_in_the_environment_or_an_override_wins():
    assert derived_settings(BROKER, {"HOSTNAME": "b-2", "ODRADEK_BROKER_ID": "5"}, {}) == {}
    assert derived_settings(BROKER, {"HOSTNAME": "b-2"}, {"broker.id": "5"}) == {}


def test_controller_and_coordinator_ids_come_from_the_host_name():
    host = "odradek-controller-5d8c7b9f6-x2k4q"
    derived = derived_settings(SERVICES["controller"], {"HOSTNAME": host}, {})
    assert derived == {"controller.id": str(host_hash_id(host))}
    assert 0 <= host_hash_id(host) < 2**31
    assert host_hash_id(host) != host_hash_id("odradek-controller-5d8c7b9f6-q9z7m")
    assert derived_settings(SERVICES["gateway"], {"HOSTNAME": host}, {}) == {}


def test_the_advertised_listener_comes_from_the_host_name_and_domain():
    env = {"HOSTNAME": "odradek-broker-1", "ODRADEK_LISTENERS": "PLAINTEXT://:9092",
           "ODRADEK_ADVERTISED_DOMAIN": "odradek-broker.odradek.svc"}
    assert derived_settings(BROKER, env, {})["advertised.listeners"] == \
        "PLAINTEXT://odradek-broker-1.odradek-broker.odradek.svc:9092"
    assert "advertised.listeners" not in derived_settings(
        BROKER, {**env, "ODRADEK_ADVERTISED_LISTENERS": "PLAINTEXT://b:1"}, {})
    assert advertised_listener("http://0.0.0.0:8080", "gw.example") == "http://gw.example:8080"
    with pytest.raises(UsageError, match="names no port"):
        advertised_listener("PLAINTEXT://", "h")


def test_health_reads_the_probe_file_and_fails_when_nothing_answers(tmp_path):
    probe_file = tmp_path / "probe.json"
    assert not probe(None, None, probe_file)  # no service started yet
    port = free_port()
    probe_file.write_text(json.dumps({"kind": "broker", "grpc": f"127.0.0.1:{port}"}))
    assert not probe(None, None, probe_file)
    assert not probe(None, f"http://127.0.0.1:{port}/health", probe_file)


def test_usage_without_arguments_exits_2(capsys):
    assert entrypoint.main([], env={}) == 2
    assert "odradek-service <controller|broker|coordinator|gateway>" in capsys.readouterr().err


@pytest.mark.parametrize(("bind_address", "metrics_host"), [("0.0.0.0:9092", "0.0.0.0"), ("127.0.0.1:0", "127.0.0.1")])
def test_metrics_listen_on_the_grpc_listeners_interface(bind_address, metrics_host):
    runtime = ServiceRuntime("probe", bind_address)
    try:
        assert runtime.metrics_host == metrics_host
    finally:
        runtime.shutdown(grace_s=0.1)


def test_health_probes_a_mutual_tls_listener_with_the_services_own_certificate(tmp_path):
    """A secured container's probe file names its key store and trust store; the probe presents
    that certificate, as the listener requires, and fails without it."""
    write_certificates(tmp_path, {"broker-1": ["broker-1"]})
    keystore, truststore = str(tmp_path / "broker-1.keystore.pem"), str(tmp_path / "ca.pem")
    tls = TlsSettings.load(keystore, truststore, client_auth="required")
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    health_pb2_grpc.add_HealthServicer_to_server(HealthServicer(), server)
    port = server.add_secure_port("127.0.0.1:0", tls.grpc_server_credentials())
    server.start()
    try:
        probe_file = tmp_path / "probe.json"
        target = {"kind": "broker", "grpc": f"127.0.0.1:{port}"}
        probe_file.write_text(json.dumps(target))
        assert not probe(None, None, probe_file)  # plaintext
        probe_file.write_text(json.dumps({**target, "keystore": keystore, "truststore": truststore}))
        assert probe(None, None, probe_file)
    finally:
        server.stop(None)


def test_the_probe_target_of_a_secured_service_names_its_tls_files():
    config = BrokerConfig.load({"listeners": "SSL://:9092", "broker.id": "1", "zookeeper.connect": "zk:2181",
                                "ssl.keystore.location": "/tls/broker-1.keystore.pem",
                                "ssl.truststore.location": "/tls/ca.pem", "ssl.client.auth": "required"}, env={})
    assert entrypoint.probe_target(BROKER, config) == {
        "kind": "broker", "grpc": "127.0.0.1:9092", "keystore": "/tls/broker-1.keystore.pem",
        "truststore": "/tls/ca.pem"}
    gateway = SERVICES["gateway"]
    config = gateway.load_config_class().load({"listeners": "https://0.0.0.0:8443", "bootstrap.servers": "b:9092",
                                               "ssl.keystore.location": "/tls/gateway.keystore.pem",
                                               "client.ssl.truststore.location": "/tls/ca.pem"}, env={})
    assert entrypoint.probe_target(gateway, config) == {
        "kind": "gateway", "http": "https://127.0.0.1:8443/health", "cafile": "/tls/ca.pem"}
