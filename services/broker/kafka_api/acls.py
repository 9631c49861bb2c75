"""DescribeAcls, CreateAcls and DeleteAcls over Kafka's protocol (versions 1-3, with pattern types),
answered from and written to ZooKeeper by the broker's authorizer. Describing needs DESCRIBE on the
cluster, creating and deleting ALTER (CLUSTER_AUTHORIZATION_FAILED otherwise); without an
authorizer (`authorizer.class.name` empty) each answers SECURITY_DISABLED, as Kafka does."""

from __future__ import annotations

import asyncio
from typing import Any

from services.common.errors import Errors
from services.common.kafka_wire import ApiRegistry, RequestContext, fields_of, kafka_error
from services.common.security.acl import (
    CLUSTER_NAME,
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

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
ACL_API_VERSIONS = {DESCRIBE_ACLS: (1, 3), CREATE_ACLS: (1, 3), DELETE_ACLS: (1, 3)}


class AclKafkaApis:
    def __init__(self, authorizer: AclAuthorizer | None) -> None:
        self.authorizer = authorizer

    def register(self, registry: ApiRegistry) -> None:
        handlers = {DESCRIBE_ACLS: self.describe_acls, CREATE_ACLS: self.create_acls, DELETE_ACLS: self.delete_acls}
        for api_key, (low, high) in ACL_API_VERSIONS.items():
            registry.register(api_key, low, high, handlers[api_key])

    def _refusal(self, context: RequestContext, operation: AclOperation) -> tuple[int, str] | None:
        if self.authorizer is None:
            return Errors.SECURITY_DISABLED, "No Authorizer is configured on the broker"
        if not context.access.allowed(operation, ResourceType.CLUSTER, CLUSTER_NAME):
            return Errors.CLUSTER_AUTHORIZATION_FAILED, None
        return None

    async def describe_acls(self, request: Any, context: RequestContext) -> Any:
        refusal = self._refusal(context, AclOperation.DESCRIBE)
        if refusal is not None:
            return fields_of(context.response_type, error_code=kafka_error(refusal[0]), error_message=refusal[1],
                             resources=())
        module = context.response_module
        grouped: dict[ResourcePattern, list[AccessControlEntry]] = {}
        for binding in self.authorizer.acls(_filter(request)):
            grouped.setdefault(binding.pattern, []).append(binding.entry)
        return fields_of(context.response_type, error_code=kafka_error(Errors.NONE), error_message=None,
                         resources=tuple(module.DescribeAclsResource(
                             resource_type=int(p.resource_type), resource_name=p.name, pattern_type=int(p.pattern_type),
                             acls=tuple(module.AclDescription(principal=e.principal, host=e.host,
                                                              operation=int(e.operation),
                                                              permission_type=int(e.permission)) for e in entries))
                             for p, entries in grouped.items()))

    async def create_acls(self, request: Any, context: RequestContext) -> Any:
        module = context.response_module
        refusal = self._refusal(context, AclOperation.ALTER)
        results: list[tuple[int, str | None]] = []
        valid: list[AclBinding] = []
        for creation in request.creations:
            if refusal is not None:
                results.append(refusal)
                continue
            try:
                binding = AclBinding(
                    ResourcePattern(ResourceType(creation.resource_type), creation.resource_name,
                                    PatternType(creation.resource_pattern_type)),
                    AccessControlEntry(creation.principal, creation.host, AclOperation(creation.operation),
                                       PermissionType(creation.permission_type)))
                problem = validate_binding(binding)
            except ValueError as exc:
                problem = str(exc)
            if problem is not None:
                results.append((Errors.INVALID_REQUEST, problem))
                continue
            valid.append(binding)
            results.append((Errors.NONE, None))
        if valid:
            await asyncio.get_running_loop().run_in_executor(None, self.authorizer.create_acls, valid)
        return fields_of(context.response_type, results=tuple(
            module.AclCreationResult(error_code=kafka_error(code), error_message=message) for code, message in results))

    async def delete_acls(self, request: Any, context: RequestContext) -> Any:
        module = context.response_module
        refusal = self._refusal(context, AclOperation.ALTER)
        if refusal is not None:
            return fields_of(context.response_type, filter_results=tuple(
                module.DeleteAclsFilterResult(error_code=kafka_error(refusal[0]), error_message=refusal[1],
                                              matching_acls=()) for _ in request.filters))
        filters = [_filter(f) for f in request.filters]
        removed = await asyncio.get_running_loop().run_in_executor(None, self.authorizer.delete_acls, filters)
        return fields_of(context.response_type, filter_results=tuple(
            module.DeleteAclsFilterResult(error_code=kafka_error(Errors.NONE), error_message=None, matching_acls=tuple(
                module.DeleteAclsMatchingAcl(
                    error_code=kafka_error(Errors.NONE), error_message=None,
                    resource_type=int(b.pattern.resource_type), resource_name=b.pattern.name,
                    pattern_type=int(b.pattern.pattern_type), principal=b.entry.principal, host=b.entry.host,
                    operation=int(b.entry.operation), permission_type=int(b.entry.permission)) for b in bindings))
            for bindings in removed))


def _filter(request: Any) -> AclBindingFilter:
    """A DescribeAcls request or a DeleteAcls filter as an AclBindingFilter."""
    return AclBindingFilter(ResourceType(request.resource_type_filter), request.resource_name_filter,
                            PatternType(request.pattern_type_filter), request.principal_filter, request.host_filter,
                            AclOperation(request.operation), PermissionType(request.permission_type))
