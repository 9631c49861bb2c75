"""Kafka's ACLs in ZooKeeper, as Kafka 2.8's AclAuthorizer keeps them.

Literal patterns sit under `/kafka-acl/<ResourceType>/<name>`, prefixed ones under
`/kafka-acl-extended/prefixed/<ResourceType>/<name>`; each holds every entry of its pattern:

    {"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}

A change to a literal pattern is announced by a persistent sequential `/kafka-acl-changes/acl_changes_<seq>`
holding `Topic:name`; to a prefixed one by `/kafka-acl-extended-changes/acl_changes_<seq>` holding
`{"version":1,"resourceType":"Topic","name":"pre","patternType":"Prefixed"}`. Authorizers watch both
and reread the named pattern.
"""

from __future__ import annotations

from collections.abc import Iterable

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError

from services.common.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
    by_name,
)
from services.common.zk.codec import dumps, loads_object
from services.common.zk.errors import ZnodeFormatError

LITERAL_ACL_PATH = "/kafka-acl"
PREFIXED_ACL_PATH = "/kafka-acl-extended/prefixed"
LITERAL_CHANGES_PATH = "/kafka-acl-changes"
EXTENDED_CHANGES_PATH = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
STORED_RESOURCE_TYPES = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
                         ResourceType.TRANSACTIONAL_ID, ResourceType.DELEGATION_TOKEN, ResourceType.USER)


def pattern_path(pattern: ResourcePattern) -> str:
    root = PREFIXED_ACL_PATH if pattern.pattern_type == PatternType.PREFIXED else LITERAL_ACL_PATH
    return f"{root}/{pattern.resource_type.zk_name}/{pattern.name}"


def encode_entries(entries: Iterable[AccessControlEntry]) -> bytes:
    return dumps({"version": 1, "acls": [
        {"principal": e.principal, "permissionType": e.permission.zk_name, "operation": e.operation.zk_name,
         "host": e.host} for e in sorted(entries, key=_entry_order)]})


def decode_entries(data: bytes | None, what: str) -> set[AccessControlEntry]:
    if not data:
        return set()
    acls = loads_object(data, what).get("acls") or []
    try:
        return {AccessControlEntry(str(a["principal"]), str(a["host"]), by_name(AclOperation, a["operation"]),
                                   by_name(PermissionType, a["permissionType"])) for a in acls}
    except (KeyError, TypeError, ValueError) as exc:
        raise ZnodeFormatError(f"{what}: bad ACL entry: {exc}") from None


def encode_change(pattern: ResourcePattern) -> bytes:
    if pattern.pattern_type == PatternType.LITERAL:
        return f"{pattern.resource_type.zk_name}:{pattern.name}".encode()
    return dumps({"version": 1, "resourceType": pattern.resource_type.zk_name, "name": pattern.name,
                  "patternType": pattern.pattern_type.name.capitalize()})


def _entry_order(entry: AccessControlEntry) -> tuple:
    return entry.principal, entry.host, entry.operation, entry.permission


class ZkAclStore:
    """Reads and writes the ACL znodes over a kazoo client (paths relative to its chroot)."""

    def __init__(self, zk: KazooClient) -> None:
        self.zk = zk

    def ensure_paths(self) -> None:
        for path in (LITERAL_ACL_PATH, PREFIXED_ACL_PATH, LITERAL_CHANGES_PATH, EXTENDED_CHANGES_PATH):
            self.zk.ensure_path(path)

    def read_all(self) -> dict[ResourcePattern, set[AccessControlEntry]]:
        found: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for root, pattern_type in ((LITERAL_ACL_PATH, PatternType.LITERAL), (PREFIXED_ACL_PATH, PatternType.PREFIXED)):
            for resource_type in STORED_RESOURCE_TYPES:
                try:
                    names = self.zk.get_children(f"{root}/{resource_type.zk_name}")
                except NoNodeError:
                    continue
                for name in names:
                    pattern = ResourcePattern(resource_type, name, pattern_type)
                    entries = self.read(pattern)
                    if entries:
                        found[pattern] = entries
        return found

    def read(self, pattern: ResourcePattern) -> set[AccessControlEntry]:
        path = pattern_path(pattern)
        try:
            data, _ = self.zk.get(path)
        except NoNodeError:
            return set()
        return decode_entries(data, path)

    def add(self, bindings: Iterable[AclBinding]) -> None:
        for pattern, entries in _by_pattern(bindings).items():
            self._update(pattern, lambda current, e=entries: current | e)

    def remove(self, bindings: Iterable[AclBinding]) -> None:
        for pattern, entries in _by_pattern(bindings).items():
            self._update(pattern, lambda current, e=entries: current - e)

    def _update(self, pattern: ResourcePattern, change) -> None:
        path = pattern_path(pattern)
        while True:
            try:
                data, stat = self.zk.get(path)
                current, version = decode_entries(data, path), stat.version
            except NoNodeError:
                current, version = set(), None
            wanted = change(current)
            if wanted == current:
                return
            try:
                if not wanted:
                    self.zk.delete(path, version=version)
                elif version is None:
                    self.zk.create(path, encode_entries(wanted), makepath=True)
                else:
                    self.zk.set(path, encode_entries(wanted), version=version)
            except (BadVersionError, NodeExistsError, NoNodeError, NotEmptyError):
                continue
            break
        changes = LITERAL_CHANGES_PATH if pattern.pattern_type == PatternType.LITERAL else EXTENDED_CHANGES_PATH
        self.zk.create(f"{changes}/{CHANGE_PREFIX}", encode_change(pattern), sequence=True, makepath=True)


def _by_pattern(bindings: Iterable[AclBinding]) -> dict[ResourcePattern, set[AccessControlEntry]]:
    grouped: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for binding in bindings:
        grouped.setdefault(binding.pattern, set()).add(binding.entry)
    return grouped
