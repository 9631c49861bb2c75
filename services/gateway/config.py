"""`GatewayConfig`: the HTTP gateway's settings, with REST Proxy's key names where it has one.

An `https://` listener serves HTTPS with the `ssl.*` keys (`ssl.keystore.location`: the PEM key
and certificate chain; `ssl.truststore.location` and `ssl.client.auth` for client certificates);
the `client.*` keys (`client.security.protocol`, `client.ssl.truststore.location`,
`client.ssl.keystore.location`, `client.ssl.key.password`, and with SASL_PLAINTEXT or SASL_SSL
`client.sasl.mechanism` and `client.sasl.jaas.config`) are how its clients reach the cluster, as
REST Proxy names the settings of its Kafka clients."""

from __future__ import annotations

import ssl
from typing import Any

from services.common.config import REQUIRED, ConfigType, at_least, one_of, setting
from services.common.security.authorizer import AuthorizerConfig
from services.common.security.tls import CLIENT_AUTH_REQUESTED, CLIENT_AUTH_REQUIRED, TlsConfig
from services.common.service import listener_scheme
from services.common.zk.connect import ZkTlsConfig


class GatewayConfig(TlsConfig, AuthorizerConfig, ZkTlsConfig):
    gateway_id: int = setting(ConfigType.INT, 1, at_least(0), doc="This gateway's id (in logs and metrics).")
    listeners: str = setting(ConfigType.STRING, "http://0.0.0.0:8080",
                             doc="Where the gateway serves HTTP: http://host:port, or https://host:port.")
    client_security_protocol: str = setting(
        ConfigType.STRING, "PLAINTEXT", one_of("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"),
        doc="SSL: the gateway's clients reach the cluster's gRPC listeners over TLS.")
    client_ssl_truststore_location: str | None = setting(
        ConfigType.STRING, None, doc="The CA certificates (PEM) the cluster's certificates chain to.")
    client_ssl_keystore_location: str | None = setting(
        ConfigType.STRING, None, doc="The gateway's client key and certificate (PEM), for mutual TLS.")
    client_ssl_key_password: str | None = setting(ConfigType.PASSWORD, None,
                                                  doc="The password of that key, if it is encrypted.")
    client_sasl_mechanism: str = setting(
        ConfigType.STRING, "GSSAPI", doc="With SASL_*: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.")
    client_sasl_jaas_config: str | None = setting(
        ConfigType.PASSWORD, None,
        doc="With SASL_*: the gateway's credentials, a ScramLoginModule or PlainLoginModule JAAS entry.")
    advertised_listeners: str | None = setting(
        ConfigType.STRING, None,
        doc="The http://host:port clients reach this process at (consumer instances' base_uri); "
            "defaults to `listeners`, with 127.0.0.1 for an all-interfaces host.")
    bootstrap_servers: str = setting(ConfigType.STRING, REQUIRED, doc="Brokers to bootstrap from: host:port,...")
    num_workers: int = setting(ConfigType.INT, 1, at_least(1), doc="Worker processes serving HTTP.")
    consumer_instance_timeout_ms: int = setting(
        ConfigType.INT, 300000, at_least(1),
        doc="A consumer instance unused this long is closed and leaves its group.")
    consumer_request_timeout_ms: int = setting(
        ConfigType.INT, 1000, at_least(0),
        doc="The longest a records read waits for records when the request gives no timeout.")
    max_request_bytes: int = setting(ConfigType.INT, 64 * 1024 * 1024, at_least(1024),
                                     doc="The largest request body accepted (413 beyond it).")
    max_record_bytes: int = setting(ConfigType.INT, 1048576, at_least(1),
                                    doc="The largest key plus value of one produced record (422 beyond it).")
    request_timeout_ms: int = setting(ConfigType.INT, 30000, at_least(1),
                                      doc="How long a request may wait on the cluster before it is answered 5xx.")
    worker_base_port: int = setting(
        ConfigType.INT, 0, at_least(0),
        doc="With num.workers > 1, worker i also listens on port worker.base.port + i, which its consumer "
            "instances' base_uri names; 0: the front port + 1.")
    consumer_max_instances: int = setting(
        ConfigType.INT, 1000, at_least(1),
        doc="The most v2 consumer instances one worker process holds; a create beyond it is answered 429.")
    ui_sample_interval_ms: int = setting(
        ConfigType.INT, 3000, at_least(100),
        doc="How often the web console's sampler reads end offsets and group lags for its charts.")
    ui_sample_window_ms: int = setting(
        ConfigType.INT, 300000, at_least(1000),
        doc="How far back the web console's charts reach (the sampler keeps this much history).")
    zookeeper_connect: str | None = setting(
        ConfigType.STRING, None,
        doc="ZooKeeper (host:port,.../chroot) of the cluster: where SCRAM users (BASIC authentication) and "
            "ACLs (authorizer.class.name) are read. Needed only for those.")
    authentication_method: str = setting(
        ConfigType.STRING, "NONE", one_of("NONE", "BASIC", "BEARER"),
        doc="How requests are authenticated, as REST Proxy's: NONE (every request is User:ANONYMOUS), BASIC "
            "(HTTP Basic, checked against the SCRAM users in ZooKeeper or authentication.password.file), "
            "BEARER (a JWT, verified with bearer.jwt.public.key.file or bearer.jwt.secret; its `sub` names "
            "the user).")
    authentication_realm: str = setting(ConfigType.STRING, "KafkaRest",
                                        doc="The realm a 401's WWW-Authenticate names.")
    authentication_password_file: str | None = setting(
        ConfigType.STRING, None,
        doc="For BASIC: a file of `user: password[,role...]` lines (Jetty's property-file login format), "
            "checked before the SCRAM users in ZooKeeper.")
    authentication_session_secret: str | None = setting(
        ConfigType.PASSWORD, None,
        doc="The key the console's session cookies are signed with (the same on every worker and gateway "
            "that should take one another's sessions); unset: a random key of each process.")
    bearer_jwt_public_key_file: str | None = setting(
        ConfigType.STRING, None, doc="For BEARER: a PEM public key (RSA, EC or Ed25519) that signs the tokens.")
    bearer_jwt_secret: str | None = setting(ConfigType.PASSWORD, None,
                                            doc="For BEARER: the HMAC secret that signs the tokens (HS256/384/512).")
    bearer_jwt_algorithms: str = setting(
        ConfigType.STRING, "RS256,RS384,RS512,ES256,ES384,ES512,EdDSA,HS256,HS384,HS512",
        doc="For BEARER: the signature algorithms accepted, comma-separated.")
    bearer_jwt_audience: str | None = setting(ConfigType.STRING, None,
                                              doc="For BEARER: the `aud` a token must carry, if set.")
    bearer_jwt_issuer: str | None = setting(ConfigType.STRING, None,
                                            doc="For BEARER: the `iss` a token must carry, if set.")

    def client_settings(self) -> dict[str, Any]:
        """The security keywords of the gateway's clients (Admin, Producer, Consumer, LowLevelClient)."""
        if self.client_security_protocol == "PLAINTEXT":
            return {}
        settings: dict[str, Any] = {"security_protocol": self.client_security_protocol,
                                    "ssl_truststore_location": self.client_ssl_truststore_location,
                                    "ssl_keystore_location": self.client_ssl_keystore_location}
        if self.client_ssl_key_password:
            settings["ssl_key_password"] = self.client_ssl_key_password
        if self.client_security_protocol.startswith("SASL_"):
            settings["sasl_mechanism"] = self.client_sasl_mechanism
            settings["sasl_jaas_config"] = self.client_sasl_jaas_config
        return settings

    def own_hop_verify(self) -> ssl.SSLContext | bool:
        """httpx's `verify` for a hop from one worker to another's own port: for an https://
        listener, TLS trusting `ssl.truststore.location` (the system's CAs without it) and presenting
        the gateway's own certificate, the name unchecked (the hop is to this host's loopback)."""
        if listener_scheme(self.listeners) != "https":
            return True
        context = ssl.create_default_context(cafile=self.ssl_truststore_location)
        context.check_hostname = False
        if self.ssl_keystore_location:
            context.load_cert_chain(self.ssl_keystore_location, password=self.ssl_key_password)
        return context

    def uvicorn_ssl(self) -> dict[str, Any]:
        """uvicorn's TLS arguments for an https:// listener (none for http://)."""
        if listener_scheme(self.listeners) != "https":
            return {}
        if not self.ssl_keystore_location:
            raise ValueError("an https:// listener needs ssl.keystore.location")
        reqs = {CLIENT_AUTH_REQUIRED: ssl.CERT_REQUIRED, CLIENT_AUTH_REQUESTED: ssl.CERT_OPTIONAL}
        return {"ssl_certfile": self.ssl_keystore_location, "ssl_keyfile": self.ssl_keystore_location,
                "ssl_keyfile_password": self.ssl_key_password, "ssl_ca_certs": self.ssl_truststore_location,
                "ssl_cert_reqs": reqs.get(self.ssl_client_auth, ssl.CERT_NONE)}
