"""The keys of a Kafka listener, shared by brokers and coordinators: where it listens, where Kafka
clients reach it, the largest request, the accept backlog, and its security: SASL mechanisms, PLAIN
users (Kafka's JAAS form), the ACL authorizer with its super users, and TLS (`ssl.*`, `TlsConfig`)."""

from __future__ import annotations

from services.common.config import ConfigType, at_least, setting
from services.common.security.authorizer import AuthorizerConfig
from services.common.security.tls import TlsConfig
from services.common.service import Listener, parse_listener

DEFAULT_KAFKA_HOST = "127.0.0.1"


class KafkaListenerConfig(TlsConfig, AuthorizerConfig):
    kafka_listeners: str | None = setting(
        ConfigType.STRING, None,
        doc="Where Kafka's binary protocol is served to Kafka clients, e.g. "
            "PLAINTEXT://127.0.0.1:19092; unset, only gRPC is served.")
    kafka_advertised_listeners: str | None = setting(
        ConfigType.STRING, None,
        doc="Where Kafka clients reach that listener, if not at kafka.listeners (with a host).")
    socket_request_max_bytes: int = setting(
        ConfigType.INT, 104857600, at_least(1),
        doc="The largest Kafka protocol request; a larger size prefix closes its connection.")
    socket_listen_backlog_size: int = setting(
        ConfigType.INT, 50, at_least(1),
        doc="Connections to the Kafka listener the kernel queues before they are accepted.")

    sasl_enabled_mechanisms: str = setting(
        ConfigType.STRING, "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        doc="The SASL mechanisms a SASL_PLAINTEXT Kafka listener takes (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512).")
    listener_plain_jaas_config: str | None = setting(
        ConfigType.PASSWORD, None, key="listener.name.sasl_plaintext.plain.sasl.jaas.config",
        doc='PLAIN users as Kafka\'s PlainLoginModule JAAS config lists them (user_alice="secret"); its '
            'username and password are what this node authenticates with to the brokers\' Kafka listeners.')

    @property
    def kafka_listener(self) -> Listener | None:
        return parse_listener(self.kafka_listeners.split(",")[0]) if self.kafka_listeners else None

    def kafka_advertised_listener(self, bound_port: int) -> Listener | None:
        """Where Kafka clients reach this listener: kafka.advertised.listeners, else kafka.listeners
        (with a host, and the bound port when it asked for port 0)."""
        if not self.kafka_listeners:
            return None
        listener = parse_listener((self.kafka_advertised_listeners or self.kafka_listeners).split(",")[0])
        return Listener(listener.protocol, listener.host or DEFAULT_KAFKA_HOST, listener.port or bound_port)
