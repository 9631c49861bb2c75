"""`ControllerServicer`: the ControllerService gRPC API, and `ControllerGateway`, its way into the
controller event loop.

A call that needs the controller's state or changes it is an event with a callback: the gateway
queues it and waits for the answer up to the request's timeout (its `timeout_ms`, else
`request.timeout.ms`, never past the gRPC deadline); no answer in time is REQUEST_TIMED_OUT.
DescribeCluster reads the published `ControllerView`; the config calls use ZooKeeper directly
(`TopicConfigAdmin`). A standby (or resigned) instance answers every call with the top-level
error NOT_CONTROLLER (41); other whole-request failures are mapped to Kafka codes by
`controller_protos.kafka_error`.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from services.common.errors import Errors, KafkaError
from services.common.pb.odradek.controller.v1 import controller_pb2 as pb
from services.common.pb.odradek.controller.v1 import controller_pb2_grpc
from services.controller import controller_protos as protos
from services.controller.state.events import (
    AlterIsrReceived,
    ApiPartitionReassignment,
    ControlledShutdown,
    ControllerEvent,
    CreatePartitions,
    CreateTopics,
    DeleteTopics,
    ElectionTrigger,
    ListPartitionReassignments,
    ReplicaLeaderElection,
)
from services.controller.topic_configs import TopicConfigAdmin
from services.controller.view import ControllerView

logger = logging.getLogger(__name__)

Callback = Callable[[Any], None]


class EventQueue(Protocol):
    def put(self, event: ControllerEvent, timeout_s: float | None = None) -> object: ...


class RequestWaiter:
    """A callback that keeps the first answer it gets and lets one thread wait for it."""

    def __init__(self) -> None:
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._result: Any = None

    def __call__(self, result: Any) -> None:
        with self._lock:
            if self._done.is_set():
                return
            self._result = result
            self._done.set()

    def wait(self, timeout_s: float) -> Any:
        if not self._done.wait(max(0.0, timeout_s)):
            raise KafkaError("The controller did not answer in time.", error=Errors.REQUEST_TIMED_OUT)
        if isinstance(self._result, BaseException):
            raise self._result
        return self._result


class ControllerGateway:
    def __init__(
        self, events: EventQueue, view: Callable[[], ControllerView], default_timeout_ms: int
    ) -> None:
        self._events = events
        self._view = view
        self.default_timeout_ms = default_timeout_ms

    @property
    def view(self) -> ControllerView:
        return self._view()

    def submit(self, make_event: Callable[[Callback], ControllerEvent], timeout_s: float) -> Any:
        """Queue the event `make_event(callback)` and wait for the callback's answer."""
        deadline = time.monotonic() + timeout_s
        waiter = RequestWaiter()
        try:
            self._events.put(make_event(waiter), timeout_s=timeout_s)
        except queue.Full:
            raise KafkaError(
                "The controller's event queue is full.", error=Errors.REQUEST_TIMED_OUT
            ) from None
        return waiter.wait(deadline - time.monotonic())


class ControllerServicer(controller_pb2_grpc.ControllerServiceServicer):
    def __init__(self, gateway: ControllerGateway, configs: TopicConfigAdmin) -> None:
        self._gateway = gateway
        self._configs = configs

    # --- topics and partitions ---------------------------------------------------------------

    def CreateTopics(self, request, context):
        def handle() -> pb.CreateTopicsResponse:
            topics = protos.new_topics(request)
            results = self._submit(
                lambda cb: CreateTopics(topics, request.validate_only, cb), request.timeout_ms, context
            )
            return protos.create_topics_response([t.name for t in topics], results)

        return self._call(pb.CreateTopicsResponse, handle)

    def DeleteTopics(self, request, context):
        def handle() -> pb.DeleteTopicsResponse:
            names = list(dict.fromkeys(request.topic_names))
            results = self._submit(lambda cb: DeleteTopics(tuple(names), cb), request.timeout_ms, context)
            return protos.delete_topics_response(names, results)

        return self._call(pb.DeleteTopicsResponse, handle)

    def CreatePartitions(self, request, context):
        def handle() -> pb.CreatePartitionsResponse:
            topics = protos.new_partitions(request)
            results = self._submit(
                lambda cb: CreatePartitions(topics, request.validate_only, cb), request.timeout_ms, context
            )
            return protos.create_partitions_response([t.name for t in topics], results)

        return self._call(pb.CreatePartitionsResponse, handle)

    # --- cluster, brokers and ISRs -----------------------------------------------------------

    def DescribeCluster(self, request, context):
        return self._call(
            pb.DescribeClusterResponse, lambda: protos.describe_cluster_response(self._gateway.view)
        )

    def ControlledShutdown(self, request, context):
        def handle() -> pb.ControlledShutdownResponse:
            remaining = self._submit(
                lambda cb: ControlledShutdown(request.broker_id, request.broker_epoch, cb), 0, context
            )
            return protos.controlled_shutdown_response(remaining)

        return self._call(pb.ControlledShutdownResponse, handle)

    def AlterIsr(self, request, context):
        def handle() -> pb.AlterIsrResponse:
            isrs = protos.isrs_to_alter(request)
            results = self._submit(
                lambda cb: AlterIsrReceived(request.broker_id, request.broker_epoch, isrs, cb), 0, context
            )
            return protos.alter_isr_response(results)

        return self._call(pb.AlterIsrResponse, handle)

    def ElectLeaders(self, request, context):
        def handle() -> pb.ElectLeadersResponse:
            partitions = protos.election_partitions(request)
            kind = protos.election_type(request)
            results = self._submit(
                lambda cb: ReplicaLeaderElection(
                    partitions, kind, ElectionTrigger.ADMIN_CLIENT_TRIGGERED, cb
                ),
                request.timeout_ms,
                context,
            )
            return protos.elect_leaders_response(results)

        return self._call(pb.ElectLeadersResponse, handle)

    # --- partition reassignments -------------------------------------------------------------

    def AlterPartitionReassignments(self, request, context):
        def handle() -> pb.AlterPartitionReassignmentsResponse:
            targets = protos.reassignments(request)
            results = self._submit(
                lambda cb: ApiPartitionReassignment(targets, cb), request.timeout_ms, context
            )
            return protos.alter_partition_reassignments_response(results)

        return self._call(pb.AlterPartitionReassignmentsResponse, handle)

    def ListPartitionReassignments(self, request, context):
        def handle() -> pb.ListPartitionReassignmentsResponse:
            partitions = protos.listed_partitions(request)
            ongoing = self._submit(
                lambda cb: ListPartitionReassignments(partitions, cb), request.timeout_ms, context
            )
            return protos.list_partition_reassignments_response(ongoing)

        return self._call(pb.ListPartitionReassignmentsResponse, handle)

    # --- configs -----------------------------------------------------------------------------

    def DescribeConfigs(self, request, context):
        return self._call(pb.DescribeConfigsResponse, lambda: self._configs.describe(request))

    def AlterConfigs(self, request, context):
        return self._call(pb.AlterConfigsResponse, lambda: self._configs.alter(request))

    def IncrementalAlterConfigs(self, request, context):
        return self._call(
            pb.IncrementalAlterConfigsResponse, lambda: self._configs.incremental_alter(request)
        )

    # -----------------------------------------------------------------------------------------

    def _call(self, response_type: Any, handle: Callable[[], Any]) -> Any:
        if not self._gateway.view.active:
            return response_type(
                error_code=Errors.NOT_CONTROLLER, error_message="This is not the active controller."
            )
        try:
            return handle()
        except Exception as e:
            error = protos.kafka_error(e)
            return response_type(error_code=error.code, error_message=str(error.args[0]))

    def _submit(
        self, make_event: Callable[[Callback], ControllerEvent], timeout_ms: int, context: Any
    ) -> Any:
        timeout_s = (timeout_ms if timeout_ms > 0 else self._gateway.default_timeout_ms) / 1000
        remaining = context.time_remaining() if context is not None else None
        if remaining is not None:
            timeout_s = min(timeout_s, remaining)
        return self._gateway.submit(make_event, timeout_s)
