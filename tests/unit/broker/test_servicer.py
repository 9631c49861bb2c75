"""The broker's gRPC servicer on the shared runtime: parked produces and fetches hold no thread,
complete from another thread, and beyond `parked.max.requests` are refused at once."""

from __future__ import annotations

import threading

import pytest

from services.broker.fetch_session_cache import FetchSessionCache
from services.broker.metadata_cache import MetadataCache
from services.broker.replica_fetch import FetchParams, LogReadResult
from services.broker.servicer import INLINE_APPEND_MAX_BYTES, BrokerServicer
from services.common.clock import SYSTEM_CLOCK
from services.common.errors import Errors
from services.common.pb.odradek.broker.v1 import broker_pb2, broker_pb2_grpc
from services.common.shared_types import ProduceResult
from services.devcluster.proc import wait_until
from tests.unit.runtime_support import Parked, serving

LIMIT = 3


class ParkingReplicaManager(Parked):
    """Holds every produce and fetch until the test answers it."""

    fetch_sessions = FetchSessionCache()
    clock = SYSTEM_CLOCK

    def fetch_messages(self, params, respond) -> None:
        self.hold(params, respond)

    def append_records(self, acks, timeout_ms, entries, respond, internal_topics_allowed=False, origin=None) -> None:
        self.appended_on = threading.current_thread().name
        self.hold(entries, respond)

    def answer(self) -> None:
        self.answer_all(lambda request: {(p.topic, p.partition): LogReadResult(0, 42) for p in request.partitions}
                        if isinstance(request, FetchParams) else {key: ProduceResult(7, 0) for key in request})


@pytest.fixture
def broker():
    manager = ParkingReplicaManager()
    servicer = BrokerServicer(1, manager, MetadataCache(), fetch_max_bytes=1 << 20, parked_max_requests=LIMIT)
    with serving(broker_pb2_grpc.add_BrokerServiceServicer_to_server, servicer) as channel:
        yield manager, broker_pb2_grpc.BrokerServiceStub(channel)


def fetch_request(replica_id: int = -1) -> broker_pb2.FetchRequest:
    request = broker_pb2.FetchRequest(replica_id=replica_id, max_wait_ms=30000, min_bytes=1)
    request.topics.add(topic="idle").partitions.add(partition=0, fetch_offset=0, partition_max_bytes=1024)
    return request


def produce_request(records: bytes = b"") -> broker_pb2.ProduceRequest:
    request = broker_pb2.ProduceRequest(acks=-1, timeout_ms=30000)
    request.topic_data.add(name="t").partition_data.add(index=0, records=records)
    return request


def test_parked_requests_hold_no_thread_and_complete_from_another_thread(broker):
    manager, stub = broker
    parked = [stub.Fetch.future(fetch_request(), timeout=30) for _ in range(LIMIT - 1)]
    parked.append(stub.Produce.future(produce_request(), timeout=30))
    wait_until(lambda: len(manager) == LIMIT, 10, 0.01, message="the requests to park")
    # the executor has one thread; a call that runs there is still answered
    assert stub.Metadata(broker_pb2.MetadataRequest(), timeout=10).controller_id == -1
    threading.Thread(target=manager.answer).start()
    fetched = [future.result(timeout=10) for future in parked[:-1]]
    assert [r.responses[0].partitions[0].high_watermark for r in fetched] == [42] * (LIMIT - 1)
    produced = parked[-1].result(timeout=10).responses[0].partition_responses[0]
    assert (produced.error_code, produced.base_offset) == (0, 7)


def test_requests_beyond_the_limit_are_refused_at_once(broker):
    manager, stub = broker
    parked = [stub.Fetch.future(fetch_request(), timeout=30) for _ in range(LIMIT)]
    wait_until(lambda: len(manager) == LIMIT, 10, 0.01, message="the fetches to park")
    refused = stub.Fetch(fetch_request(), timeout=10)
    assert refused.error_code == Errors.THROTTLING_QUOTA_EXCEEDED and "parked.max.requests=3" in refused.error_message
    partition = stub.Produce(produce_request(), timeout=10).responses[0].partition_responses[0]
    assert partition.error_code == Errors.THROTTLING_QUOTA_EXCEEDED
    follower = stub.Fetch.future(fetch_request(replica_id=2), timeout=30)
    wait_until(lambda: len(manager) == LIMIT + 1, 10, 0.01, message="the follower's fetch to park")
    manager.answer()
    assert all(future.result(timeout=10).error_code == 0 for future in parked + [follower])
    admitted = stub.Fetch.future(fetch_request(), timeout=30)
    wait_until(lambda: len(manager) == 1, 10, 0.01, message="a fetch to park again")
    manager.answer()
    assert admitted.result(timeout=10).error_code == 0


def test_small_appends_run_on_the_loop_and_large_ones_in_the_executor(broker):
    manager, stub = broker
    for records, thread_prefix in ((b"x" * INLINE_APPEND_MAX_BYTES, "servicer-test-rpc-loop"),
                                   (b"x" * (INLINE_APPEND_MAX_BYTES + 1), "servicer-test-rpc_")):
        produced = stub.Produce.future(produce_request(records), timeout=30)
        wait_until(lambda: len(manager) == 1, 10, 0.01, message="the produce to park")
        assert manager.appended_on.startswith(thread_prefix)
        manager.answer()
        assert produced.result(timeout=10).responses[0].partition_responses[0].error_code == 0
