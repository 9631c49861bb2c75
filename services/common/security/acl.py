"""Kafka's ACL model: a binding of a resource pattern (resource type, name, pattern type) to an
entry (principal, host, operation, permission), the filters that match bindings (as DescribeAcls
and DeleteAcls take them), and the codes and names Kafka gives each enum on the wire, in ZooKeeper
and in kafka-acls.sh."""

from __future__ import annotations

import enum
from dataclasses import dataclass

WILDCARD_RESOURCE = "*"
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"
CLUSTER_NAME = "kafka-cluster"


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7

    @property
    def zk_name(self) -> str:
        """The name in ZooKeeper paths: Topic, Group, Cluster, TransactionalId, DelegationToken, User."""
        return "".join(part.capitalize() for part in self.name.split("_"))


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14

    @property
    def zk_name(self) -> str:
        """Read, Write, ClusterAction, DescribeConfigs, IdempotentWrite, All, ..."""
        return "".join(part.capitalize() for part in self.name.split("_"))


class PermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3

    @property
    def zk_name(self) -> str:
        return self.name.capitalize()


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


# Operations an ALLOW of another operation implies (Kafka's AclAuthorizer): DESCRIBE by READ, WRITE,
# DELETE and ALTER; DESCRIBE_CONFIGS by ALTER_CONFIGS. DENY implies nothing beyond ALL.
IMPLIED_BY = {
    AclOperation.DESCRIBE: frozenset({AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE,
                                      AclOperation.ALTER}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.ALTER_CONFIGS}),
}


def by_name(enum_type: type[enum.IntEnum], text: str):
    """An enum member from Kafka's CLI (`TransactionalId`, `transactional-id`, `IDEMPOTENT_WRITE`) or
    ZooKeeper name, case and separators ignored."""
    wanted = text.replace("-", "").replace("_", "").lower()
    for member in enum_type:
        if member.name.replace("_", "").lower() == wanted:
            return member
    raise ValueError(f"unknown {enum_type.__name__} {text!r}")


@dataclass(frozen=True, slots=True)
class Resource:
    """A concrete resource a request acts on: `Resource(ResourceType.TOPIC, "orders")`."""

    resource_type: ResourceType
    name: str


CLUSTER_RESOURCE = Resource(ResourceType.CLUSTER, CLUSTER_NAME)


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def matches(self, resource_type: ResourceType, name: str) -> bool:
        """Whether this pattern covers the concrete resource (`name` of `resource_type`)."""
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PatternType.PREFIXED:
            return name.startswith(self.name)
        return self.name in (name, WILDCARD_RESOURCE)


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission: PermissionType


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """None matches anything; resource type ANY, operation ANY, permission ANY likewise. Pattern type
    ANY matches any pattern of exactly `name`; MATCH every pattern that would cover the resource
    `name` (literal `name`, literal `*`, and prefixes of `name`)."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: PermissionType = PermissionType.ANY

    def matches(self, binding: AclBinding) -> bool:
        pattern, entry = binding.pattern, binding.entry
        if self.resource_type != ResourceType.ANY and pattern.resource_type != self.resource_type:
            return False
        if self.pattern_type == PatternType.MATCH:
            if self.name is not None and not (
                    pattern.name == self.name or (pattern.pattern_type == PatternType.LITERAL
                                                  and pattern.name == WILDCARD_RESOURCE)
                    or (pattern.pattern_type == PatternType.PREFIXED and self.name.startswith(pattern.name))):
                return False
        else:
            if self.pattern_type != PatternType.ANY and pattern.pattern_type != self.pattern_type:
                return False
            if self.name is not None and pattern.name != self.name:
                return False
        return ((self.principal is None or entry.principal == self.principal)
                and (self.host is None or entry.host == self.host)
                and (self.operation == AclOperation.ANY or entry.operation == self.operation)
                and (self.permission == PermissionType.ANY or entry.permission == self.permission))


def entry_matches(entry: AccessControlEntry, principal: str, host: str, operation: AclOperation,
                  permission: PermissionType) -> bool:
    """Whether `entry` grants (or denies) `operation` to `principal` from `host` with `permission`:
    the principal or `User:*`, the host or `*`, and the operation itself or ALL (or, for ALLOW, one
    that implies it)."""
    if entry.permission != permission:
        return False
    if entry.principal not in (principal, WILDCARD_PRINCIPAL) or entry.host not in (host, WILDCARD_HOST):
        return False
    if entry.operation in (operation, AclOperation.ALL):
        return True
    return permission == PermissionType.ALLOW and entry.operation in IMPLIED_BY.get(operation, ())


def validate_binding(binding: AclBinding) -> str | None:
    """Why CreateAcls refuses `binding`, or None: no UNKNOWN/ANY/MATCH values, a `User:`-like principal."""
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return "resource type must be concrete"
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return "pattern type must be LITERAL or PREFIXED"
    if entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return "operation must be concrete"
    if entry.permission not in (PermissionType.ALLOW, PermissionType.DENY):
        return "permission type must be ALLOW or DENY"
    if ":" not in entry.principal:
        return f"invalid principal {entry.principal!r}: expected <type>:<name>"
    if not pattern.name:
        return "resource name must not be empty"
    if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        return f"the cluster resource is named {CLUSTER_NAME}"
    return None
