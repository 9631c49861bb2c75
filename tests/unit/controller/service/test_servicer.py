"""ControllerServicer: NOT_CONTROLLER from a standby for every call, and requests answered through
the real event queue (answered, preempted, timed out)."""

from __future__ import annotations

import pytest

from services.common.errors import Errors
from services.common.pb.odradek.controller.v1 import controller_pb2 as pb
from services.common.topic_partition import TopicPartition
from services.controller.servicer import ControllerGateway, ControllerServicer, RequestWaiter
from services.controller.state.event_manager import ControllerEventManager
from services.controller.state.events import ControlledShutdown, CreateTopics, DeleteTopics
from services.controller.state.topic_admin import TopicCreation
from services.controller.view import ControllerView

CALLS = [
    ("CreateTopics", pb.CreateTopicsRequest),
    ("DeleteTopics", pb.DeleteTopicsRequest),
    ("CreatePartitions", pb.CreatePartitionsRequest),
    ("DescribeCluster", pb.DescribeClusterRequest),
    ("ControlledShutdown", pb.ControlledShutdownRequest),
    ("AlterIsr", pb.AlterIsrRequest),
    ("ElectLeaders", pb.ElectLeadersRequest),
    ("DescribeConfigs", pb.DescribeConfigsRequest),
    ("AlterConfigs", pb.AlterConfigsRequest),
    ("IncrementalAlterConfigs", pb.IncrementalAlterConfigsRequest),
]


class Unused:
    def __getattr__(self, name):
        pytest.fail(f"a standby touched {name}")


def servicer(events, view: ControllerView, timeout_ms: int = 5000) -> ControllerServicer:
    return ControllerServicer(ControllerGateway(events, lambda: view, timeout_ms), Unused())


@pytest.mark.parametrize(("method", "request_type"), CALLS)
def test_a_standby_answers_every_call_not_controller(method, request_type):
    response = getattr(servicer(Unused(), ControllerView(1001)), method)(request_type(), None)
    assert response.error_code == Errors.NOT_CONTROLLER


@pytest.fixture
def events():
    handled = []

    def process(event):
        handled.append(event)
        match event:
            case CreateTopics():
                event.callback({t.name: TopicCreation(t.name, {0: (1,)}, {}) for t in event.topics})
            case ControlledShutdown():
                event.callback([TopicPartition("t", 1)])
            case DeleteTopics():
                event.preempt()  # as a controller that resigned answers

    manager = ControllerEventManager(process, capacity=10)
    manager.handled = handled
    manager.start()
    yield manager
    manager.close(5)


ACTIVE = ControllerView(1001, "cid", active=True, active_controller_id=1001)


def test_requests_go_through_the_event_queue(events):
    service = servicer(events, ACTIVE)
    request = pb.CreateTopicsRequest(timeout_ms=2000)
    request.topics.add(name="a", num_partitions=1, replication_factor=1)
    response = service.CreateTopics(request, None)
    assert response.error_code == 0
    assert [(t.name, t.error_code, t.num_partitions) for t in response.topics] == [("a", 0, 1)]

    shutdown = service.ControlledShutdown(pb.ControlledShutdownRequest(broker_id=1, broker_epoch=5), None)
    assert [(p.topic_name, p.partition_index) for p in shutdown.remaining_partitions] == [("t", 1)]
    assert events.handled[1] == ControlledShutdown(1, 5)


def test_a_preempted_request_is_not_controller(events):
    response = servicer(events, ACTIVE).DeleteTopics(pb.DeleteTopicsRequest(topic_names=["t"]), None)
    assert response.error_code == Errors.NOT_CONTROLLER


def test_an_unanswered_request_times_out():
    events = ControllerEventManager(lambda event: None, capacity=10)
    events.start()
    try:
        response = servicer(events, ACTIVE).CreatePartitions(pb.CreatePartitionsRequest(timeout_ms=50), None)
        assert response.error_code == Errors.REQUEST_TIMED_OUT
    finally:
        events.close(5)


def test_describe_cluster_reads_the_view():
    view = ControllerView(1001, "cid", active=True, active_controller_id=1001)
    response = servicer(Unused(), view).DescribeCluster(pb.DescribeClusterRequest(), None)
    assert (response.error_code, response.cluster_id, response.controller_id) == (0, "cid", 1001)


def test_the_waiter_keeps_the_first_answer():
    waiter = RequestWaiter()
    waiter("first")
    waiter("second")
    assert waiter.wait(0) == "first"
