"""A Kafka listener's security: its protocol (PLAINTEXT, SASL_PLAINTEXT, SSL or SASL_SSL), its TLS
key and trust stores (`tls`), the SASL mechanisms it takes, where SCRAM credentials and PLAIN
passwords come from, and the authorizer (None: every request is allowed, as with
`authorizer.class.name` empty).

On a SASL_PLAINTEXT listener a connection is unauthenticated until SaslHandshake (v0 or v1) and
SaslAuthenticate complete; before that only ApiVersions, SaslHandshake and SaslAuthenticate are
served, anything else closes the connection. After SaslHandshake v0 the client's SASL tokens come
as bare size-prefixed frames, as Kafka's legacy clients send them. A failed exchange is answered
SASL_AUTHENTICATION_FAILED (with SaslAuthenticate) and the connection is closed. Each connection
has a principal: `User:<name>` once authenticated, `User:ANONYMOUS` on a PLAINTEXT listener. On an
SSL listener it is the client certificate's subject (`User:CN=alice`), or `User:ANONYMOUS` when the
client sent none (`ssl.client.auth` other than `required`).

A request a coordinator forwards to a broker for its client travels in an Envelope (API 58, not
advertised to clients) naming the client's principal (`User:<name>` in UTF-8) and address; the
broker handles it as that principal when the forwarding node's own may CLUSTER_ACTION.
"""

from __future__ import annotations

import ipaddress
import ssl
from dataclasses import dataclass, field

from services.common.kafka_wire.listener_config import KafkaListenerConfig
from services.common.security.authorizer import AclAuthorizer, node_authorizer
from services.common.security.sasl import (
    ANONYMOUS_PRINCIPAL,
    MECHANISMS,
    CredentialLookup,
    SaslServer,
    ScramCredential,
    plain_users,
)
from services.common.security.tls import SSL_PROTOCOLS, TlsSettings  # noqa: F401 (SSL_PROTOCOLS re-exported)
from services.common.zk.client import OdradekZkClient

PLAINTEXT_PROTOCOL = "PLAINTEXT"
SASL_PLAINTEXT_PROTOCOL = "SASL_PLAINTEXT"
SSL_PROTOCOL, SASL_SSL_PROTOCOL = "SSL", "SASL_SSL"
PROTOCOLS = (PLAINTEXT_PROTOCOL, SASL_PLAINTEXT_PROTOCOL, SSL_PROTOCOL, SASL_SSL_PROTOCOL)
SASL_PROTOCOLS = frozenset({SASL_PLAINTEXT_PROTOCOL, SASL_SSL_PROTOCOL})
SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY, ENVELOPE_KEY = 17, 36, 58
SASL_HANDSHAKE_VERSIONS, SASL_AUTHENTICATE_VERSIONS = (0, 1), (0, 2)


def _no_credentials(user: str, mechanism: str) -> None:
    return None


@dataclass(frozen=True)
class ListenerSecurity:
    protocol: str = PLAINTEXT_PROTOCOL
    mechanisms: tuple[str, ...] = MECHANISMS
    scram_credentials: CredentialLookup = _no_credentials
    plain_passwords: dict[str, str] = field(default_factory=dict)
    authorizer: AclAuthorizer | None = None
    tls: TlsSettings | None = None

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"listener security protocol {self.protocol!r} is not one of {', '.join(PROTOCOLS)}")
        unknown = set(self.mechanisms) - set(MECHANISMS)
        if unknown:
            raise ValueError(f"unsupported SASL mechanisms {sorted(unknown)}; supported: {', '.join(MECHANISMS)}")
        if self.protocol in SSL_PROTOCOLS and self.tls is None:
            raise ValueError(f"a {self.protocol} listener needs ssl.keystore.location")

    @property
    def sasl(self) -> bool:
        return self.protocol in SASL_PROTOCOLS

    def ssl_context(self) -> ssl.SSLContext | None:
        """The listener's TLS context; None on a PLAINTEXT or SASL_PLAINTEXT listener."""
        return self.tls.server_context(self.protocol) if self.protocol in SSL_PROTOCOLS else None

    def sasl_server(self, mechanism: str) -> SaslServer:
        return SaslServer(mechanism, self.scram_credentials, self.plain_passwords)


PLAINTEXT_SECURITY = ListenerSecurity()


def listener_security(config: KafkaListenerConfig, zk: OdradekZkClient,
                      authorizer: AclAuthorizer | None = None) -> ListenerSecurity:
    """The security of the node's Kafka listener from its config; SCRAM credentials are read from
    ZooKeeper at each authentication, so users added or changed take effect on the next one. The
    node's `authorizer`, else one started here when configured (its ACLs loaded and watched)."""
    listener = config.kafka_listener
    if authorizer is None:
        authorizer = node_authorizer(config, zk.zk)

    def scram_credentials(user: str, mechanism: str) -> ScramCredential | None:
        value = zk.get_user_config(user).get(mechanism)
        return None if value is None else ScramCredential.decode(value)

    return ListenerSecurity(
        protocol=listener.protocol if listener is not None else PLAINTEXT_PROTOCOL,
        mechanisms=tuple(m.strip().upper() for m in config.sasl_enabled_mechanisms.split(",") if m.strip()),
        scram_credentials=scram_credentials, plain_passwords=plain_users(config.listener_plain_jaas_config),
        authorizer=authorizer, tls=config.tls_settings())


@dataclass
class Session:
    """One connection's authentication state."""

    host: str
    principal: str = ANONYMOUS_PRINCIPAL
    authenticated: bool = False
    sasl: SaslServer | None = None
    raw_tokens: bool = False  # after SaslHandshake v0


def encode_client_host(host: str) -> bytes:
    """Envelope's client address: the IP's 4 or 16 bytes, as Kafka sends it."""
    try:
        return ipaddress.ip_address(host).packed
    except ValueError:
        return b""


def decode_client_host(address: bytes) -> str:
    try:
        return str(ipaddress.ip_address(address))
    except ValueError:
        return ""
