"""A node's forwarding to a broker (`BrokerForwarder` behind `ApiRegistry.forward_others`), against
a small broker: a Kafka listener of its own in the test, recording what reaches it. ApiVersions
advertises the node's APIs plus the broker's others; forwarded frames reach the broker unchanged
and its answers come back to their own requests; a broker that closed an idle connection is asked
again on a fresh one; with no broker to answer, the client's connection is closed."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from services.common.errors import Errors
from services.common.kafka_wire import ApiRegistry, KafkaWireServer, fields_of, kafka_error
from services.common.kafka_wire.forwarding import BrokerForwarder, NoBrokerAnswered
from tests.kafka_wire_support import request_frame
from tests.unit.kafka_wire.test_kafka_wire import closed_by_server, read_response

PRODUCE, METADATA, HEARTBEAT, API_VERSIONS, CREATE_TOPICS = 0, 3, 12, 18, 19


def metadata_request(version: int, correlation_id: int) -> bytes:
    return request_frame(METADATA, version, correlation_id, topics=None, allow_auto_topic_creation=False,
                         include_cluster_authorized_operations=False, include_topic_authorized_operations=False)


class Broker:
    """A Kafka listener serving Metadata 4-12 (answering with its name as cluster id, after
    `delays_s[correlation id]` or, when `gate` is set, once it opens), Produce 3-9, Heartbeat
    0-4 and CreateTopics 2-7; `seen` holds (api key, version, correlation id, client id) of each
    request it was sent."""

    def __init__(self, name: str, delays_s: dict[int, float] | None = None) -> None:
        self.name = name
        self.delays_s = delays_s or {}
        self.gate: asyncio.Event | None = None
        self.seen: list[tuple[int, int, int, str | None]] = []
        registry = ApiRegistry()
        registry.register(METADATA, 4, 12, self._metadata)
        for key, low, high in ((PRODUCE, 3, 9), (HEARTBEAT, 0, 4), (CREATE_TOPICS, 2, 7)):
            registry.register(key, low, high, self._unexpected)
        self.server = KafkaWireServer(registry, "127.0.0.1", 0)
        self.port = -1

    async def start(self) -> Broker:
        self.port = await self.server.start()
        return self

    async def _metadata(self, request, context):
        self.seen.append((context.api_key, context.api_version, context.correlation_id, context.client_id))
        if self.gate is not None:
            await self.gate.wait()
        await asyncio.sleep(self.delays_s.get(context.correlation_id, 0))
        return fields_of(context.response_type, brokers=(), topics=(), cluster_id=self.name, controller_id=-1)

    async def _unexpected(self, request, context):
        raise AssertionError(f"API {context.api_key} reached the broker")


def node_registry(forwarder: BrokerForwarder) -> ApiRegistry:
    """A node serving Heartbeat 0-2 itself and forwarding the rest, but Produce."""
    registry = ApiRegistry()

    async def heartbeat(request, context):
        return fields_of(context.response_type, error_code=kafka_error(Errors.NONE))
    registry.register(HEARTBEAT, 0, 2, heartbeat)
    registry.forward_others(forwarder, frozenset({PRODUCE}))
    return registry


def run(test, brokers: list[Broker], **forwarder_args) -> None:
    """Runs `test(node, connect, forwarder)` against a node forwarding to `brokers` (the list the
    forwarder asks, so a test may change it); stops every listener whatever happens."""
    async def main():
        for broker in brokers:
            await broker.start()

        async def endpoints():
            return [("127.0.0.1", broker.port) for broker in brokers]
        forwarder = BrokerForwarder(endpoints, **forwarder_args)
        node = KafkaWireServer(node_registry(forwarder), "127.0.0.1", 0)
        port = await node.start()
        opened = []

        async def connect():
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            opened.append(writer)
            return reader, writer
        try:
            await asyncio.wait_for(test(node, connect, forwarder), 30)
        finally:
            for writer in opened:
                writer.close()
            await node.stop()
            await forwarder.close()
            for broker in brokers:
                await broker.server.stop()
    asyncio.run(main())


def test_api_versions_advertises_the_nodes_apis_and_the_brokers_others():
    async def test(node, connect, forwarder):
        reader, writer = await connect()
        writer.write(request_frame(API_VERSIONS, 3, 5, client_software_name="unit", client_software_version="1"))
        correlation_id, body = await read_response(reader, API_VERSIONS, 3)
        assert correlation_id == 5 and body.error_code == kafka_error(Errors.NONE)
        # Heartbeat at the node's own versions, not the broker's; Produce not at all
        assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [
            (METADATA, 4, 12), (HEARTBEAT, 0, 2), (API_VERSIONS, 0, 3), (CREATE_TOPICS, 2, 7)]
        assert await forwarder.versions() == {METADATA: (4, 12), PRODUCE: (3, 9), HEARTBEAT: (0, 4),
                                              API_VERSIONS: (0, 3), CREATE_TOPICS: (2, 7)}
    run(test, [Broker("broker")])


def test_a_forwarded_request_reaches_the_broker_unchanged_and_its_answer_comes_back():
    broker = Broker("broker")

    async def test(node, connect, forwarder):
        reader, writer = await connect()
        writer.write(metadata_request(12, 41))
        correlation_id, body = await read_response(reader, METADATA, 12)
        assert correlation_id == 41 and body.cluster_id == "broker"
        # the client's own header: its version, correlation id and client id
        assert broker.seen[-1] == (METADATA, 12, 41, "odradek-tests")
    run(test, [broker])


def test_answers_of_concurrent_forwarded_requests_do_not_cross():
    # earlier requests take longest, so the broker answers them last
    broker = Broker("broker", delays_s={i: 0.02 * (20 - i) for i in range(20)})

    async def ask(connect, correlation_ids: range) -> list[int]:
        reader, writer = await connect()
        writer.write(b"".join(metadata_request(9, i) for i in correlation_ids))
        return [(await read_response(reader, METADATA, 9))[0] for _ in correlation_ids]

    async def test(node, connect, forwarder):
        answered = await asyncio.gather(*(ask(connect, range(start, start + 4)) for start in range(0, 20, 4)))
        assert answered == [list(range(start, start + 4)) for start in range(0, 20, 4)]
    run(test, [broker])


def test_an_idle_connection_the_broker_closed_is_replaced():
    first, second = Broker("first"), Broker("second")
    brokers = [first]

    async def test(node, connect, forwarder):
        reader, writer = await connect()
        writer.write(metadata_request(12, 1))
        assert (await read_response(reader, METADATA, 12))[1].cluster_id == "first"
        await first.server.stop()  # closes the forwarder's idle connection
        await second.start()
        brokers[:] = [second]
        writer.write(metadata_request(12, 2))
        correlation_id, body = await read_response(reader, METADATA, 12)
        assert (correlation_id, body.cluster_id) == (2, "second")
    run(test, brokers)


def test_a_request_not_forwarded_closes_its_connection():
    broker = Broker("broker")

    async def test(node, connect, forwarder):
        reader, writer = await connect()
        writer.write(request_frame(PRODUCE, 9, 1, transactional_id=None, acks=1, timeout=timedelta(seconds=1),
                                   topic_data=()))
        assert await closed_by_server(reader)
        assert broker.seen == []
    run(test, [broker])


def test_with_no_broker_the_node_answers_its_own_apis_and_closes_forwarded_requests():
    broker = Broker("gone")

    async def test(node, connect, forwarder):
        await broker.server.stop()
        assert await forwarder.versions() == {}
        reader, writer = await connect()
        writer.write(request_frame(API_VERSIONS, 3, 1, client_software_name="unit", client_software_version="1"))
        _, body = await read_response(reader, API_VERSIONS, 3)
        assert [k.api_key for k in body.api_keys] == [HEARTBEAT, API_VERSIONS]
        writer.write(metadata_request(12, 2))
        assert await closed_by_server(reader)
    run(test, [broker])


def test_a_request_the_broker_does_not_answer_in_time_is_not_sent_again():
    broker = Broker("slow")

    async def test(node, connect, forwarder):
        assert METADATA in await forwarder.versions()
        broker.gate = asyncio.Event()  # Metadata waits from now on
        with pytest.raises(NoBrokerAnswered):
            await forwarder.forward(metadata_request(12, 3)[4:])
        assert [seen[2] for seen in broker.seen if seen[0] == METADATA] == [3]  # sent once, not again
        reader, writer = await connect()
        writer.write(metadata_request(12, 4))
        assert await closed_by_server(reader)
        broker.gate.set()
    run(test, [broker], request_timeout_s=0.3)


def test_forward_answers_the_broker_frame_to_that_very_request():
    broker = Broker("broker")

    async def test(node, connect, forwarder):
        frame = metadata_request(12, 77)
        answer = await forwarder.forward(frame[4:])
        assert int.from_bytes(answer[:4], "big") == 77  # the broker's answer to that very request
    run(test, [broker])
