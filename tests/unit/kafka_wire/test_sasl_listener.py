"""A SASL_PLAINTEXT Kafka listener on its own: PLAIN through SaslHandshake v1 and SaslAuthenticate,
and through SaslHandshake v0's bare tokens; SCRAM-SHA-256; the requests refused before
authentication; a second handshake; the principal handlers see; and the forwarder's PLAIN login."""

from __future__ import annotations

import asyncio

from scramp import ScramClient

from services.common.errors import Errors
from services.common.kafka_wire import ApiRegistry, fields_of, kafka_error
from services.common.kafka_wire.forwarding import BrokerForwarder
from services.common.kafka_wire.framing import encode_frame
from services.common.kafka_wire.security import ListenerSecurity
from services.common.security.sasl import make_scram_credential
from tests.kafka_wire_support import request_frame
from tests.unit.kafka_wire.test_kafka_wire import DEADLINE_S, METADATA, closed_by_server, read_response, serve

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
SCRAM = {"carol": make_scram_credential("SCRAM-SHA-256", "carol-secret")}
SECURITY = ListenerSecurity("SASL_PLAINTEXT", plain_passwords={"alice": "alice-secret"},
                            scram_credentials=lambda user, mechanism: SCRAM.get(user) if mechanism == "SCRAM-SHA-256"
                            else None)


def registry_seeing_principals(seen: list[str]) -> ApiRegistry:
    registry = ApiRegistry()

    async def metadata(request, context):
        seen.append(context.access.principal)
        return fields_of(context.response_type, brokers=(), topics=(), cluster_id="unit", controller_id=-1)
    registry.register(METADATA, 0, 12, metadata)
    return registry


async def call(reader, writer, api_key: int, version: int, correlation_id: int, **body):
    writer.write(request_frame(api_key, version, correlation_id, **body))
    answered, response = await read_response(reader, api_key, version)
    assert answered == correlation_id
    return response


async def metadata(reader, writer, correlation_id: int):
    return await call(reader, writer, METADATA, 1, correlation_id, topics=None)


def test_plain_then_requests_as_the_user() -> None:
    seen: list[str] = []

    async def test(server, connect) -> None:
        reader, writer = await connect()
        handshake = await call(reader, writer, SASL_HANDSHAKE, 1, 1, mechanism="PLAIN")
        assert handshake.error_code == kafka_error(Errors.NONE)
        assert tuple(handshake.mechanisms) == ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
        answer = await call(reader, writer, SASL_AUTHENTICATE, 1, 2, auth_bytes=b"\0alice\0alice-secret")
        assert answer.error_code == kafka_error(Errors.NONE)
        await metadata(reader, writer, 3)
        again = await call(reader, writer, SASL_HANDSHAKE, 1, 4, mechanism="PLAIN")
        assert again.error_code == kafka_error(Errors.ILLEGAL_SASL_STATE) and await closed_by_server(reader)

        reader, writer = await connect()  # SaslHandshake v0: the token travels bare
        await call(reader, writer, SASL_HANDSHAKE, 0, 1, mechanism="PLAIN")
        writer.write(encode_frame(b"\0alice\0alice-secret"))
        assert await asyncio.wait_for(reader.readexactly(4), DEADLINE_S) == b"\0\0\0\0"  # an empty token
        await metadata(reader, writer, 2)

        reader, writer = await connect()
        await call(reader, writer, SASL_HANDSHAKE, 0, 1, mechanism="PLAIN")
        writer.write(encode_frame(b"\0alice\0wrong"))
        assert await closed_by_server(reader)
    serve(test, registry_seeing_principals(seen), security=SECURITY)
    assert seen == ["User:alice", "User:alice"]


def test_refusals_before_authentication() -> None:
    async def test(server, connect) -> None:
        reader, writer = await connect()
        writer.write(request_frame(METADATA, 1, 1, topics=None))
        assert await closed_by_server(reader)

        reader, writer = await connect()
        unknown = await call(reader, writer, SASL_HANDSHAKE, 1, 1, mechanism="GSSAPI")
        assert unknown.error_code == kafka_error(Errors.UNSUPPORTED_SASL_MECHANISM) and await closed_by_server(reader)

        reader, writer = await connect()
        await call(reader, writer, SASL_HANDSHAKE, 1, 1, mechanism="PLAIN")
        wrong = await call(reader, writer, SASL_AUTHENTICATE, 2, 2, auth_bytes=b"\0alice\0nope")
        assert wrong.error_code == kafka_error(Errors.SASL_AUTHENTICATION_FAILED) and wrong.error_message
        assert await closed_by_server(reader)
    serve(test, registry_seeing_principals([]), security=SECURITY)


def test_scram_sha_256() -> None:
    seen: list[str] = []

    async def test(server, connect) -> None:
        reader, writer = await connect()
        await call(reader, writer, SASL_HANDSHAKE, 1, 1, mechanism="SCRAM-SHA-256")
        client = ScramClient(["SCRAM-SHA-256"], "carol", "carol-secret")
        first = await call(reader, writer, SASL_AUTHENTICATE, 2, 2, auth_bytes=client.get_client_first().encode())
        client.set_server_first(first.auth_bytes.decode())
        final = await call(reader, writer, SASL_AUTHENTICATE, 2, 3, auth_bytes=client.get_client_final().encode())
        assert final.error_code == kafka_error(Errors.NONE)
        client.set_server_final(final.auth_bytes.decode())  # the server proved it knows the credential
        await metadata(reader, writer, 4)
    serve(test, registry_seeing_principals(seen), security=SECURITY)
    assert seen == ["User:carol"]


def test_the_forwarder_logs_in_with_plain() -> None:
    seen: list[str] = []

    async def test(server, connect) -> None:
        async def endpoints():
            return [("127.0.0.1", server.port)]
        forwarder = BrokerForwarder(endpoints, request_timeout_s=DEADLINE_S, sasl_login=("alice", "alice-secret"))
        try:
            answer = await forwarder.forward(request_frame(METADATA, 1, 7, topics=None)[4:])
            assert answer[:4] == (7).to_bytes(4, "big")
            refused = BrokerForwarder(endpoints, request_timeout_s=DEADLINE_S, sasl_login=("alice", "wrong"))
            try:
                await refused.forward(request_frame(METADATA, 1, 8, topics=None)[4:])
                raise AssertionError("a wrong password was let through")
            except Exception as exc:  # NoBrokerAnswered, naming the refusal
                assert "SASL" in str(exc)
            finally:
                await refused.close()
        finally:
            await forwarder.close()
    serve(test, registry_seeing_principals(seen), security=SECURITY)
    assert seen == ["User:alice"]
