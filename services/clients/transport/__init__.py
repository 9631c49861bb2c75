"""The clients' one transport: every gRPC call a Producer, Consumer, Admin, coordinator client,
command-line tool or gateway makes to a broker, controller or coordinator goes through here.

Layers, as aiokafka's: protocol (the generated protobuf messages, built by the API modules) ->
connection (`channels`: a pooled gRPC channel per node, with the servers' message bounds and
Kafka's reconnect back-off) -> client (this package: the call itself, its deadline, its retries,
the mapping of failures to `KafkaError`) -> producer / consumer / admin, which build requests and
read responses through it. No other client module imports grpc or a generated stub.

    channels     ChannelPool (`call`, `call_many`, `send` -> PendingCall, load and back-off per
                 node), error_from_rpc, check_health; services BROKER, CONTROLLER, COORDINATOR
    completions  AsyncRequests: asynchronous calls whose handlers run on the polling thread
    retry        Deadline, call_with_retries (retry.backoff.ms until default.api.timeout.ms)
    routing      call_any_node (the least-loaded node that answers), group_by_leader,
                 unroutable_error, send_to_leaders (one call per partition leader, retried on
                 stale metadata)
"""

from services.clients.transport.channels import (
    BROKER,
    CONTROLLER,
    COORDINATOR,
    ERROR_DETAIL_KEY,
    ChannelPool,
    PendingCall,
    error_from_rpc,
)
from services.clients.transport.completions import AsyncRequests
from services.clients.transport.retry import Deadline, call_with_retries, timeout_error
from services.clients.transport.routing import (
    call_any_node,
    group_by_leader,
    send_to_leaders,
    unroutable_error,
)
from services.common.health import check_health

__all__ = [
    "BROKER", "CONTROLLER", "COORDINATOR", "ERROR_DETAIL_KEY", "AsyncRequests", "ChannelPool", "Deadline",
    "PendingCall", "call_any_node", "call_with_retries", "check_health", "error_from_rpc", "group_by_leader",
    "send_to_leaders", "timeout_error", "unroutable_error",
]
