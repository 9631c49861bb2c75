"""Configuration keys shared by the Python clients, with Kafka's names and defaults.

`CommonClientConfig` holds the keys every client has (Kafka's CommonClientConfigs);
`AdminConfig` adds `default.api.timeout.ms`, the bound on a whole admin operation including its
retries. Clients take these as snake_case keywords (`request_timeout_ms=5000`) or as a mapping of
dotted keys (`{"request.timeout.ms": 5000}`); the environment is not consulted, so a service's
`ODRADEK_*` variables never change a client's behaviour.

Kafka's client security settings (`security.protocol`, `ssl.ca.location` or
`ssl.truststore.location`, `ssl.certificate.location` with `ssl.key.location`, or
`ssl.keystore.location`) make the clients' gRPC connections TLS (`tls_settings`). With
`security.protocol` SASL_PLAINTEXT or SASL_SSL, every call carries the user's credentials
(`sasl_credentials`): `sasl.username` and `sasl.password` (librdkafka's names) or `sasl.jaas.config`
(the Java clients': a ScramLoginModule or PlainLoginModule entry), for `sasl.mechanism` PLAIN,
SCRAM-SHA-256 or SCRAM-SHA-512; the servers verify them as their Kafka listeners would.

`parse_bootstrap_servers("h1:9092,h2:9092")` checks and splits the address list.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from services.common.config import (
    REQUIRED,
    Config,
    ConfigError,
    ConfigType,
    at_least,
    non_empty,
    one_of,
    setting,
)
from services.common.security.sasl import MECHANISMS, client_jaas_login
from services.common.security.tls import SSL_PROTOCOLS, TlsSettings
from services.common.service import parse_listener

C = TypeVar("C", bound=Config)
KEY = "bootstrap.servers"
CLIENT_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_CLIENT_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
UNSUPPORTED_SASL_MECHANISMS = ("GSSAPI", "OAUTHBEARER")


def parse_bootstrap_servers(servers: str | Iterable[str]) -> list[tuple[str, int]]:
    """`"h1:9092, h2:9092"` (or a list of "host:port") -> [(host, port), ...], order kept."""
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    addresses = []
    for item in items:
        text = item.strip()
        if not text:
            continue
        try:
            listener = parse_listener(text)
        except ValueError:
            raise ConfigError(KEY, servers, f"Invalid url in bootstrap.servers: {text}") from None
        if not listener.host or not 0 < listener.port < 65536:
            raise ConfigError(KEY, servers, f"Invalid url in bootstrap.servers: {text}")
        addresses.append((listener.host, listener.port))
    if not addresses:
        raise ConfigError(KEY, servers, "No resolvable bootstrap urls given in bootstrap.servers")
    return addresses


def _valid_bootstrap(key: str, value: Any) -> None:
    parse_bootstrap_servers(value)


class CommonClientConfig(Config):
    """Keys every client has."""

    bootstrap_servers: tuple[str, ...] = setting(
        ConfigType.LIST, REQUIRED, non_empty, _valid_bootstrap,
        doc="host:port pairs used to find the cluster; any subset of the brokers will do.")
    client_id: str = setting(ConfigType.STRING, "", doc="Name of the client, for server logs.")
    request_timeout_ms: int = setting(ConfigType.INT, 30000, at_least(0),
                                      doc="Deadline of one request to a server.")
    retry_backoff_ms: int = setting(ConfigType.LONG, 100, at_least(0),
                                    doc="Wait before retrying a failed request; also the minimum "
                                        "time between two metadata refreshes.")
    reconnect_backoff_ms: int = setting(ConfigType.LONG, 50, at_least(0),
                                        doc="Wait before reconnecting to a node after a connection failure.")
    reconnect_backoff_max_ms: int = setting(ConfigType.LONG, 1000, at_least(0),
                                            doc="Upper bound of the growing wait between reconnections.")
    metadata_max_age_ms: int = setting(ConfigType.LONG, 300000, at_least(0),
                                       doc="Metadata older than this is refreshed even without a change.")
    security_protocol: str = setting(
        ConfigType.STRING, "PLAINTEXT", one_of(*CLIENT_PROTOCOLS),
        doc="SSL or SASL_SSL: the gRPC connections are TLS, verified against the CA and presenting the "
            "client certificate when one is given.")
    ssl_ca_location: str | None = setting(ConfigType.STRING, None,
                                          doc="The CA certificates (PEM) servers' certificates chain to.")
    ssl_truststore_location: str | None = setting(ConfigType.STRING, None,
                                                  doc="The same as ssl.ca.location (Java clients' name).")
    ssl_certificate_location: str | None = setting(ConfigType.STRING, None,
                                                   doc="The client's certificate (PEM), with ssl.key.location.")
    ssl_key_location: str | None = setting(ConfigType.STRING, None, doc="The client's private key (PEM).")
    ssl_keystore_location: str | None = setting(
        ConfigType.STRING, None, doc="The client's private key and certificate in one PEM file (Java clients').")
    ssl_key_password: str | None = setting(ConfigType.PASSWORD, None,
                                           doc="The password of the client's private key, if it is encrypted.")
    sasl_mechanism: str = setting(
        ConfigType.STRING, "GSSAPI",
        doc="With SASL_PLAINTEXT or SASL_SSL: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (Kafka's default, "
            "GSSAPI, is not supported, nor is OAUTHBEARER).")
    sasl_username: str | None = setting(ConfigType.STRING, None, doc="The SASL user name (librdkafka's name).")
    sasl_password: str | None = setting(ConfigType.PASSWORD, None, doc="The SASL user's password.")
    sasl_jaas_config: str | None = setting(
        ConfigType.PASSWORD, None,
        doc='The Java clients\' form of the credentials: org.apache.kafka.common.security.scram.ScramLoginModule '
            '(or ...plain.PlainLoginModule) required username="..." password="...";')

    def tls_settings(self) -> TlsSettings | None:
        """The TLS of the client's gRPC connections; None when `security.protocol` has none."""
        if self.security_protocol not in SSL_PROTOCOLS:
            return None
        return TlsSettings.load(self.ssl_keystore_location or self.ssl_key_location,
                                self.ssl_truststore_location or self.ssl_ca_location,
                                key_password=self.ssl_key_password,
                                certificate_location=None if self.ssl_keystore_location
                                else self.ssl_certificate_location)


    def sasl_credentials(self) -> tuple[str, str] | None:
        """(user, password) every gRPC call carries; None unless `security.protocol` is SASL_*.
        ConfigError when the mechanism is not supported or the credentials are missing."""
        if self.security_protocol not in SASL_CLIENT_PROTOCOLS:
            return None
        mechanism = self.sasl_mechanism.strip().upper()
        if mechanism in UNSUPPORTED_SASL_MECHANISMS:
            raise ConfigError("sasl.mechanism", self.sasl_mechanism,
                              f"{mechanism} is not supported; use one of {', '.join(MECHANISMS)}")
        if mechanism not in MECHANISMS:
            raise ConfigError("sasl.mechanism", self.sasl_mechanism, f"use one of {', '.join(MECHANISMS)}")
        if self.sasl_username is not None or self.sasl_password is not None:
            if not self.sasl_username or self.sasl_password is None:
                raise ConfigError("sasl.username", self.sasl_username,
                                  f"{self.security_protocol} needs both sasl.username and sasl.password")
            return self.sasl_username, self.sasl_password
        if self.sasl_jaas_config:
            try:
                return client_jaas_login(self.sasl_jaas_config)
            except ValueError as exc:
                raise ConfigError("sasl.jaas.config", self.sasl_jaas_config, str(exc), hide_value=True) from None
        raise ConfigError("sasl.jaas.config", None, f"{self.security_protocol} needs sasl.username and "
                                                    "sasl.password, or sasl.jaas.config")


class AdminConfig(CommonClientConfig):
    """Keys of the admin client (and of the low-level data client, which shares its bounds)."""

    default_api_timeout_ms: int = setting(ConfigType.INT, 60000, at_least(0),
                                          doc="Bound on a whole client operation, retries included.")


def load_client_config(cls: type[C], config: Mapping[str, Any] | None, overrides: Mapping[str, Any]) -> C:
    """`cls` from a mapping of dotted keys plus snake_case keyword overrides (overrides win)."""
    return cls.load(dict(config or {}), env={}, **overrides)
