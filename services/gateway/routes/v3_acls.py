"""REST Proxy v3's ACL resources, over the ACLs in ZooKeeper (`zk.acls`, through `AclAuthorizer`):

    GET    /v3/clusters/{cluster_id}/acls?<filter>   KafkaAclList of the ACLs the filter matches
    POST   /v3/clusters/{cluster_id}/acls            creates one ACL (201)
    POST   /v3/clusters/{cluster_id}/acls:batch      creates the ACLs of {"data": [...]} (201)
    DELETE /v3/clusters/{cluster_id}/acls?<filter>   deletes the ACLs the filter matches; answers them

An ACL is `resource_type`, `resource_name`, `pattern_type`, `principal`, `host`, `operation` and
`permission`, Kafka's enum names. A filter takes the same fields as query parameters (absent: any);
DELETE needs resource_type, pattern_type, operation and permission, as REST Proxy does. Without
`zookeeper.connect` the gateway has no ACLs to serve: 400/40002 SECURITY_DISABLED.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field

from services.common.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
    validate_binding,
)
from services.common.security.authorizer import AclAuthorizer
from services.gateway.errors import KAFKA_BAD_REQUEST, RestError, error_responses
from services.gateway.routes.v3_resources import V3_ERRORS, ClusterLinks, Links, invalid_payload, json_body
from services.gateway.security import security_of
from services.gateway.state import State

router = APIRouter(tags=["v3"], responses=V3_ERRORS)

ACLS = "/v3/clusters/{cluster_id}/acls"
ResourceTypeName = Literal["UNKNOWN", "ANY", "TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN",
                           "USER"]
PatternTypeName = Literal["UNKNOWN", "ANY", "MATCH", "LITERAL", "PREFIXED"]
OperationName = Literal["UNKNOWN", "ANY", "ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE",
                        "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "CREATE_TOKENS",
                        "DESCRIBE_TOKENS"]
PermissionName = Literal["UNKNOWN", "ANY", "DENY", "ALLOW"]


class AclData(BaseModel):
    """One ACL, as POST takes it."""

    resource_type: ResourceTypeName
    resource_name: str = Field(min_length=1)
    pattern_type: PatternTypeName
    principal: str = Field(min_length=1)
    host: str = Field(min_length=1)
    operation: OperationName
    permission: PermissionName


class AclBatch(BaseModel):
    data: list[AclData]


def binding_of(acl: AclData) -> AclBinding:
    binding = AclBinding(ResourcePattern(ResourceType[acl.resource_type], acl.resource_name,
                                         PatternType[acl.pattern_type]),
                         AccessControlEntry(acl.principal, acl.host, AclOperation[acl.operation],
                                            PermissionType[acl.permission]))
    problem = validate_binding(binding)
    if problem is None and not ZNODE_NAME.fullmatch(acl.resource_name):
        problem = "the resource name cannot be a ZooKeeper node name (no '/', no control characters, not . or ..)"
    if problem is not None:
        raise invalid_payload(f"Invalid ACL: {problem}.")
    return binding


def acl_data(at: Links, binding: AclBinding) -> dict[str, Any]:
    pattern, entry = binding.pattern, binding.entry
    fields = {"resource_type": pattern.resource_type.name, "resource_name": pattern.name,
              "pattern_type": pattern.pattern_type.name, "principal": entry.principal, "host": entry.host,
              "operation": entry.operation.name, "permission": entry.permission.name}
    return {"kind": "KafkaAcl", "metadata": {"self": f"{at.url('acls')}?{urlencode(fields)}"},
            "cluster_id": at.cluster_id, **fields}


def acl_list(at: Links, bindings: list[AclBinding], query: str) -> dict[str, Any]:
    listing = at.collection("KafkaAclList", ("acls",), [acl_data(at, b) for b in bindings])
    if query:
        listing["metadata"]["self"] += f"?{query}"
    return listing


def acl_admin(request: Request) -> AclAuthorizer:
    security = security_of(request)
    admin = security.acl_admin() if security is not None else None
    if admin is None:
        raise RestError(400, KAFKA_BAD_REQUEST, "SECURITY_DISABLED: no zookeeper.connect: the gateway has no ACLs.")
    return admin


def acl_filter(resource_type: str | None, resource_name: str | None, pattern_type: str | None,
               principal: str | None, host: str | None, operation: str | None,
               permission: str | None) -> AclBindingFilter:
    return AclBindingFilter(ResourceType[resource_type or "ANY"], resource_name, PatternType[pattern_type or "ANY"],
                            principal, host, AclOperation[operation or "ANY"], PermissionType[permission or "ANY"])


FILTER_DOC = "Absent: any."
# a name ZooKeeper takes as one node of /kafka-acl/<type>/<name>
ZNODE_NAME = re.compile(r"(?!\.\.?$)[^/\x00-\x1f\x7f-\x9f\ud800-\uf8ff\ufff0-\uffff]+")
BATCH_SCHEMA = {"type": "object", "required": ["data"],
                "properties": {"data": {"type": "array", "items": AclData.model_json_schema()}}}


@router.get(ACLS, summary="List the ACLs a filter matches")
async def list_acls(request: Request, state: State, at: ClusterLinks,
                    resource_type: Annotated[ResourceTypeName | None, Query(description=FILTER_DOC)] = None,
                    resource_name: Annotated[str | None, Query(description=FILTER_DOC)] = None,
                    pattern_type: Annotated[PatternTypeName | None, Query(description=FILTER_DOC)] = None,
                    principal: Annotated[str | None, Query(description=FILTER_DOC)] = None,
                    host: Annotated[str | None, Query(description=FILTER_DOC)] = None,
                    operation: Annotated[OperationName | None, Query(description=FILTER_DOC)] = None,
                    permission: Annotated[PermissionName | None, Query(description=FILTER_DOC)] = None) -> JSONResponse:
    wanted = acl_filter(resource_type, resource_name, pattern_type, principal, host, operation, permission)
    found = await state.blocking(_current_acls, await state.blocking(acl_admin, request), wanted)
    return JSONResponse(acl_list(at, found, request.url.query))


def _current_acls(admin: AclAuthorizer, wanted: AclBindingFilter) -> list[AclBinding]:
    admin.reload()
    return admin.acls(wanted)


@router.post(ACLS, status_code=201, summary="Create an ACL", responses=error_responses(415),
             openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
                 "schema": AclData.model_json_schema()}}}})
async def create_acl(request: Request, state: State, at: ClusterLinks) -> Response:
    binding = binding_of(_parse(AclData, await json_body(request)))
    await state.blocking(lambda: acl_admin(request).create_acls([binding]))
    return Response(status_code=201)


@router.post(ACLS + ":batch", status_code=201, summary="Create several ACLs", responses=error_responses(415),
             openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
                 "schema": BATCH_SCHEMA}}}})
async def create_acls(request: Request, state: State, at: ClusterLinks) -> Response:
    bindings = [binding_of(acl) for acl in _parse(AclBatch, await json_body(request)).data]
    await state.blocking(lambda: acl_admin(request).create_acls(bindings))
    return Response(status_code=201)


@router.delete(ACLS, summary="Delete the ACLs a filter matches")
async def delete_acls(request: Request, state: State, at: ClusterLinks, *,
                      resource_type: Annotated[ResourceTypeName, Query(description="Required.")],
                      resource_name: Annotated[str | None, Query(description=FILTER_DOC)] = None,
                      pattern_type: Annotated[PatternTypeName, Query(description="Required.")],
                      principal: Annotated[str | None, Query(description=FILTER_DOC)] = None,
                      host: Annotated[str | None, Query(description=FILTER_DOC)] = None,
                      operation: Annotated[OperationName, Query(description="Required.")],
                      permission: Annotated[PermissionName, Query(description="Required.")]) -> JSONResponse:
    wanted = acl_filter(resource_type, resource_name, pattern_type, principal, host, operation, permission)
    deleted = (await state.blocking(lambda: acl_admin(request).delete_acls([wanted])))[0]
    return JSONResponse({"data": [acl_data(at, b) for b in deleted]})


def _parse(model: type[BaseModel], body: Any):
    try:
        return model.model_validate(body)
    except ValueError as error:
        raise invalid_payload(f"Invalid ACL: {error}") from None
