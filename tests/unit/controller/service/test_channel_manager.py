"""ControllerChannelManager with in-test broker stubs: one sender per live broker, retry while a
broker is unavailable, answers handed back, senders following the live brokers."""

from __future__ import annotations

import threading

import grpc

from services.common.pb.odradek.broker.v1 import broker_pb2
from services.common.pb.odradek.common.v1 import common_pb2
from services.common.shared_types import BrokerInfo, EndPoint
from services.common.topic_partition import TopicPartition
from services.controller.channel_manager import ControllerChannelManager
from services.controller.state.effects import SendStopReplica, SendUpdateMetadata, StopReplicaPartition
from services.devcluster.proc import wait_until

CONTROLLER = common_pb2.Node(node_id=1001, host="ctl", port=9093)


def broker(broker_id: int, epoch: int = 10) -> BrokerInfo:
    return BrokerInfo(broker_id, (EndPoint(f"b{broker_id}", 9092),), None, epoch)


class Unavailable(grpc.RpcError):
    def code(self):
        return grpc.StatusCode.UNAVAILABLE


class Stub:
    """A BrokerService stub that fails UNAVAILABLE `failures` times, then answers."""

    def __init__(self, address: str, failures: int) -> None:
        self.address = address
        self.failures = failures
        self.received: list = []
        self.closed = False

    def UpdateMetadata(self, request, timeout):
        if self.failures:
            self.failures -= 1
            raise Unavailable()
        self.received.append(request)
        return broker_pb2.UpdateMetadataResponse()

    def StopReplica(self, request, timeout):
        self.received.append(request)
        return broker_pb2.StopReplicaResponse()


class Connections:
    def __init__(self, failures: int = 0) -> None:
        self.stubs: list[Stub] = []
        self.failures = failures
        self.lock = threading.Lock()

    def __call__(self, address: str):
        stub = Stub(address, self.failures)
        with self.lock:
            self.stubs.append(stub)
        return stub, lambda: setattr(stub, "closed", True)

    def for_address(self, address: str) -> Stub:
        return next(s for s in self.stubs if s.address == address and not s.closed)


def manager(connect, responses) -> ControllerChannelManager:
    return ControllerChannelManager(
        1001,
        CONTROLLER,
        "cid",
        request_timeout_ms=1000,
        queue_capacity=10,
        on_response=lambda effect, response: responses.append((effect, response)),
        connect=connect,
        retry_backoff_s=0.01,
    )


def test_requests_reach_their_broker_after_retries_and_answers_come_back():
    connect, responses = Connections(failures=2), []
    channels = manager(connect, responses)
    try:
        channels.update_brokers([broker(1), broker(2)])
        assert channels.broker_ids == {1, 2}
        update = SendUpdateMetadata(2, 10, 3, (), (broker(1), broker(2)))
        channels.send([update])
        wait_until(lambda: responses, 5, message="the answer")
        (request,) = connect.for_address("b2:9092").received
        assert request.controller == CONTROLLER and request.cluster_id == "cid"
        assert responses[0][0] == update
        assert connect.for_address("b1:9092").received == []
    finally:
        channels.shutdown()


def test_senders_follow_the_live_brokers():
    connect, responses = Connections(), []
    channels = manager(connect, responses)
    try:
        channels.update_brokers([broker(1), broker(2)])
        first = connect.for_address("b1:9092")
        channels.update_brokers([broker(1, epoch=11)])  # 1 registered again, 2 is gone
        assert channels.broker_ids == {1}
        assert first.closed and connect.for_address("b1:9092") is not first
        assert all(s.closed for s in connect.stubs if s.address == "b2:9092")
        stop = SendStopReplica(2, 10, 3, (StopReplicaPartition(TopicPartition("t", 0), -2, True),))
        channels.send([stop])  # no channel to broker 2 any more: dropped
        channels.shutdown()
        assert channels.broker_ids == frozenset() and all(s.closed for s in connect.stubs)
    finally:
        channels.shutdown()
