"""SSL and SASL_SSL Kafka listeners on their own: the client certificate's subject is the principal
handlers see, a client without a certificate is refused when `ssl.client.auth=required`, a
plaintext client gets no answer, and SASL_SSL authenticates with SASL inside TLS."""

from __future__ import annotations

import asyncio
import ssl

import pytest

from services.common.errors import Errors
from services.common.kafka_wire import KafkaWireServer, kafka_error
from services.common.kafka_wire.security import ListenerSecurity
from services.common.security.certs import CertificateAuthority
from services.common.security.tls import CLIENT_AUTH_REQUIRED, TlsSettings
from tests.kafka_wire_support import request_frame
from tests.unit.kafka_wire.test_kafka_wire import DEADLINE_S, METADATA, closed_by_server, read_response
from tests.unit.kafka_wire.test_sasl_listener import SASL_AUTHENTICATE, SASL_HANDSHAKE, registry_seeing_principals


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    directory = tmp_path_factory.mktemp("pki")
    ca = CertificateAuthority.create()
    ca_files = ca.write(directory / "ca.key", directory / "ca.pem")
    return {"ca": str(ca_files.certificate_path),
            "broker": ca.issue_files(directory, "broker-1"), "alice": ca.issue_files(directory, "alice")}


def serve_tls(test, protocol: str, pki, seen: list[str]) -> None:
    tls = TlsSettings.load(str(pki["broker"].keystore_path), pki["ca"], client_auth=CLIENT_AUTH_REQUIRED)
    security = ListenerSecurity(protocol, plain_passwords={"bob": "bob-secret"}, tls=tls)

    async def run():
        server = KafkaWireServer(registry_seeing_principals(seen), "127.0.0.1", 0, security=security)
        port = await server.start()
        try:
            await asyncio.wait_for(test(port), 30)
        finally:
            await server.stop()
    asyncio.run(run())


def client_context(pki, with_certificate: bool) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=pki["ca"])
    if with_certificate:
        context.load_cert_chain(pki["alice"].certificate_path, pki["alice"].key_path)
    return context


async def call(reader, writer, api_key, version, correlation_id, **body):
    writer.write(request_frame(api_key, version, correlation_id, **body))
    answered, response = await read_response(reader, api_key, version)
    assert answered == correlation_id
    return response


def test_ssl_listener_principal_is_the_certificate_subject(pki) -> None:
    seen: list[str] = []

    async def test(port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_context(pki, True),
                                                       server_hostname="localhost")
        await call(reader, writer, METADATA, 1, 1, topics=None)
        writer.close()
    serve_tls(test, "SSL", pki, seen)
    assert seen == ["User:CN=alice"]


def test_ssl_listener_requiring_certificates_refuses_a_client_without_one(pki) -> None:
    seen: list[str] = []

    async def test(port):
        with pytest.raises((ssl.SSLError, ConnectionError, asyncio.IncompleteReadError)):
            reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_context(pki, False),
                                                           server_hostname="localhost")
            writer.write(request_frame(METADATA, 1, 1, topics=None))
            await asyncio.wait_for(reader.readexactly(4), DEADLINE_S)
    serve_tls(test, "SSL", pki, seen)
    assert seen == []


def test_plaintext_client_on_a_tls_listener_gets_no_answer(pki) -> None:
    seen: list[str] = []

    async def test(port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(request_frame(METADATA, 1, 1, topics=None))
        assert await closed_by_server(reader)
        writer.close()
    serve_tls(test, "SSL", pki, seen)
    assert seen == []


def test_sasl_ssl_authenticates_inside_tls_without_a_certificate(pki) -> None:
    seen: list[str] = []

    async def test(port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_context(pki, False),
                                                       server_hostname="localhost")
        assert (await call(reader, writer, SASL_HANDSHAKE, 1, 1, mechanism="PLAIN")).error_code == 0
        answer = await call(reader, writer, SASL_AUTHENTICATE, 1, 2, auth_bytes=b"\0bob\0bob-secret")
        assert answer.error_code == kafka_error(Errors.NONE)
        await call(reader, writer, METADATA, 1, 3, topics=None)
        writer.close()
    serve_tls(test, "SASL_SSL", pki, seen)
    assert seen == ["User:bob"]


def test_a_tls_listener_needs_a_key_store() -> None:
    with pytest.raises(ValueError, match="ssl.keystore.location"):
        ListenerSecurity("SASL_SSL")
