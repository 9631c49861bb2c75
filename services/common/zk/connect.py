"""Making a ZooKeeper client: `zk_client` is where every Odradek process builds its KazooClient,
in plaintext or over TLS.

TLS follows Kafka 2.8's client keys for ZooKeeper (KIP-515), declared by `ZkTlsConfig` for a
node's config or a tool's `--zk-tls-config-file`: `zookeeper.ssl.client.enable` turns it on;
`zookeeper.ssl.keystore.location` is a PEM file holding the client's private key and certificate
chain (the key encrypted with `zookeeper.ssl.keystore.password` or not), as the `ssl.*` keys take
it (`tls.TlsConfig`); `zookeeper.ssl.truststore.location` a PEM file of the CA certificates the
server's must chain to; `zookeeper.ssl.endpoint.identification.algorithm` `HTTPS` (the default)
checks the server's certificate against the host connected to, empty skips that check.
`zookeeper.clientCnxnSocket` and `zookeeper.ssl.truststore.password` are accepted and ignored:
kazoo has one socket implementation, which speaks TLS, and a PEM trust store has no password.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from services.common.config import Config, ConfigError, ConfigType, one_of, setting

HOSTNAME_VERIFICATION = "HTTPS"
DEFAULT_SESSION_TIMEOUT_S = 10.0  # kazoo's


@dataclass(frozen=True)
class ZkClientTls:
    """What a ZooKeeper client presents and trusts over TLS (PEM files)."""

    keystore_location: str | None
    truststore_location: str | None
    keystore_password: str | None = None
    check_hostname: bool = True


def _hostname_algorithm(key: str, value: str | None) -> None:
    if value and value.upper() != HOSTNAME_VERIFICATION:
        raise ConfigError(key, value, f"must be {HOSTNAME_VERIFICATION} or empty")


class ZkTlsConfig(Config):
    zookeeper_ssl_client_enable: bool = setting(
        ConfigType.BOOLEAN, False, doc="Connect to ZooKeeper over TLS (its secureClientPort).")
    zookeeper_client_cnxn_socket: str | None = setting(
        ConfigType.STRING, None, key="zookeeper.clientCnxnSocket",
        doc="Accepted for Kafka's configs and ignored: one socket implementation serves TLS.")
    zookeeper_ssl_keystore_location: str | None = setting(
        ConfigType.STRING, None,
        doc="A PEM file holding the private key and certificate chain presented to ZooKeeper.")
    zookeeper_ssl_keystore_password: str | None = setting(
        ConfigType.PASSWORD, None, doc="The password of the key store's private key, if it is encrypted.")
    zookeeper_ssl_keystore_type: str = setting(ConfigType.STRING, "PEM", one_of("PEM"),
                                               doc="The key store's format; PEM only.")
    zookeeper_ssl_truststore_location: str | None = setting(
        ConfigType.STRING, None, doc="A PEM file of the CA certificates ZooKeeper's certificate must chain to.")
    zookeeper_ssl_truststore_password: str | None = setting(
        ConfigType.PASSWORD, None, doc="Accepted and ignored: a PEM trust store has no password.")
    zookeeper_ssl_truststore_type: str = setting(ConfigType.STRING, "PEM", one_of("PEM"),
                                                 doc="The trust store's format; PEM only.")
    zookeeper_ssl_endpoint_identification_algorithm: str | None = setting(
        ConfigType.STRING, HOSTNAME_VERIFICATION, _hostname_algorithm,
        doc="HTTPS checks ZooKeeper's certificate against the host connected to; empty does not.")

    def zk_tls(self) -> ZkClientTls | None:
        """The client's TLS settings; None unless `zookeeper.ssl.client.enable`."""
        if not self.zookeeper_ssl_client_enable:
            return None
        return ZkClientTls(keystore_location=self.zookeeper_ssl_keystore_location,
                           truststore_location=self.zookeeper_ssl_truststore_location,
                           keystore_password=self.zookeeper_ssl_keystore_password,
                           check_hostname=bool(self.zookeeper_ssl_endpoint_identification_algorithm))


def zk_tls_from_file(path: str | Path | None) -> ZkClientTls | None:
    """A tool's `--zk-tls-config-file`: a properties file of the `zookeeper.*` keys above."""
    return None if path is None else ZkTlsConfig.load(str(path), env={}).zk_tls()


def zk_client(hosts: str, tls: ZkClientTls | None = None, *, timeout_s: float = DEFAULT_SESSION_TIMEOUT_S,
              **kazoo_options: Any) -> KazooClient:
    """An unstarted KazooClient for connect string `hosts` (with any chroot), over TLS when `tls`
    is given; `kazoo_options` are KazooClient's other arguments (`client_id`, `connection_retry`, ...)."""
    if tls is None:
        return KazooClient(hosts=hosts, timeout=timeout_s, **kazoo_options)
    keystore = tls.keystore_location
    return KazooClient(hosts=hosts, timeout=timeout_s, use_ssl=True, verify_certs=True,
                       ca=tls.truststore_location, certfile=keystore, keyfile=keystore,
                       keyfile_password=tls.keystore_password, check_hostname=tls.check_hostname,
                       **kazoo_options)
