"""Test doubles of the clients' network peers: in-process gRPC servers on 127.0.0.1 whose
BrokerService, ControllerService and CoordinatorService methods are scripted per test (started
by the `fake_nodes` fixture), plus builders of the protobuf answers they give. They stand in for
brokers, controllers and coordinators; no real service runs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent import futures
from typing import Any

import grpc

from services.common.pb.odradek.broker.v1 import broker_pb2, broker_pb2_grpc
from services.common.pb.odradek.common.v1 import common_pb2
from services.common.pb.odradek.controller.v1 import controller_pb2_grpc
from services.common.pb.odradek.coordinator.v1 import coordinator_pb2_grpc

Handler = Callable[[Any, grpc.ServicerContext], Any]


class _Dispatcher:
    """Resolves every RPC method name to the node's scripted handler."""

    def __init__(self, node: FakeNode):
        self._node = node

    def __getattr__(self, method: str) -> Handler:
        def handle(request: Any, context: grpc.ServicerContext) -> Any:
            return self._node.dispatch(method, request, context)

        return handle


class FakeNode:
    """One fake server: `on(method, handler)` scripts a method; `requests(method)` shows calls."""

    def __init__(self, node_id: int, port: int = 0):
        self.node_id = node_id
        self._handlers: dict[str, Handler] = {}
        self._requests: list[tuple[str, Any]] = []
        self._lock = threading.Lock()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        dispatcher = _Dispatcher(self)
        broker_pb2_grpc.add_BrokerServiceServicer_to_server(dispatcher, self.server)
        controller_pb2_grpc.add_ControllerServiceServicer_to_server(dispatcher, self.server)
        coordinator_pb2_grpc.add_CoordinatorServiceServicer_to_server(dispatcher, self.server)
        self.port = self.server.add_insecure_port(f"127.0.0.1:{port}")
        self.server.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def node(self) -> common_pb2.Node:
        return common_pb2.Node(node_id=self.node_id, host="127.0.0.1", port=self.port)

    def on(self, method: str, handler: Handler | Any) -> None:
        """Script `method`: a handler(request, context), or a fixed response message."""
        if not callable(handler):
            response = handler
            handler = lambda _request, _context: response  # noqa: E731
        with self._lock:
            self._handlers[method] = handler

    def dispatch(self, method: str, request: Any, context: grpc.ServicerContext) -> Any:
        with self._lock:
            self._requests.append((method, request))
            handler = self._handlers.get(method)
        if handler is None:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, f"{method} is not scripted")
        return handler(request, context)

    def requests(self, method: str) -> list[Any]:
        with self._lock:
            return [r for m, r in self._requests if m == method]

    def stop(self) -> None:
        self.server.stop(None)


def partition(index: int, leader: int, *, epoch: int = 0, replicas: list[int] | None = None,
              isr: list[int] | None = None, offline: list[int] | None = None,
              error_code: int = 0) -> broker_pb2.MetadataResponse.MetadataResponsePartition:
    replicas = [leader] if replicas is None else replicas
    return broker_pb2.MetadataResponse.MetadataResponsePartition(
        error_code=error_code, partition_index=index, leader_id=leader, leader_epoch=epoch,
        replica_nodes=replicas, isr_nodes=replicas if isr is None else isr, offline_replicas=offline or [])


def metadata_response(brokers: list[common_pb2.Node], *, controller: common_pb2.Node | None = None,
                      topics: dict[str, list] | None = None, topic_errors: dict[str, int] | None = None,
                      internal: tuple[str, ...] = (),
                      cluster_id: str = "test-cluster") -> broker_pb2.MetadataResponse:
    response = broker_pb2.MetadataResponse(brokers=brokers, cluster_id=cluster_id,
                                           controller_id=controller.node_id if controller else -1)
    if controller is not None:
        response.controller.CopyFrom(controller)
    for name, partitions in (topics or {}).items():
        response.topics.add(name=name, is_internal=name in internal, partitions=partitions)
    for name, code in (topic_errors or {}).items():
        response.topics.add(name=name, error_code=code)
    return response


def node_proto(node_id: int, port: int, host: str = "127.0.0.1") -> common_pb2.Node:
    return common_pb2.Node(node_id=node_id, host=host, port=port)
