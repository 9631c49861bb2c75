"""Kafka's ACLs on every RPC of the broker, controller and coordinator services.

`RPC_RULES` says, for each RPC, what Kafka asks of the matching Kafka API: `Need`s the whole
request must pass (JoinGroup READ on its group, ElectLeaders ALTER on the cluster, the node-only
RPCs CLUSTER_ACTION), `EachEntry` for requests naming many resources (Produce WRITE on each
topic), each refused entry answered on its own while the others are served, and `Listing` for the
RPCs that list (Metadata of every topic, ListGroups, ListTransactions), which leave out what the
principal may not describe instead of failing. `AuthorizationInterceptor` applies them with the
node's authorizer (none: every call is served as it comes).

A refusal answers Kafka's error: TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED,
CLUSTER_AUTHORIZATION_FAILED or TRANSACTIONAL_ID_AUTHORIZATION_FAILED in each refused entry of the
response, else in its top-level `error_code`, else as gRPC's PERMISSION_DENIED carrying an
`ErrorDetail` in the `odradek-error-bin` trailer. Every refusal is audited by the authorizer.

A call's principal (`call_principal`) is `User:<name>` of its `authorization: Basic` metadata (whose
password is verified before this interceptor runs), else its TLS client certificate's subject,
else `User:ANONYMOUS`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf import descriptor_pool, message_factory

from services.common.errors import Errors
from services.common.grpc_error_detail import error_detail_metadata
from services.common.pb.odradek.common.v1 import common_pb2
from services.common.security.acl import CLUSTER_NAME, AclOperation, Resource, ResourceType
from services.common.security.authorizer import Access, AclAuthorizer, init_producer_id_denied
from services.common.security.grpc_credentials import basic_credentials
from services.common.security.tls import grpc_peer_principal, peer_host

Message = Any
BROKER_SERVICE = "odradek.broker.v1.BrokerService"
CONTROLLER_SERVICE = "odradek.controller.v1.ControllerService"
COORDINATOR_SERVICE = "odradek.coordinator.v1.CoordinatorService"
SERVICES = (BROKER_SERVICE, CONTROLLER_SERVICE, COORDINATOR_SERVICE)
CLUSTER = Resource(ResourceType.CLUSTER, CLUSTER_NAME)

DENIAL_ERRORS = {
    ResourceType.TOPIC: Errors.TOPIC_AUTHORIZATION_FAILED,
    ResourceType.GROUP: Errors.GROUP_AUTHORIZATION_FAILED,
    ResourceType.CLUSTER: Errors.CLUSTER_AUTHORIZATION_FAILED,
    ResourceType.TRANSACTIONAL_ID: Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}
# Kafka's ConfigResource types: TOPIC 2, BROKER 4, BROKER_LOGGER 8; a broker's configs are the cluster's
CONFIG_RESOURCE_TOPIC = 2


def call_principal(context: grpc.ServicerContext) -> str:
    """`User:<name>` of the call's Basic credentials, else its TLS peer's principal (`User:ANONYMOUS`
    without a client certificate)."""
    credentials = basic_credentials(context.invocation_metadata())  # verified first by grpc_credentials
    if credentials is not None:
        return f"User:{credentials[0]}"
    return grpc_peer_principal(context)


# ---------------------------------------------------------------------- the rules


def _always(request: Message) -> bool:
    return True


def _cluster(request: Message) -> Iterable[str]:
    return (CLUSTER_NAME,)


@dataclass(frozen=True)
class Need:
    """`operation` on every resource `names(request)` names, when `when(request)`; else the whole
    request is refused."""

    operation: AclOperation
    resource_type: ResourceType
    names: Callable[[Message], Iterable[str]] = _cluster
    when: Callable[[Message], bool] = _always


@dataclass(frozen=True)
class Entries:
    """Where a request's per-resource entries and the response's results for them are: the repeated
    fields `request` and `response`, the entry's resource name (`name`; None: the entries are the
    names), the fields a refused result copies from its entry (`keys`: request field, response
    field) and, when results are per partition, (request list, its index field or None for bare
    indexes, response list, its index field)."""

    request: str
    response: str
    name: str | None = "name"
    keys: tuple[tuple[str | None, str], ...] = (("name", "name"),)
    partitions: tuple[str, str | None, str, str] | None = None


@dataclass(frozen=True)
class EachEntry:
    """`operation` on each entry's resource (of `resource_type`, or `type_of(entry)`), when
    `when(request)`; an `alternative` that holds grants every entry (CREATE on the cluster)."""

    operation: AclOperation
    entries: Entries
    resource_type: ResourceType = ResourceType.TOPIC
    type_of: Callable[[Message], ResourceType] | None = None
    when: Callable[[Message], bool] = _always
    alternative: Need | None = None
    served_without_entries: bool = False  # a request left with no entry is still served (Metadata)


@dataclass(frozen=True)
class Listing:
    """A response's repeated field `field` keeps the results whose `name` the principal may do
    `operation` on (`unless`: all of them when this holds), when `when(request)`."""

    field: str
    name: str
    operation: AclOperation
    resource_type: ResourceType
    when: Callable[[Message], bool] = _always
    unless: Need | None = None


@dataclass(frozen=True)
class RpcRule:
    needs: tuple[Need, ...] = ()
    each: EachEntry | None = None
    listing: Listing | None = None
    check: Callable[[Message, Access], int | None] | None = None  # a refusal Kafka's own logic decides
    adjust: Callable[[Message, Access], None] | None = None  # narrows the request before it is served


def _field(name: str) -> Callable[[Message], Iterable[str]]:
    return lambda request: (getattr(request, name),)


def _has(name: str) -> Callable[[Message], bool]:
    return lambda request: bool(request.HasField(name) and getattr(request, name))


def _txn_topics(request: Message) -> Iterable[str]:
    return [topic.name for topic in request.topics]


def _is_follower(request: Message) -> bool:
    return request.replica_id >= 0


def _config_type(entry: Message) -> ResourceType:
    return ResourceType.TOPIC if entry.resource_type == CONFIG_RESOURCE_TOPIC else ResourceType.CLUSTER


def _init_producer_id(request: Message, access: Access) -> int | None:
    return init_producer_id_denied(request.transactional_id if request.HasField("transactional_id") else None,
                                   access)


def _metadata_auto_creation(request: Message, access: Access) -> None:
    """Auto-creation needs CREATE on the cluster or on each topic (else the topic is not created)."""
    if not request.allow_auto_topic_creation:
        return
    if access.allowed(AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME, log_denial=False):
        return
    if not all(access.allowed(AclOperation.CREATE, ResourceType.TOPIC, name, log_denial=False)
               for name in request.topics):
        request.allow_auto_topic_creation = False


CLUSTER_ACTION = RpcRule(needs=(Need(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER),))
DESCRIBE_CLUSTER = RpcRule(needs=(Need(AclOperation.DESCRIBE, ResourceType.CLUSTER),))
ALTER_CLUSTER = RpcRule(needs=(Need(AclOperation.ALTER, ResourceType.CLUSTER),))
GROUP = Need(AclOperation.READ, ResourceType.GROUP, _field("group_id"))
TRANSACTIONAL_ID = Need(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, _field("transactional_id"))
FIND_GROUP_COORDINATOR = Need(AclOperation.DESCRIBE, ResourceType.GROUP, _field("key"),
                              lambda r: r.key_type == common_pb2.GROUP)
FIND_TXN_COORDINATOR = Need(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, _field("key"),
                            lambda r: r.key_type == common_pb2.TRANSACTION)
INIT_PRODUCER_ID = RpcRule(check=_init_producer_id)
CONFIG_RESULTS = (("resource_type", "resource_type"), ("resource_name", "resource_name"))


def _topic_partitions(request: str, response: str, *, name: str = "name", response_name: str = "name",
                      partitions: tuple[str, str | None, str, str]) -> Entries:
    return Entries(request, response, name, ((name, response_name),), partitions)


RPC_RULES: dict[str, RpcRule] = {
    # the broker
    f"/{BROKER_SERVICE}/Produce": RpcRule(
        needs=(Need(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, _field("transactional_id"),
                    _has("transactional_id")),),
        each=EachEntry(AclOperation.WRITE, _topic_partitions(
            "topic_data", "responses", partitions=("partition_data", "index", "partition_responses", "index")))),
    f"/{BROKER_SERVICE}/Fetch": RpcRule(
        needs=(Need(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, when=_is_follower),),
        each=EachEntry(AclOperation.READ, _topic_partitions(
            "topics", "responses", name="topic", response_name="topic",
            partitions=("partitions", "partition", "partitions", "partition_index")),
            when=lambda r: not _is_follower(r))),
    f"/{BROKER_SERVICE}/ListOffsets": RpcRule(each=EachEntry(AclOperation.DESCRIBE, _topic_partitions(
        "topics", "topics", partitions=("partitions", "partition_index", "partitions", "partition_index")))),
    f"/{BROKER_SERVICE}/Metadata": RpcRule(
        each=EachEntry(AclOperation.DESCRIBE, Entries("topics", "topics", None, ((None, "name"),)),
                       when=lambda r: not r.all_topics, served_without_entries=True),
        listing=Listing("topics", "name", AclOperation.DESCRIBE, ResourceType.TOPIC, lambda r: r.all_topics),
        adjust=_metadata_auto_creation),
    f"/{BROKER_SERVICE}/OffsetForLeaderEpoch": RpcRule(
        needs=(Need(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, when=_is_follower),),
        each=EachEntry(AclOperation.DESCRIBE, _topic_partitions(
            "topics", "topics", name="topic", response_name="topic",
            partitions=("partitions", "partition", "partitions", "partition")),
            when=lambda r: not _is_follower(r))),
    f"/{BROKER_SERVICE}/InitProducerId": INIT_PRODUCER_ID,
    f"/{BROKER_SERVICE}/WriteTxnMarkers": CLUSTER_ACTION,
    f"/{BROKER_SERVICE}/DescribeProducers": RpcRule(each=EachEntry(AclOperation.READ, _topic_partitions(
        "topics", "topics", partitions=("partition_indexes", None, "partitions", "partition_index")))),
    f"/{BROKER_SERVICE}/DeleteRecords": RpcRule(each=EachEntry(AclOperation.DELETE, _topic_partitions(
        "topics", "topics", partitions=("partitions", "partition_index", "partitions", "partition_index")))),
    f"/{BROKER_SERVICE}/DescribeLogDirs": DESCRIBE_CLUSTER,
    f"/{BROKER_SERVICE}/FindCoordinator": RpcRule(needs=(FIND_GROUP_COORDINATOR, FIND_TXN_COORDINATOR)),
    f"/{BROKER_SERVICE}/LeaderAndIsr": CLUSTER_ACTION,
    f"/{BROKER_SERVICE}/UpdateMetadata": CLUSTER_ACTION,
    f"/{BROKER_SERVICE}/StopReplica": CLUSTER_ACTION,
    # the controller
    f"/{CONTROLLER_SERVICE}/CreateTopics": RpcRule(each=EachEntry(
        AclOperation.CREATE, Entries("topics", "topics"),
        alternative=Need(AclOperation.CREATE, ResourceType.CLUSTER))),
    f"/{CONTROLLER_SERVICE}/DeleteTopics": RpcRule(each=EachEntry(
        AclOperation.DELETE, Entries("topic_names", "responses", None, ((None, "name"),)))),
    f"/{CONTROLLER_SERVICE}/CreatePartitions": RpcRule(each=EachEntry(
        AclOperation.ALTER, Entries("topics", "results"))),
    f"/{CONTROLLER_SERVICE}/DescribeCluster": DESCRIBE_CLUSTER,
    f"/{CONTROLLER_SERVICE}/ControlledShutdown": CLUSTER_ACTION,
    f"/{CONTROLLER_SERVICE}/AlterIsr": CLUSTER_ACTION,
    f"/{CONTROLLER_SERVICE}/ElectLeaders": ALTER_CLUSTER,
    f"/{CONTROLLER_SERVICE}/AlterPartitionReassignments": ALTER_CLUSTER,
    f"/{CONTROLLER_SERVICE}/ListPartitionReassignments": DESCRIBE_CLUSTER,
    f"/{CONTROLLER_SERVICE}/DescribeConfigs": RpcRule(each=EachEntry(
        AclOperation.DESCRIBE_CONFIGS, Entries("resources", "results", "resource_name", CONFIG_RESULTS),
        type_of=_config_type)),
    f"/{CONTROLLER_SERVICE}/AlterConfigs": RpcRule(each=EachEntry(
        AclOperation.ALTER_CONFIGS, Entries("resources", "responses", "resource_name", CONFIG_RESULTS),
        type_of=_config_type)),
    f"/{CONTROLLER_SERVICE}/IncrementalAlterConfigs": RpcRule(each=EachEntry(
        AclOperation.ALTER_CONFIGS, Entries("resources", "responses", "resource_name", CONFIG_RESULTS),
        type_of=_config_type)),
    # the coordinator
    f"/{COORDINATOR_SERVICE}/FindCoordinator": RpcRule(needs=(FIND_GROUP_COORDINATOR, FIND_TXN_COORDINATOR)),
    f"/{COORDINATOR_SERVICE}/JoinGroup": RpcRule(needs=(GROUP,)),
    f"/{COORDINATOR_SERVICE}/SyncGroup": RpcRule(needs=(GROUP,)),
    f"/{COORDINATOR_SERVICE}/Heartbeat": RpcRule(needs=(GROUP,)),
    f"/{COORDINATOR_SERVICE}/LeaveGroup": RpcRule(needs=(GROUP,)),
    f"/{COORDINATOR_SERVICE}/OffsetCommit": RpcRule(needs=(GROUP,), each=EachEntry(
        AclOperation.READ, _topic_partitions(
            "topics", "topics", partitions=("partitions", "partition_index", "partitions", "partition_index")))),
    f"/{COORDINATOR_SERVICE}/OffsetFetch": RpcRule(
        needs=(Need(AclOperation.DESCRIBE, ResourceType.GROUP, _field("group_id")),),
        each=EachEntry(AclOperation.DESCRIBE, _topic_partitions(
            "topics", "topics", partitions=("partition_indexes", None, "partitions", "partition_index")),
            when=lambda r: not r.all_topics),
        listing=Listing("topics", "name", AclOperation.DESCRIBE, ResourceType.TOPIC, lambda r: r.all_topics)),
    f"/{COORDINATOR_SERVICE}/ListGroups": RpcRule(listing=Listing(
        "groups", "group_id", AclOperation.DESCRIBE, ResourceType.GROUP,
        unless=Need(AclOperation.DESCRIBE, ResourceType.CLUSTER))),
    f"/{COORDINATOR_SERVICE}/DescribeGroups": RpcRule(each=EachEntry(
        AclOperation.DESCRIBE, Entries("groups", "groups", None, ((None, "group_id"),)),
        resource_type=ResourceType.GROUP)),
    f"/{COORDINATOR_SERVICE}/DeleteGroups": RpcRule(each=EachEntry(
        AclOperation.DELETE, Entries("groups_names", "results", None, ((None, "group_id"),)),
        resource_type=ResourceType.GROUP)),
    f"/{COORDINATOR_SERVICE}/OffsetDelete": RpcRule(
        needs=(Need(AclOperation.DELETE, ResourceType.GROUP, _field("group_id")),),
        each=EachEntry(AclOperation.READ, _topic_partitions(
            "topics", "topics", partitions=("partition_indexes", None, "partitions", "partition_index")))),
    f"/{COORDINATOR_SERVICE}/InitProducerId": INIT_PRODUCER_ID,
    f"/{COORDINATOR_SERVICE}/AddPartitionsToTxn": RpcRule(needs=(TRANSACTIONAL_ID,), each=EachEntry(
        AclOperation.WRITE, _topic_partitions(
            "topics", "results", partitions=("partitions", None, "results_by_partition", "partition_index")))),
    f"/{COORDINATOR_SERVICE}/AddOffsetsToTxn": RpcRule(needs=(TRANSACTIONAL_ID, GROUP)),
    f"/{COORDINATOR_SERVICE}/TxnOffsetCommit": RpcRule(needs=(TRANSACTIONAL_ID, GROUP), each=EachEntry(
        AclOperation.READ, _topic_partitions(
            "topics", "topics", partitions=("partitions", "partition_index", "partitions", "partition_index")))),
    f"/{COORDINATOR_SERVICE}/EndTxn": RpcRule(needs=(TRANSACTIONAL_ID,)),
    f"/{COORDINATOR_SERVICE}/WriteTxnMarkers": CLUSTER_ACTION,
    f"/{COORDINATOR_SERVICE}/ListTransactions": RpcRule(listing=Listing(
        "transaction_states", "transactional_id", AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID)),
    f"/{COORDINATOR_SERVICE}/DescribeTransactions": RpcRule(each=EachEntry(
        AclOperation.DESCRIBE, Entries("transactional_ids", "transaction_states", None,
                                       ((None, "transactional_id"),)),
        resource_type=ResourceType.TRANSACTIONAL_ID)),
}


# ---------------------------------------------------------------------- applying a rule


def _response_class(method: str):
    service_name, _, method_name = method.strip("/").partition("/")
    descriptor = descriptor_pool.Default().FindServiceByName(service_name).FindMethodByName(method_name)
    return message_factory.GetMessageClass(descriptor.output_type)


def _set_error(result: Message, error: int, message: str) -> None:
    fields = result.DESCRIPTOR.fields_by_name
    result.error_code = error
    if "error_message" in fields:
        result.error_message = message


def _entry_name(entries: Entries, entry: Message) -> str:
    return entry if entries.name is None else getattr(entry, entries.name)


def _add_refused(response: Message, entries: Entries, entry: Message, error: int, message: str) -> None:
    result = getattr(response, entries.response).add()
    for request_field, response_field in entries.keys:
        setattr(result, response_field, entry if request_field is None else getattr(entry, request_field))
    if entries.partitions is None:
        _set_error(result, error, message)
        return
    request_list, request_index, response_list, response_index = entries.partitions
    for partition in getattr(entry, request_list):
        part = getattr(result, response_list).add()
        setattr(part, response_index, partition if request_index is None else getattr(partition, request_index))
        _set_error(part, error, message)


@dataclass
class Plan:
    """What becomes of one call: answered at once (`answer`, or `abort` with PERMISSION_DENIED and
    the error), or served with `request` and its response passed through `finish`."""

    request: Message
    answer: Message | None = None
    abort: tuple[int, str] | None = None
    refused: list[tuple[Message, int, str]] = field(default_factory=list)
    listing: Listing | None = None

    @property
    def served(self) -> bool:
        return self.answer is None and self.abort is None


class RpcAuthorization:
    """Applies `RPC_RULES` to a call, as `access` (the caller's principal and host) may."""

    def __init__(self, rules: dict[str, RpcRule] = RPC_RULES) -> None:
        self.rules = rules

    def plan(self, method: str, request: Message, access: Access) -> Plan:
        rule = self.rules[method]
        for need in rule.needs:
            if not need.when(request):
                continue
            for name in need.names(request):
                if not access.allowed(need.operation, need.resource_type, name):
                    return self._refuse_whole(method, rule, request, DENIAL_ERRORS[need.resource_type],
                                              _denial(access, need.operation, need.resource_type, name))
        if rule.check is not None:
            error = rule.check(request, access)
            if error is not None:
                return self._refuse_whole(method, rule, request, error,
                                          f"{access.principal} may not call {method.rpartition('/')[2]}")
        plan = Plan(request)
        each = rule.each
        if each is not None and each.when(request) and not (
                each.alternative is not None and access.allowed(
                    each.alternative.operation, each.alternative.resource_type, CLUSTER_NAME, log_denial=False)):
            kept, refused = [], []
            for entry in getattr(request, each.entries.request):
                name = _entry_name(each.entries, entry)
                resource_type = each.type_of(entry) if each.type_of is not None else each.resource_type
                if resource_type == ResourceType.CLUSTER:
                    name = CLUSTER_NAME
                if access.allowed(each.operation, resource_type, name):
                    kept.append(entry)
                else:
                    refused.append((entry, DENIAL_ERRORS[resource_type],
                                    _denial(access, each.operation, resource_type, name)))
            if refused:
                narrowed = type(request)()
                narrowed.CopyFrom(request)
                target = getattr(narrowed, each.entries.request)
                del target[:]
                target.extend(kept)
                plan = Plan(narrowed, refused=refused)
                if not kept and not each.served_without_entries:
                    plan.answer = _response_class(method)()
        if rule.adjust is not None and plan.served:
            if plan.request is request:
                plan.request = type(request)()
                plan.request.CopyFrom(request)
            rule.adjust(plan.request, access)
        if rule.listing is not None and rule.listing.when(request):
            unless = rule.listing.unless
            if unless is None or not access.allowed(unless.operation, unless.resource_type, CLUSTER_NAME,
                                                    log_denial=False):
                plan.listing = rule.listing
        if plan.answer is not None:
            plan.answer = self.finish(method, plan, plan.answer, access)
        return plan

    def finish(self, method: str, plan: Plan, response: Message, access: Access) -> Message:
        """The served call's response with the refused entries added and the listing filtered."""
        if response is None:  # acks=0 produce, or an aborted call
            return response
        rule = self.rules[method]
        for entry, error, message in plan.refused:
            _add_refused(response, rule.each.entries, entry, error, message)
        listing = plan.listing
        if listing is not None:
            results = getattr(response, listing.field)
            visible = [r for r in results if access.allowed(listing.operation, listing.resource_type,
                                                            getattr(r, listing.name), log_denial=False)]
            if len(visible) != len(results):
                del results[:]
                results.extend(visible)
        return response

    def _refuse_whole(self, method: str, rule: RpcRule, request: Message, error: int, message: str) -> Plan:
        response = _response_class(method)()
        if "error_code" in response.DESCRIPTOR.fields_by_name:
            _set_error(response, error, message)
            return Plan(request, answer=response)
        entries = rule.each.entries if rule.each is not None else None
        if entries is not None and len(getattr(request, entries.request)):
            for entry in getattr(request, entries.request):
                _add_refused(response, entries, entry, error, message)
            return Plan(request, answer=response)
        return Plan(request, abort=(error, message))


def _denial(access: Access, operation: AclOperation, resource_type: ResourceType, name: str) -> str:
    return f"{access.principal} may not perform {operation.zk_name} on {resource_type.zk_name} {name}"


def _permission_denied(context, error: int, message: str) -> None:
    context.set_trailing_metadata(error_detail_metadata(Errors(error), message))
    context.set_code(grpc.StatusCode.PERMISSION_DENIED)
    context.set_details(f"{Errors(error).name}: {message}")


class AuthorizationInterceptor(grpc.aio.ServerInterceptor):
    """Authorizes each call of `RPC_RULES`' methods; `authorizer` gives the node's authorizer when
    the call arrives (None: authorization is off and the call is served as it comes)."""

    def __init__(self, authorizer: Callable[[], AclAuthorizer | None],
                 authorization: RpcAuthorization | None = None) -> None:
        self._authorizer = authorizer
        self._authorization = authorization or RpcAuthorization()

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or handler.unary_unary is None or method not in self._authorization.rules:
            return handler
        inner = handler.unary_unary
        authorization = self._authorization

        def plan(request, context) -> tuple[Plan | None, Access | None]:
            authorizer = self._authorizer()
            if authorizer is None:
                return None, None
            access = Access(call_principal(context), peer_host(context), authorizer)
            return authorization.plan(method, request, access), access

        if inspect.iscoroutinefunction(inner):
            async def checked(request, context):
                decided, access = plan(request, context)
                if decided is None:
                    return await inner(request, context)
                if decided.abort is not None:
                    _permission_denied(context, *decided.abort)
                    return None
                if decided.answer is not None:
                    return decided.answer
                return authorization.finish(method, decided, await inner(decided.request, context), access)
        else:
            def checked(request, context):
                decided, access = plan(request, context)
                if decided is None:
                    return inner(request, context)
                if decided.abort is not None:
                    _permission_denied(context, *decided.abort)
                    return None
                if decided.answer is not None:
                    return decided.answer
                return authorization.finish(method, decided, inner(decided.request, context), access)
        return grpc.unary_unary_rpc_method_handler(checked, request_deserializer=handler.request_deserializer,
                                                   response_serializer=handler.response_serializer)
