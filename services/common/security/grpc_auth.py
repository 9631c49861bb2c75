"""Who may call the RPCs that only the cluster's own nodes send.

The controller's requests to brokers (LeaderAndIsr, UpdateMetadata, StopReplica), a transaction
coordinator's WriteTxnMarkers and a broker's requests to the controller (ControlledShutdown,
AlterIsr) need CLUSTER_ACTION on the cluster, as Kafka asks of its inter-broker requests.
`ClusterActionInterceptor` checks it, with the authorizer the node runs (none: every call passes),
for the principal the call's TLS peer certificate names (`User:CN=broker-1`; `User:ANONYMOUS`
without one). A refused call is answered, as Kafka answers, CLUSTER_AUTHORIZATION_FAILED in the
response's `error_code`, or with gRPC's PERMISSION_DENIED when the response has no top-level code.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import grpc
from google.protobuf import descriptor_pool, message_factory

from services.common.errors import Errors
from services.common.security.acl import CLUSTER_NAME, AclOperation, Resource, ResourceType
from services.common.security.authorizer import AclAuthorizer
from services.common.security.tls import grpc_peer_principal

CLUSTER_ACTION_METHODS = frozenset({
    "/odradek.broker.v1.BrokerService/LeaderAndIsr",
    "/odradek.broker.v1.BrokerService/UpdateMetadata",
    "/odradek.broker.v1.BrokerService/StopReplica",
    "/odradek.broker.v1.BrokerService/WriteTxnMarkers",
    "/odradek.controller.v1.ControllerService/ControlledShutdown",
    "/odradek.controller.v1.ControllerService/AlterIsr",
})
CLUSTER = Resource(ResourceType.CLUSTER, CLUSTER_NAME)


def peer_host(context: grpc.ServicerContext) -> str:
    """The caller's address from gRPC's peer string (`ipv4:127.0.0.1:5000`, `ipv6:[::1]:5000`)."""
    peer = context.peer() or ""
    _, _, address = peer.partition(":")
    return address.rpartition(":")[0].strip("[]")


def _refusal(method: str, principal: str):
    """The method's response saying CLUSTER_AUTHORIZATION_FAILED, or None when it has no top-level code."""
    service_name, _, method_name = method.strip("/").partition("/")
    try:
        descriptor = descriptor_pool.Default().FindServiceByName(service_name).FindMethodByName(method_name)
    except KeyError:
        return None
    response_class = message_factory.GetMessageClass(descriptor.output_type)
    fields = response_class.DESCRIPTOR.fields_by_name
    if "error_code" not in fields:
        return None
    response = response_class(error_code=Errors.CLUSTER_AUTHORIZATION_FAILED)
    if "error_message" in fields:
        response.error_message = f"{principal} may not perform CLUSTER_ACTION on the cluster"
    return response


class ClusterActionInterceptor(grpc.aio.ServerInterceptor):
    """Checks CLUSTER_ACTION before the RPCs of `CLUSTER_ACTION_METHODS`; `authorizer` gives the
    node's authorizer when the call arrives (None: authorization is off)."""

    def __init__(self, authorizer: Callable[[], AclAuthorizer | None]) -> None:
        self._authorizer = authorizer

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or handler.unary_unary is None or method not in CLUSTER_ACTION_METHODS:
            return handler
        inner = handler.unary_unary

        def refused(context) -> tuple[bool, object]:
            authorizer = self._authorizer()
            if authorizer is None:
                return False, None
            principal = grpc_peer_principal(context)
            if authorizer.authorize(principal, peer_host(context), AclOperation.CLUSTER_ACTION, CLUSTER):
                return False, None
            response = _refusal(method, principal)
            if response is None:
                context.set_code(grpc.StatusCode.PERMISSION_DENIED)
                context.set_details(f"CLUSTER_AUTHORIZATION_FAILED: {principal} may not call {method}")
            return True, response

        if inspect.iscoroutinefunction(inner):
            async def checked(request, context):
                denied, response = refused(context)
                return response if denied else await inner(request, context)
        else:
            def checked(request, context):
                denied, response = refused(context)
                return response if denied else inner(request, context)
        return grpc.unary_unary_rpc_method_handler(checked, request_deserializer=handler.request_deserializer,
                                                   response_serializer=handler.response_serializer)
