"""The broker's admin and ACL APIs for a principal the authorizer refuses: every version of the
cluster-level APIs answers CLUSTER_AUTHORIZATION_FAILED, refused topics TOPIC_AUTHORIZATION_FAILED,
nothing reaches the controller, and each answer encodes; ACLs created over the Kafka protocol are
described and deleted by filter."""

from __future__ import annotations

import asyncio
import dataclasses
import io
from datetime import timedelta
from typing import Any

import pytest
from kio.serial import entity_writer

from services.broker.kafka_api.acls import AclKafkaApis
from services.broker.kafka_api.admin import ADMIN_API_VERSIONS, KafkaAdminApis
from services.clients.admin_types import BROKER_RESOURCE, TOPIC_RESOURCE
from services.common.errors import Errors
from services.common.kafka_wire import kafka_error
from services.common.kafka_wire.codec import api_schema
from services.common.kafka_wire.registry import RequestContext
from services.common.security.acl import PatternType, ResourceType
from services.common.security.authorizer import Access, AclAuthorizer

CLUSTER_APIS = {43: "elect_leaders", 45: "alter_partition_reassignments", 46: "list_partition_reassignments",
                60: "describe_cluster", 35: "describe_log_dirs"}


class Refuses:
    """Any attribute is a call that fails the test: nothing may reach the controller or the log."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"{name} was called for a refused request")


class Snapshot:
    cluster_id = "c"
    brokers: dict = {}
    controller = None


class MetadataStub:
    def snapshot(self) -> Snapshot:
        return Snapshot()


def admin_apis() -> KafkaAdminApis:
    apis = KafkaAdminApis.__new__(KafkaAdminApis)
    apis.broker_id, apis.metadata_cache = 1, MetadataStub()
    apis.replica_manager = apis.controller = apis.dynamic_config = Refuses()
    return apis


def context(api_key: int, version: int, access: Access) -> RequestContext:
    return RequestContext(api_key, version, 1, "c", "127.0.0.1:1", api_schema(api_key, version), access)


REFUSED = Access("User:bob", "127.0.0.1", AclAuthorizer(None))


def default_request(request_type: type) -> Any:
    values = {}
    for field in dataclasses.fields(request_type):
        if field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING:
            continue
        kind = str(field.type)
        values[field.name] = (() if "tuple" in kind else "" if "str" in kind else False if "bool" in kind
                              else timedelta(seconds=1) if "imedelta" in kind else 0)
    return request_type(**values)


def answer(handler: Any, request: Any, ctx: RequestContext) -> Any:
    response = asyncio.run(handler(request, ctx))
    entity_writer(ctx.response_type)(io.BytesIO(), response)  # it encodes
    return response


@pytest.mark.parametrize("api_key", sorted(CLUSTER_APIS))
def test_cluster_apis_are_refused_at_every_version(api_key: int) -> None:
    low, high = ADMIN_API_VERSIONS[api_key]
    for version in range(low, high + 1):
        ctx = context(api_key, version, REFUSED)
        response = answer(getattr(admin_apis(), CLUSTER_APIS[api_key]), default_request(ctx.schema.request_type), ctx)
        if "error_code" in ctx.response_type.__dataclass_fields__:
            assert response.error_code == kafka_error(Errors.CLUSTER_AUTHORIZATION_FAILED), (api_key, version)


def test_refused_topics_and_configs_are_not_forwarded() -> None:
    ctx = context(19, 7, REFUSED)
    module = ctx.schema.request_module
    created = answer(admin_apis().create_topics, module.CreateTopicsRequest(
        topics=(module.CreatableTopic(name="t", num_partitions=1, replication_factor=1, assignments=(), configs=()),),
        timeout=timedelta(seconds=1), validate_only=False), ctx)
    assert [(t.name, t.error_code) for t in created.topics] == [("t", kafka_error(Errors.TOPIC_AUTHORIZATION_FAILED))]

    ctx = context(20, 6, REFUSED)
    module = ctx.schema.request_module
    deleted = answer(admin_apis().delete_topics, module.DeleteTopicsRequest(
        topics=(module.DeleteTopicState(name="t", topic_id=None),), timeout=timedelta(seconds=1)), ctx)
    assert deleted.responses[0].error_code == kafka_error(Errors.TOPIC_AUTHORIZATION_FAILED)

    ctx = context(32, 4, REFUSED)
    module = ctx.schema.request_module
    described = answer(admin_apis().describe_configs, module.DescribeConfigsRequest(resources=(
        module.DescribeConfigsResource(resource_type=TOPIC_RESOURCE, resource_name="t", configuration_keys=None),
        module.DescribeConfigsResource(resource_type=BROKER_RESOURCE, resource_name="1", configuration_keys=None)),
        include_synonyms=False, include_documentation=False), ctx)
    assert [r.error_code for r in described.results] == [kafka_error(Errors.TOPIC_AUTHORIZATION_FAILED),
                                                         kafka_error(Errors.CLUSTER_AUTHORIZATION_FAILED)]


class MemoryStore:
    """The authorizer's ZooKeeper store kept in memory."""

    def __init__(self) -> None:
        self.acls: dict = {}

    def read_all(self) -> dict:
        return {p: set(e) for p, e in self.acls.items() if e}

    def add(self, bindings) -> None:
        for b in bindings:
            self.acls.setdefault(b.pattern, set()).add(b.entry)

    def remove(self, bindings) -> None:
        for b in bindings:
            self.acls.get(b.pattern, set()).discard(b.entry)


def test_acls_are_created_described_and_deleted_over_the_kafka_protocol() -> None:
    authorizer = AclAuthorizer(None, super_users={"User:admin"})
    authorizer.store = MemoryStore()
    apis = AclKafkaApis(authorizer)
    admin = Access("User:admin", "127.0.0.1", authorizer)
    ctx = context(30, 3, admin)
    module = ctx.schema.request_module
    created = answer(apis.create_acls, module.CreateAclsRequest(creations=(
        module.AclCreation(resource_type=int(ResourceType.TOPIC), resource_name="t",
                           resource_pattern_type=int(PatternType.PREFIXED), principal="User:alice", host="*",
                           operation=3, permission_type=3),
        module.AclCreation(resource_type=int(ResourceType.TOPIC), resource_name="t",
                           resource_pattern_type=int(PatternType.MATCH), principal="User:alice", host="*",
                           operation=3, permission_type=3))), ctx)
    assert [r.error_code for r in created.results] == [kafka_error(Errors.NONE), kafka_error(Errors.INVALID_REQUEST)]

    ctx = context(29, 3, admin)
    described = answer(apis.describe_acls, ctx.schema.request_type(
        resource_type_filter=int(ResourceType.TOPIC), resource_name_filter="topic-1",
        pattern_type_filter=int(PatternType.MATCH), principal_filter=None, host_filter=None, operation=1,
        permission_type=1), ctx)
    assert [(r.resource_name, r.pattern_type, [a.principal for a in r.acls]) for r in described.resources] == [
        ("t", int(PatternType.PREFIXED), ["User:alice"])]
    refused = answer(apis.describe_acls, described_request := ctx.schema.request_type(
        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter=None,
        host_filter=None, operation=1, permission_type=1), context(29, 3, REFUSED))
    assert refused.error_code == kafka_error(Errors.CLUSTER_AUTHORIZATION_FAILED)
    disabled = answer(AclKafkaApis(None).describe_acls, described_request, ctx)
    assert disabled.error_code == kafka_error(Errors.SECURITY_DISABLED)

    ctx = context(31, 3, admin)
    module = ctx.schema.request_module
    deleted = answer(apis.delete_acls, module.DeleteAclsRequest(filters=(module.DeleteAclsFilter(
        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, principal_filter="User:alice",
        host_filter=None, operation=1, permission_type=1),)), ctx)
    assert [m.resource_name for m in deleted.filter_results[0].matching_acls] == ["t"]
    assert authorizer.acls() == []
