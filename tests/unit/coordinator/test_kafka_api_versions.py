"""The coordinator's Kafka listener advertises, in ApiVersions, its own group APIs, FindCoordinator
and DescribeLogDirs at its own versions plus the APIs a broker serves that it forwards there, never
Produce or Fetch; a forwarded request is answered by the broker, DescribeLogDirs by the coordinator
(no log directory)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from services.common.clock import SYSTEM_CLOCK
from services.common.errors import Errors
from services.common.kafka_wire import ApiRegistry, KafkaWireServer, kafka_error
from services.common.kafka_wire.forwarding import BrokerForwarder
from services.common.zk.coordinator_directory import DirectorySnapshot
from services.coordinator.kafka_api import NOT_FORWARDED, CoordinatorKafkaApis
from services.coordinator.kafka_api.groups import API_VERSIONS as GROUP_API_VERSIONS
from services.coordinator.kafka_api.groups import OFFSET_COMMIT
from tests.kafka_wire_support import request_frame
from tests.unit.kafka_wire.test_forwarding import METADATA, Broker, metadata_request
from tests.unit.kafka_wire.test_kafka_wire import read_response

PRODUCE, FETCH, FIND_COORDINATOR, API_VERSIONS, CREATE_TOPICS, DESCRIBE_LOG_DIRS = 0, 1, 10, 18, 19, 35


def test_a_coordinator_advertises_its_own_apis_and_the_ones_a_broker_answers_for_it():
    async def main():
        broker = Broker("broker")
        for key, low, high in ((FETCH, 4, 12), (DESCRIBE_LOG_DIRS, 1, 3), (OFFSET_COMMIT, 2, 9)):
            broker.server.registry.register(key, low, high, broker._unexpected)
        await broker.start()

        async def endpoints():
            return [("127.0.0.1", broker.port)]
        forwarder = BrokerForwarder(endpoints)
        registry = ApiRegistry()
        servicer = SimpleNamespace(groups=None, clock=SYSTEM_CLOCK, transactions=None)
        CoordinatorKafkaApis(servicer, DirectorySnapshot).register(registry)
        registry.forward_others(forwarder, NOT_FORWARDED)
        coordinator = KafkaWireServer(registry, "127.0.0.1", 0)
        port = await coordinator.start()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(request_frame(API_VERSIONS, 3, 1, client_software_name="unit", client_software_version="1"))
            _, body = await read_response(reader, API_VERSIONS, 3)
            assert body.error_code == kafka_error(Errors.NONE)
            advertised = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
            assert GROUP_API_VERSIONS.items() <= advertised.items()  # OffsetCommit 2-8, not the broker's 2-9
            assert advertised[FIND_COORDINATOR] == (0, 4) and advertised[API_VERSIONS] == (0, 3)
            assert advertised[METADATA] == (4, 12) and advertised[CREATE_TOPICS] == (2, 7)
            assert advertised[DESCRIBE_LOG_DIRS] == (1, 4)  # its own, not the broker's 1-3
            assert not {PRODUCE, FETCH} & advertised.keys()

            writer.write(metadata_request(12, 2))
            correlation_id, metadata = await read_response(reader, METADATA, 12)
            assert (correlation_id, metadata.cluster_id) == (2, "broker")
            writer.write(request_frame(DESCRIBE_LOG_DIRS, 4, 3, topics=None))
            correlation_id, log_dirs = await read_response(reader, DESCRIBE_LOG_DIRS, 4)
            assert (correlation_id, log_dirs.error_code, log_dirs.results) == (3, kafka_error(Errors.NONE), ())
        finally:
            writer.close()
            await coordinator.stop()
            await forwarder.close()
            await broker.server.stop()
    asyncio.run(asyncio.wait_for(main(), 30))
