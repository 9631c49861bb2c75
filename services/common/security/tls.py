"""TLS for every listener and every connection between nodes, from Kafka's `ssl.*` keys.

`TlsConfig` holds the keys a node's listeners share: `ssl.keystore.location` (with
`ssl.keystore.type=PEM`: one file holding the private key and its certificate chain, the key
encrypted with `ssl.key.password` or not), `ssl.truststore.location` (the CA certificates that
peers' certificates must chain to) and `ssl.client.auth` (`required`, `requested` or `none`).
A listener whose protocol is `SSL` or `SASL_SSL` serves TLS with them; as in Kafka 2.8,
`ssl.client.auth` applies to SSL listeners and not to SASL_SSL ones, whose clients authenticate
with SASL. The same identity and trust are what the node presents when it connects to others.

`TlsSettings` is the loaded form: `server_context`/`client_context` for asyncio streams (the
Kafka listener, the forwarder) and `grpc_server_credentials`/`grpc_channel_credentials` for gRPC.
An SSL connection's principal is Kafka's default one: `User:` and the peer certificate's subject
(`User:CN=broker-1`), or `User:ANONYMOUS` when the peer sent no certificate.
"""

from __future__ import annotations

import re
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from services.common.config import Config, ConfigType, one_of, setting
from services.common.security.sasl import ANONYMOUS_PRINCIPAL

SSL_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})
CLIENT_AUTH_REQUIRED, CLIENT_AUTH_REQUESTED, CLIENT_AUTH_NONE = "required", "requested", "none"
_PEM_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----.+?-----END \1-----\s*", re.DOTALL)


class TlsError(ValueError):
    """The `ssl.*` keys do not name a usable key, certificate or trust store."""


class TlsConfig(Config):
    ssl_keystore_type: str = setting(ConfigType.STRING, "PEM", one_of("PEM"),
                                     doc="The key store's format; PEM only.")
    ssl_keystore_location: str | None = setting(
        ConfigType.STRING, None,
        doc="A PEM file holding this node's private key and certificate chain, for SSL and SASL_SSL listeners.")
    ssl_key_password: str | None = setting(ConfigType.PASSWORD, None,
                                           doc="The password of the key store's private key, if it is encrypted.")
    ssl_truststore_type: str = setting(ConfigType.STRING, "PEM", one_of("PEM"),
                                       doc="The trust store's format; PEM only.")
    ssl_truststore_location: str | None = setting(
        ConfigType.STRING, None, doc="A PEM file of the CA certificates that peers' certificates must chain to.")
    ssl_client_auth: str = setting(
        ConfigType.STRING, CLIENT_AUTH_NONE, one_of(CLIENT_AUTH_REQUIRED, CLIENT_AUTH_REQUESTED, CLIENT_AUTH_NONE),
        doc="Whether an SSL listener requires, requests or ignores clients' certificates.")

    def tls_settings(self) -> TlsSettings | None:
        """The loaded key store and trust store; None when no key store is configured."""
        if not self.ssl_keystore_location:
            return None
        return TlsSettings.load(self.ssl_keystore_location, self.ssl_truststore_location,
                                key_password=self.ssl_key_password, client_auth=self.ssl_client_auth)


@dataclass(frozen=True)
class TlsSettings:
    key_pem: bytes | None  # unencrypted PKCS#8
    certificate_chain_pem: bytes | None
    trusted_pem: bytes | None
    client_auth: str = CLIENT_AUTH_NONE

    @classmethod
    def load(cls, keystore_location: str | None, truststore_location: str | None, *,
             key_password: str | None = None, client_auth: str = CLIENT_AUTH_NONE,
             certificate_location: str | None = None) -> TlsSettings:
        """From a PEM key store (key and chain in one file; or the key alone, with the chain at
        `certificate_location`, as librdkafka's `ssl.key.location`/`ssl.certificate.location`)."""
        key_pem = chain_pem = None
        if keystore_location:
            blocks = _pem_blocks(_read(keystore_location))
            if certificate_location:
                blocks += _pem_blocks(_read(certificate_location))
            keys = [b for kind, b in blocks if kind.endswith(b"PRIVATE KEY")]
            chain = [b for kind, b in blocks if kind == b"CERTIFICATE"]
            if not keys or not chain:
                raise TlsError(f"{keystore_location} needs a private key and a certificate (PEM)")
            key_pem = _unencrypted_key(keys[0], key_password, keystore_location)
            chain_pem = b"".join(chain)
        trusted = _read(truststore_location) if truststore_location else None
        return cls(key_pem, chain_pem, trusted, client_auth)

    @property
    def principal(self) -> str:
        """This node's own principal: `User:` and its certificate's subject."""
        if self.certificate_chain_pem is None:
            return ANONYMOUS_PRINCIPAL
        return "User:" + x509.load_pem_x509_certificate(self.certificate_chain_pem).subject.rfc4514_string()

    # ------------------------------------------------------------------ asyncio and ssl

    def server_context(self, protocol: str) -> ssl.SSLContext:
        """A listener's context; client certificates are asked for on SSL listeners only."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        self._load_identity(context)
        if self.trusted_pem:
            context.load_verify_locations(cadata=self.trusted_pem.decode("ascii"))
        client_auth = self.client_auth if protocol == "SSL" else CLIENT_AUTH_NONE
        context.verify_mode = {CLIENT_AUTH_REQUIRED: ssl.CERT_REQUIRED, CLIENT_AUTH_REQUESTED: ssl.CERT_OPTIONAL,
                               CLIENT_AUTH_NONE: ssl.CERT_NONE}[client_auth]
        return context

    def client_context(self) -> ssl.SSLContext:
        """A context that verifies the server against the trust store (and its host name), and
        presents this node's certificate when it has one."""
        context = ssl.create_default_context(cadata=self.trusted_pem.decode("ascii") if self.trusted_pem else None)
        if self.key_pem is not None:
            self._load_identity(context)
        return context

    def _load_identity(self, context: ssl.SSLContext) -> None:
        if self.key_pem is None or self.certificate_chain_pem is None:
            raise TlsError("a TLS listener needs ssl.keystore.location")
        # the ssl module loads a chain and key from files only
        with tempfile.NamedTemporaryFile("wb", suffix=".pem") as keystore:
            keystore.write(self.key_pem + self.certificate_chain_pem)
            keystore.flush()
            context.load_cert_chain(keystore.name)

    # ------------------------------------------------------------------ gRPC

    def grpc_server_credentials(self) -> grpc.ServerCredentials:
        if self.key_pem is None or self.certificate_chain_pem is None:
            raise TlsError("an SSL gRPC listener needs ssl.keystore.location")
        required = self.client_auth == CLIENT_AUTH_REQUIRED
        if self.client_auth != CLIENT_AUTH_NONE and not self.trusted_pem:
            raise TlsError("ssl.client.auth needs ssl.truststore.location")
        return grpc.ssl_server_credentials([(self.key_pem, self.certificate_chain_pem)],
                                           root_certificates=self.trusted_pem if self.client_auth != CLIENT_AUTH_NONE
                                           else None,
                                           require_client_auth=required)

    def grpc_channel_credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(root_certificates=self.trusted_pem, private_key=self.key_pem,
                                            certificate_chain=self.certificate_chain_pem)


def peer_principal(peer_certificate_der: bytes | None) -> str:
    """Kafka's default principal of an SSL connection's peer."""
    if not peer_certificate_der:
        return ANONYMOUS_PRINCIPAL
    return "User:" + x509.load_der_x509_certificate(peer_certificate_der).subject.rfc4514_string()


def peer_host(context: grpc.ServicerContext) -> str:
    """The caller's address from gRPC's peer string (`ipv4:127.0.0.1:5000`, `ipv6:[::1]:5000`)."""
    peer = context.peer() or ""
    _, _, address = peer.partition(":")
    return address.rpartition(":")[0].strip("[]")


def grpc_peer_principal(context: grpc.ServicerContext) -> str:
    """The principal of a gRPC call's peer: `User:<subject>` of its verified client certificate,
    else `User:ANONYMOUS` (a plaintext listener, or no certificate sent)."""
    auth = context.auth_context()
    certificates = auth.get("x509_pem_cert") or []
    if not certificates:
        return ANONYMOUS_PRINCIPAL
    return "User:" + x509.load_pem_x509_certificate(certificates[0]).subject.rfc4514_string()


def _read(location: str) -> bytes:
    try:
        return Path(location).read_bytes()
    except OSError as exc:
        raise TlsError(f"cannot read {location}: {exc}") from None


def _pem_blocks(data: bytes) -> list[tuple[bytes, bytes]]:
    return [(match.group(1), match.group(0).strip() + b"\n") for match in _PEM_BLOCK.finditer(data)]


def _unencrypted_key(key_pem: bytes, password: str | None, location: str) -> bytes:
    try:
        key = serialization.load_pem_private_key(key_pem, password.encode() if password else None)
    except (TypeError, ValueError) as exc:
        raise TlsError(f"cannot load the private key in {location}: {exc}") from None
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())
