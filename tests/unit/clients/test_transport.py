"""Tests for services.clients.transport's channels: lazily created channels, deadlines, blocking and
asynchronous calls, load counting, the mapping of failed calls to KafkaErrors and health checks,
against in-process fake servers."""

from __future__ import annotations

import threading
from concurrent import futures

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from services.clients.transport import BROKER, CONTROLLER, ERROR_DETAIL_KEY, ChannelPool, check_health
from services.common.clock import ManualClock
from services.common.errors import KafkaError
from services.common.pb.odradek.broker.v1 import broker_pb2
from services.common.pb.odradek.common.v1 import common_pb2
from services.common.pb.odradek.controller.v1 import controller_pb2
from services.devcluster.proc import wait_until

WAIT_S = 10.0


def abort_with_detail(name: str, code: int, message: str):
    def handler(_request, context):
        detail = common_pb2.ErrorDetail(error_code=code, error_name=name, error_message=message)
        context.set_trailing_metadata(((ERROR_DETAIL_KEY, detail.SerializeToString()),))
        context.abort(grpc.StatusCode.FAILED_PRECONDITION, message)

    return handler


def held_until(entered: threading.Event, release: threading.Event, response):
    """A handler that sets `entered`, then answers `response` once `release` is set."""
    def handler(_request, _context):
        entered.set()
        release.wait(WAIT_S)
        return response

    return handler


def test_one_channel_per_target_created_lazily_and_closed(fake_nodes):
    (node,) = fake_nodes(1)
    node.on("Metadata", broker_pb2.MetadataResponse(cluster_id="c"))
    node.on("DescribeCluster", controller_pb2.DescribeClusterResponse(cluster_id="c"))
    pool = ChannelPool()
    assert pool.targets() == []
    assert pool.call(node.address, BROKER, "Metadata", broker_pb2.MetadataRequest()).cluster_id == "c"
    assert pool.call(node.address, CONTROLLER, "DescribeCluster", controller_pb2.DescribeClusterRequest())
    assert pool.channel(node.address) is pool.channel(node.address)
    assert pool.stub(node.address, BROKER) is pool.stub(node.address, BROKER)
    assert pool.targets() == [node.address]
    pool.close()
    assert pool.targets() == []
    with pytest.raises(RuntimeError):
        pool.channel(node.address)


def test_unreachable_target_is_a_retriable_network_exception_and_backs_off():
    clock = ManualClock()
    with ChannelPool(request_timeout_ms=5000, reconnect_backoff_ms=50, clock=clock) as pool:
        with pytest.raises(KafkaError) as raised:
            pool.call("127.0.0.1:1", BROKER, "Metadata", broker_pb2.MetadataRequest())
        assert raised.value.error_name == "NETWORK_EXCEPTION"
        assert raised.value.retriable and raised.value.invalid_metadata
        assert "Metadata to 127.0.0.1:1" in str(raised.value)
        assert pool.is_backing_off("127.0.0.1:1")
        clock.advance(50)
        assert not pool.is_backing_off("127.0.0.1:1")
        assert pool.in_flight("127.0.0.1:1") == 0


def test_deadline_exceeded_is_request_timed_out(fake_nodes):
    (node,) = fake_nodes(1)
    release = threading.Event()
    node.on("Metadata", lambda _r, _c: release.wait(WAIT_S) and broker_pb2.MetadataResponse())
    try:
        with ChannelPool(request_timeout_ms=30000) as pool, pytest.raises(KafkaError) as raised:
            pool.call(node.address, BROKER, "Metadata", broker_pb2.MetadataRequest(), timeout_ms=50)
    finally:
        release.set()
    assert raised.value.error_name == "REQUEST_TIMED_OUT"
    assert raised.value.retriable


def test_calls_in_flight_are_counted_per_target(fake_nodes):
    (node,) = fake_nodes(1)
    entered, release = threading.Event(), threading.Event()
    node.on("Metadata", held_until(entered, release, broker_pb2.MetadataResponse()))
    with ChannelPool() as pool:
        caller = threading.Thread(target=pool.call,
                                  args=(node.address, BROKER, "Metadata", broker_pb2.MetadataRequest()))
        caller.start()
        assert entered.wait(WAIT_S)
        assert pool.in_flight(node.address) == 1
        release.set()
        caller.join(WAIT_S)
        assert pool.in_flight(node.address) == 0


def test_error_detail_in_trailing_metadata_wins_over_the_status(fake_nodes):
    (node,) = fake_nodes(1)
    node.on("CreateTopics", abort_with_detail("NOT_CONTROLLER", 41, "standby"))
    with ChannelPool() as pool, pytest.raises(KafkaError) as raised:
        pool.call(node.address, CONTROLLER, "CreateTopics", controller_pb2.CreateTopicsRequest())
    assert raised.value.error_name == "NOT_CONTROLLER"
    assert raised.value.args[0] == "standby"


@pytest.mark.parametrize("status, name", [
    (grpc.StatusCode.INTERNAL, "UNKNOWN_SERVER_ERROR"),
    (grpc.StatusCode.UNIMPLEMENTED, "UNSUPPORTED_VERSION"),
    (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST"),
    (grpc.StatusCode.UNAVAILABLE, "NETWORK_EXCEPTION"),
])
def test_other_statuses_map_by_code(fake_nodes, status, name):
    (node,) = fake_nodes(1)
    node.on("Metadata", lambda _r, context: context.abort(status, "boom"))
    with ChannelPool() as pool, pytest.raises(KafkaError) as raised:
        pool.call(node.address, BROKER, "Metadata", broker_pb2.MetadataRequest())
    assert raised.value.error_name == name
    assert "boom" in str(raised.value)


def test_call_many_sends_concurrently_and_returns_responses_or_errors(fake_nodes):
    first, second = fake_nodes(2)
    both_in = threading.Barrier(2, timeout=WAIT_S)

    def together(node_id):
        def handler(_request, _context):
            both_in.wait()  # only completes if both calls are in flight at once
            return broker_pb2.MetadataResponse(controller_id=node_id)
        return handler

    first.on("Metadata", together(1))
    second.on("Metadata", together(2))
    request = broker_pb2.MetadataRequest()
    with ChannelPool() as pool:
        results = pool.call_many([
            (first.address, BROKER, "Metadata", request, None),
            (second.address, BROKER, "Metadata", request, None),
            ("127.0.0.1:1", BROKER, "Metadata", request, 5000),
        ])
        assert [r.controller_id for r in results[:2]] == [1, 2]
        assert isinstance(results[2], KafkaError) and results[2].error_name == "NETWORK_EXCEPTION"
        assert pool.in_flight(first.address) == pool.in_flight("127.0.0.1:1") == 0


def test_call_many_of_one_call_returns_its_response_or_error(fake_nodes):
    (node,) = fake_nodes(1)
    node.on("Metadata", broker_pb2.MetadataResponse(controller_id=7))
    request = broker_pb2.MetadataRequest()
    with ChannelPool() as pool:
        (answer,) = pool.call_many([(node.address, BROKER, "Metadata", request, None)])
        (failed,) = pool.call_many([("127.0.0.1:1", BROKER, "Metadata", request, 5000)])
        assert answer.controller_id == 7
        assert isinstance(failed, KafkaError) and failed.error_name == "NETWORK_EXCEPTION"
        assert pool.in_flight(node.address) == pool.in_flight("127.0.0.1:1") == 0


def test_timeouts_default_to_request_timeout():
    pool = ChannelPool(request_timeout_ms=30000)
    assert pool.timeout_s(None) == 30.0
    assert pool.timeout_s(1500) == 1.5
    assert pool.timeout_s(0) == 0.001


def test_a_restarted_server_is_reached_again_within_the_reconnect_backoff_bound(fake_nodes):
    (node,) = fake_nodes(1)
    node.on("Metadata", broker_pb2.MetadataResponse(cluster_id="before"))
    request = broker_pb2.MetadataRequest()
    with ChannelPool(request_timeout_ms=2000, reconnect_backoff_ms=50, reconnect_backoff_max_ms=200) as pool:
        assert pool.call(node.address, BROKER, "Metadata", request).cluster_id == "before"
        node.stop()
        for _ in range(5):  # several failures grow gRPC's reconnect back-off to its bound
            with pytest.raises(KafkaError):
                pool.call(node.address, BROKER, "Metadata", request)
        (restarted,) = fake_nodes(1, port=node.port)
        restarted.on("Metadata", broker_pb2.MetadataResponse(cluster_id="after"))

        def answers_again() -> bool:
            try:
                return pool.call(node.address, BROKER, "Metadata", request).cluster_id == "after"
            except KafkaError:
                return False

        wait_until(answers_again, timeout_s=5.0, interval_s=0.02, message="the restarted server to answer")


def test_send_answers_through_its_callback_and_counts_the_call_until_then(fake_nodes):
    (node,) = fake_nodes(1)
    entered, release = threading.Event(), threading.Event()
    node.on("Metadata", held_until(entered, release, broker_pb2.MetadataResponse(cluster_id="c")))
    answered = threading.Event()
    with ChannelPool() as pool:
        call = pool.send(node.address, BROKER, "Metadata", broker_pb2.MetadataRequest())
        call.add_done_callback(lambda done: answered.set())
        assert entered.wait(WAIT_S)
        assert pool.in_flight(node.address) == 1 and not call.done()
        _response, still_waiting = call.outcome(timeout_s=0.01)
        assert still_waiting.error_name == "REQUEST_TIMED_OUT"
        release.set()
        assert answered.wait(WAIT_S)
        assert call.result().cluster_id == "c"
        assert call.outcome() == (call.result(), None)
        wait_until(lambda: pool.in_flight(node.address) == 0, WAIT_S, 0.01, message="the call to be settled")


def test_a_failed_send_is_mapped_and_backs_the_target_off():
    clock = ManualClock()
    with ChannelPool(request_timeout_ms=5000, reconnect_backoff_ms=50, clock=clock) as pool:
        call = pool.send("127.0.0.1:1", BROKER, "Metadata", broker_pb2.MetadataRequest())
        response, error = call.outcome()
        assert response is None and error.error_name == "NETWORK_EXCEPTION"
        assert "Metadata to 127.0.0.1:1" in str(error)
        with pytest.raises(KafkaError):
            call.result()
        assert pool.is_backing_off("127.0.0.1:1")
        assert pool.in_flight("127.0.0.1:1") == 0


def test_a_cancelled_send_is_a_network_exception(fake_nodes):
    (node,) = fake_nodes(1)
    release = threading.Event()
    node.on("Metadata", lambda _r, _c: release.wait(WAIT_S) and broker_pb2.MetadataResponse())
    try:
        with ChannelPool() as pool:
            call = pool.send(node.address, BROKER, "Metadata", broker_pb2.MetadataRequest())
            call.cancel()
            _response, error = call.outcome()
            assert error.error_name == "NETWORK_EXCEPTION" and "cancelled" in str(error)
            assert pool.in_flight(node.address) == 0
    finally:
        release.set()


def test_send_on_a_closed_pool_raises():
    pool = ChannelPool()
    pool.close()
    with pytest.raises(RuntimeError):
        pool.send("127.0.0.1:1", BROKER, "Metadata", broker_pb2.MetadataRequest())


def test_check_health_is_true_only_for_a_serving_health_service(fake_nodes):
    (node,) = fake_nodes(1)  # a server without a health service
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        servicer.set("", health_pb2.HealthCheckResponse.SERVING)
        assert check_health(f"127.0.0.1:{port}")
        servicer.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
        assert not check_health(f"127.0.0.1:{port}")
        assert not check_health(node.address)
        assert not check_health("127.0.0.1:1", timeout_ms=200)
    finally:
        server.stop(None)
