"""The ACL authorizer: Kafka 2.8's AclAuthorizer rules over the ACLs in ZooKeeper (`zk.acls`),
cached in memory and reread when `/kafka-acl-changes` or `/kafka-acl-extended-changes` changes.

`authorize(principal, host, operation, resource)` holds when the principal is one of
`super.users`; else no DENY entry matching principal (or `User:*`), host (or `*`) and operation (or
ALL) may cover the resource; else, when no ACL at all covers the resource,
`allow.everyone.if.no.acl.found` decides; else an ALLOW entry must match, where an ALLOW of READ,
WRITE, DELETE or ALTER also grants DESCRIBE and one of ALTER_CONFIGS grants DESCRIBE_CONFIGS.
Every refusal is written to the `odradek.audit` logger. The Kafka listeners and the gRPC services
(`grpc_auth`) call it; any other front end can call the same method with the principal it
authenticated. `AuthorizerConfig` holds its keys and `node_authorizer` starts a node's one.
`Access` is what a request's handler asks it through (the caller's principal and host), and
`init_producer_id_denied` the rule InitProducerId shares between the Kafka API and gRPC.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from kazoo.client import KazooClient

from services.common.config import Config, ConfigType, setting
from services.common.errors import Errors
from services.common.security.acl import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    PermissionType,
    Resource,
    ResourcePattern,
    ResourceType,
    entry_matches,
)
from services.common.security.sasl import ANONYMOUS_PRINCIPAL
from services.common.zk.acls import EXTENDED_CHANGES_PATH, LITERAL_CHANGES_PATH, ZkAclStore

audit = logging.getLogger("odradek.audit")
MATCH_EVERY_ACL = AclBindingFilter()
logger = logging.getLogger(__name__)


def parse_super_users(text: str | None) -> frozenset[str]:
    """`super.users`: principals separated by semicolons (`User:admin;User:coordinator`)."""
    return frozenset(p.strip() for p in (text or "").split(";") if p.strip())


class AuthorizerConfig(Config):
    """A node's authorizer keys, for its Kafka listener and its gRPC services alike."""

    authorizer_class_name: str = setting(
        ConfigType.STRING, "",
        doc="Empty: every request is allowed. Any class name (Kafka's "
            "kafka.security.authorizer.AclAuthorizer) enforces the ACLs in ZooKeeper.")
    super_users: str | None = setting(
        ConfigType.STRING, None, doc="Principals the authorizer allows everything, separated by ';'.")
    allow_everyone_if_no_acl_found: bool = setting(
        ConfigType.BOOLEAN, False, doc="Whether a resource no ACL covers is open to every principal.")


def node_authorizer(config: AuthorizerConfig, zk: KazooClient) -> AclAuthorizer | None:
    """The node's started authorizer (its ACLs loaded and watched), or None when it has none."""
    if not config.authorizer_class_name:
        return None
    authorizer = AclAuthorizer(zk, parse_super_users(config.super_users), config.allow_everyone_if_no_acl_found)
    authorizer.start()
    return authorizer


class AclAuthorizer:
    def __init__(self, zk: KazooClient | None, super_users: Iterable[str] = (),
                 allow_everyone_if_no_acl_found: bool = False) -> None:
        self.store = ZkAclStore(zk) if zk is not None else None
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        self._lock = threading.Lock()

    def start(self) -> None:
        """Loads every ACL and watches the change znodes (the store's client must be started)."""
        if self.store is None:
            return
        self.store.ensure_paths()
        self.reload()
        for path in (LITERAL_CHANGES_PATH, EXTENDED_CHANGES_PATH):
            self.store.zk.ChildrenWatch(path, self._on_changes)

    def _on_changes(self, children: list[str]) -> None:
        try:
            self.reload()
        except Exception:
            logger.exception("rereading the ACLs failed; the cached ones stay in force")

    def reload(self) -> None:
        acls = {pattern: frozenset(entries) for pattern, entries in self.store.read_all().items()}
        with self._lock:
            self._acls = acls

    def set_acls(self, acls: dict[ResourcePattern, Iterable[AccessControlEntry]]) -> None:
        """Replaces the cache (an authorizer without ZooKeeper, as in unit tests)."""
        with self._lock:
            self._acls = {pattern: frozenset(entries) for pattern, entries in acls.items()}

    # ------------------------------------------------------------------ decisions

    def authorize(self, principal: str, host: str, operation: AclOperation, resource: Resource, *,
                  log_denial: bool = True) -> bool:
        """Whether `principal` connecting from `host` may do `operation` on `resource`; a refusal is
        audited unless `log_denial` is False (a listing that leaves out what may not be seen)."""
        allowed = self._decide(principal, host, operation, resource.resource_type, resource.name)
        if not allowed and log_denial:
            audit.info("Principal = %s is Denied Operation = %s from host = %s on resource = %s:LITERAL:%s",
                       principal, operation.zk_name, host, resource.resource_type.zk_name, resource.name)
        return allowed

    def _decide(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                name: str) -> bool:
        if principal in self.super_users:
            return True
        entries = self.matching_entries(resource_type, name)
        if any(entry_matches(e, principal, host, operation, PermissionType.DENY) for e in entries):
            return False
        if not entries:
            return self.allow_everyone_if_no_acl_found
        return any(entry_matches(e, principal, host, operation, PermissionType.ALLOW) for e in entries)

    def matching_entries(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        with self._lock:
            acls = self._acls
        return [entry for pattern, entries in acls.items() if pattern.matches(resource_type, name)
                for entry in entries]

    def authorize_any(self, principal: str, host: str, operation: AclOperation,
                      resource_type: ResourceType) -> bool:
        """Whether some resource of the type may be operated on (Kafka's authorizeByResourceType,
        simplified): a super user, or any ALLOW entry of the type for the principal that no DENY of
        the same pattern cancels."""
        if principal in self.super_users:
            return True
        with self._lock:
            acls = self._acls
        for pattern, entries in acls.items():
            if pattern.resource_type != resource_type:
                continue
            if (any(entry_matches(e, principal, host, operation, PermissionType.ALLOW) for e in entries)
                    and not any(entry_matches(e, principal, host, operation, PermissionType.DENY) for e in entries)):
                return True
        return False

    # ------------------------------------------------------------------ management

    def acls(self, binding_filter: AclBindingFilter = MATCH_EVERY_ACL) -> list[AclBinding]:
        with self._lock:
            acls = self._acls
        found = [AclBinding(pattern, entry) for pattern, entries in acls.items() for entry in entries]
        return sorted((b for b in found if binding_filter.matches(b)), key=_binding_order)

    def create_acls(self, bindings: Iterable[AclBinding]) -> None:
        self.store.add(bindings)
        self.reload()

    def delete_acls(self, filters: Iterable[AclBindingFilter]) -> list[list[AclBinding]]:
        """The bindings each filter removed (from ZooKeeper's current ACLs)."""
        filters = list(filters)
        self.reload()
        matched = [self.acls(f) for f in filters]
        self.store.remove({b for bindings in matched for b in bindings})
        self.reload()
        return matched


def _binding_order(binding: AclBinding) -> tuple:
    p, e = binding.pattern, binding.entry
    return p.resource_type, p.pattern_type, p.name, e.principal, e.host, e.operation, e.permission


@dataclass(frozen=True, slots=True)
class Access:
    """What a request's handler asks of the authorizer: the connection's principal and host."""

    principal: str
    host: str
    authorizer: AclAuthorizer | None

    def allowed(self, operation: AclOperation, resource_type: ResourceType, name: str, *,
                log_denial: bool = True) -> bool:
        if self.authorizer is None:
            return True
        return self.authorizer.authorize(self.principal, self.host, operation, Resource(resource_type, name),
                                         log_denial=log_denial)

    def allowed_any(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        if self.authorizer is None:
            return True
        return self.authorizer.authorize_any(self.principal, self.host, operation, resource_type)


OPEN_ACCESS = Access(ANONYMOUS_PRINCIPAL, "", None)


def init_producer_id_denied(transactional_id: str | None, access: Access) -> int | None:
    """Why InitProducerId is refused, or None: a transactional producer needs WRITE on its
    transactional id; an idempotent one IDEMPOTENT_WRITE on the cluster or WRITE on some topic."""
    if transactional_id:
        if not access.allowed(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            return Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return None
    if access.allowed(AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME, log_denial=False):
        return None
    if access.allowed_any(AclOperation.WRITE, ResourceType.TOPIC):
        return None
    access.allowed(AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME)  # audited
    return Errors.CLUSTER_AUTHORIZATION_FAILED
