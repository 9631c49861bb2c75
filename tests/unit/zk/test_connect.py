"""`zk_client` and Kafka's `zookeeper.ssl.*` keys (`ZkTlsConfig`, `--zk-tls-config-file`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.common.config import ConfigError
from services.common.zk.connect import ZkClientTls, ZkTlsConfig, zk_client, zk_tls_from_file


def test_tls_is_off_unless_enabled() -> None:
    config = ZkTlsConfig.load({"zookeeper.ssl.keystore.location": "/k.pem"}, env={})
    assert config.zk_tls() is None


def test_kafka_keys_give_the_client_tls_settings() -> None:
    config = ZkTlsConfig.load({
        "zookeeper.ssl.client.enable": "true",
        "zookeeper.clientCnxnSocket": "org.apache.zookeeper.ClientCnxnSocketNetty",
        "zookeeper.ssl.keystore.location": "/k.pem", "zookeeper.ssl.keystore.password": "secret",
        "zookeeper.ssl.keystore.type": "PEM", "zookeeper.ssl.truststore.location": "/ca.pem",
        "zookeeper.ssl.truststore.type": "PEM"}, env={})
    assert config.zk_tls() == ZkClientTls("/k.pem", "/ca.pem", "secret", check_hostname=True)
    assert config.unknown() == {}


def test_an_empty_endpoint_identification_algorithm_skips_the_host_name_check() -> None:
    config = ZkTlsConfig.load({"zookeeper.ssl.client.enable": "true",
                               "zookeeper.ssl.endpoint.identification.algorithm": ""}, env={})
    assert config.zk_tls().check_hostname is False


@pytest.mark.parametrize(("key", "value"), [("zookeeper.ssl.keystore.type", "JKS"),
                                            ("zookeeper.ssl.truststore.type", "PKCS12"),
                                            ("zookeeper.ssl.endpoint.identification.algorithm", "LDAPS")])
def test_unsupported_values_are_refused(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=key):
        ZkTlsConfig.load({key: value}, env={})


def test_a_tool_reads_the_keys_from_its_zk_tls_config_file(tmp_path: Path) -> None:
    path = tmp_path / "zk-tls.properties"
    path.write_text("zookeeper.ssl.client.enable=true\nzookeeper.ssl.keystore.location=/k.pem\n"
                    "zookeeper.ssl.truststore.location=/ca.pem\n")
    assert zk_tls_from_file(path) == ZkClientTls("/k.pem", "/ca.pem")
    assert zk_tls_from_file(None) is None


def test_the_client_is_plaintext_or_tls_with_the_key_store_as_certificate_and_key() -> None:
    plain = zk_client("127.0.0.1:2181/chroot", timeout_s=5)
    assert plain.use_ssl is False and plain.chroot == "/chroot" and plain._session_timeout == 5000
    secured = zk_client("127.0.0.1:2182", ZkClientTls("/k.pem", "/ca.pem", "pw", check_hostname=False))
    assert secured.use_ssl and secured.verify_certs and secured.check_hostname is False
    assert (secured.certfile, secured.keyfile, secured.keyfile_password, secured.ca) == \
        ("/k.pem", "/k.pem", "pw", "/ca.pem")
