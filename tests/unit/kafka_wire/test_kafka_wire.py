"""The Kafka listener on its own: framing, headers, the dispatch registry and ApiVersions, and the
connections it closes (each alone) for frames that break the protocol."""

from __future__ import annotations

import asyncio
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.common.errors import Errors
from services.common.kafka_wire import ApiRegistry, KafkaWireServer, fields_of, kafka_error
from services.common.kafka_wire.codec import MalformedRequest, api_schema
from services.common.kafka_wire.framing import FrameError, encode_frame, read_frame
from services.common.kafka_wire.server import ConnectionClosing
from tests.kafka_wire_support import decode_response, request_frame

API_VERSIONS = 18
METADATA = 3
DEADLINE_S = 5.0


async def read_response(reader: asyncio.StreamReader, api_key: int, version: int):
    """(correlation id, response body) of the next response."""
    (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), DEADLINE_S))
    return decode_response(api_key, version, await asyncio.wait_for(reader.readexactly(size), DEADLINE_S))


async def closed_by_server(reader: asyncio.StreamReader) -> bool:
    """True when the server closes the connection (end of stream) before the deadline."""
    try:
        return await asyncio.wait_for(reader.read(), DEADLINE_S) == b""
    except ConnectionError:
        return True


def metadata_handler(delays_s: dict[int, float] | None = None, gate: asyncio.Event | None = None):
    """A Metadata handler answering with no brokers; waits `delays_s[correlation id]` or on `gate`."""
    async def handle(request, context):
        if gate is not None:
            await gate.wait()
        await asyncio.sleep((delays_s or {}).get(context.correlation_id, 0))
        return fields_of(context.response_type, brokers=(), topics=(), cluster_id="unit", controller_id=-1)
    return handle


def serve(test, registry: ApiRegistry | None = None, **server_args):
    """Runs `test(server, connect)` against a listener on a free port; stops it whatever happens."""
    async def run():
        server = KafkaWireServer(registry or ApiRegistry(), "127.0.0.1", 0, **server_args)
        port = await server.start()
        opened = []

        async def connect():
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            opened.append(writer)
            return reader, writer
        try:
            await asyncio.wait_for(test(server, connect), 30)
        finally:
            for writer in opened:
                writer.close()
            await server.stop()
    asyncio.run(run())


async def api_versions_works(connect) -> None:
    reader, writer = await connect()
    writer.write(request_frame(API_VERSIONS, 3, 99, client_software_name="unit", client_software_version="1"))
    correlation_id, body = await read_response(reader, API_VERSIONS, 3)
    assert correlation_id == 99 and body.error_code == kafka_error(Errors.NONE)


def test_api_versions_advertises_exactly_the_registered_apis():
    registry = ApiRegistry()
    registry.register(METADATA, 4, 12, metadata_handler())

    async def test(server, connect):
        reader, writer = await connect()
        for version in (0, 1, 2, 3):
            writer.write(request_frame(API_VERSIONS, version, version, client_software_name="unit",
                                       client_software_version="1"))
            correlation_id, body = await read_response(reader, API_VERSIONS, version)
            assert correlation_id == version
            assert body.error_code == kafka_error(Errors.NONE)
            assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [(3, 4, 12), (18, 0, 3)]
    serve(test, registry)


def test_api_versions_of_an_unsupported_version_is_answered_with_the_v0_body():
    async def test(server, connect):
        reader, writer = await connect()
        frame = bytearray(request_frame(API_VERSIONS, 3, 7, client_software_name="unit",
                                        client_software_version="1"))
        frame[6:8] = struct.pack(">h", 9)  # a version from the future, body unreadable to us
        writer.write(bytes(frame))
        correlation_id, body = await read_response(reader, API_VERSIONS, 0)
        assert correlation_id == 7
        assert body.error_code == kafka_error(Errors.UNSUPPORTED_VERSION)
        assert [k.api_key for k in body.api_keys] == [18]
        await api_versions_works(lambda: asyncio.sleep(0, (reader, writer)))  # the connection stays
    serve(test)


def test_pipelined_requests_are_answered_in_order():
    registry = ApiRegistry()
    # the first request takes longest: answers must still come in the order asked
    registry.register(METADATA, 9, 9, metadata_handler({1: 0.3, 2: 0.1, 3: 0.0}))

    async def test(server, connect):
        reader, writer = await connect()
        writer.write(b"".join(request_frame(METADATA, 9, i, topics=None, allow_auto_topic_creation=False,
                                            include_cluster_authorized_operations=False,
                                            include_topic_authorized_operations=False) for i in (1, 2, 3)))
        writer.write(request_frame(API_VERSIONS, 3, 4, client_software_name="u", client_software_version="1"))
        order = [(await read_response(reader, METADATA, 9))[0] for _ in range(3)]
        order.append((await read_response(reader, API_VERSIONS, 3))[0])
        assert order == [1, 2, 3, 4]
    serve(test, registry)


def test_a_waiting_handler_holds_up_only_its_own_connection():
    gate = asyncio.Event
    registry = ApiRegistry()
    holder = {}

    async def handle(request, context):
        await holder["gate"].wait()
        return fields_of(context.response_type, brokers=(), topics=(), cluster_id="unit", controller_id=-1)
    registry.register(METADATA, 9, 9, handle)

    async def test(server, connect):
        holder["gate"] = gate()
        reader, writer = await connect()
        writer.write(request_frame(METADATA, 9, 1, topics=None, allow_auto_topic_creation=False,
                                   include_cluster_authorized_operations=False,
                                   include_topic_authorized_operations=False))
        for _ in range(3):  # other connections are answered while the first one waits
            await api_versions_works(connect)
        holder["gate"].set()
        assert (await read_response(reader, METADATA, 9))[0] == 1
    serve(test, registry)


def test_a_handler_answering_none_sends_nothing():
    registry = ApiRegistry()

    async def handle(request, context):
        return None
    registry.register(METADATA, 9, 9, handle)

    async def test(server, connect):
        reader, writer = await connect()
        writer.write(request_frame(METADATA, 9, 1, topics=None, allow_auto_topic_creation=False,
                                   include_cluster_authorized_operations=False,
                                   include_topic_authorized_operations=False))
        writer.write(request_frame(API_VERSIONS, 3, 2, client_software_name="u", client_software_version="1"))
        assert (await read_response(reader, API_VERSIONS, 3))[0] == 2
    serve(test, registry)


def _api_versions_v3_frame() -> bytes:
    return request_frame(API_VERSIONS, 3, 1, client_software_name="u", client_software_version="1")


BAD_FRAMES = {
    # the size prefix promises more than ever comes, then the client stops sending
    "truncated": struct.pack(">i", 100) + b"\x00\x12\x00\x03",
    "oversized": struct.pack(">i", 1025) + b"\x00" * 16,
    "negative size": struct.pack(">i", -5),
    "garbage": encode_frame(b"\x00\x12\x00\x03\xff\xff\xff\xff\x7f\x7f\x7f"),
    "too short for a header": encode_frame(b"\x00"),
    "unknown API key": encode_frame(b"\x7f\x00\x00\x00" + _api_versions_v3_frame()[8:]),
    "unsupported version": encode_frame(b"\x00\x03\x00\x63" + _api_versions_v3_frame()[8:]),
    "API not served": encode_frame(b"\x00\x00\x00\x09" + _api_versions_v3_frame()[8:]),
}


@pytest.mark.parametrize("name", sorted(BAD_FRAMES))
def test_a_bad_frame_closes_its_connection_and_no_other(name):
    registry = ApiRegistry()
    registry.register(METADATA, 9, 9, metadata_handler())

    async def test(server, connect):
        bystander = await connect()
        await api_versions_works(lambda: asyncio.sleep(0, bystander))
        reader, writer = await connect()
        writer.write(BAD_FRAMES[name])
        if name == "truncated":
            writer.write_eof()
        assert await closed_by_server(reader)
        await api_versions_works(lambda: asyncio.sleep(0, bystander))  # the other one goes on
        await api_versions_works(connect)  # and new ones are served
    serve(test, registry, request_max_bytes=1024)


def test_a_size_prefix_above_the_maximum_closes_without_reading_the_payload():
    async def test(server, connect):
        reader, writer = await connect()
        writer.write(struct.pack(">i", 104857601))  # socket.request.max.bytes + 1, nothing after it
        assert await closed_by_server(reader)
    serve(test)


def test_many_connections_are_served_at_once():
    async def test(server, connect):
        await asyncio.gather(*(api_versions_works(connect) for _ in range(50)))
    serve(test)


# ------------------------------------------------------------------ fuzzing

FRAMES = st.lists(st.binary(max_size=64), max_size=8)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frames=FRAMES, tail=st.binary(max_size=12))
def test_the_frame_reader_returns_every_whole_frame_then_rejects_or_ends_cleanly(frames, tail):
    async def run():
        reader = asyncio.StreamReader()
        reader.feed_data(b"".join(encode_frame(f) for f in frames) + tail)
        reader.feed_eof()
        read = []
        try:
            while (frame := await read_frame(reader, 64)) is not None:
                read.append(frame)
        except FrameError:
            assert tail, "whole frames alone never raise"
        assert read[:len(frames)] == frames
    asyncio.run(run())


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200))
def test_the_frame_reader_on_arbitrary_bytes_yields_frames_or_a_frame_error(data):
    async def run():
        reader = asyncio.StreamReader()
        reader.feed_data(data)
        reader.feed_eof()
        consumed = 0
        try:
            while (frame := await read_frame(reader, 64)) is not None:
                consumed += 4 + len(frame)
                assert len(frame) <= 64
        except FrameError:
            return
        assert consumed == len(data)
    asyncio.run(run())


@settings(max_examples=300, deadline=None)
@given(body=st.binary(max_size=80), version=st.integers(0, 3))
def test_an_arbitrary_request_body_decodes_or_is_refused_as_malformed(body, version):
    server = KafkaWireServer(ApiRegistry(), "127.0.0.1", 0)
    frame = struct.pack(">hhi", API_VERSIONS, version, 1) + body

    async def run():
        try:
            response = await server._handle(frame, "fuzz")
        except (MalformedRequest, ConnectionClosing):
            return
        assert response[:4] == struct.pack(">i", 1)
    asyncio.run(run())


def test_registering_a_version_without_generated_types_is_refused():
    with pytest.raises(LookupError):
        ApiRegistry().register(METADATA, 0, 99, metadata_handler())
    assert api_schema(METADATA, 12).request_type.__name__ == "MetadataRequest"
