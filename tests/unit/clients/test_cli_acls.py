"""`odradek acls`'s flags as kafka-acls.sh reads them: the ACLs --add writes (with --producer,
--consumer, hosts and pattern types), the filters --list and --remove match with, and refusals."""

from __future__ import annotations

import argparse

import pytest

from services.clients.cli import build_parser
from services.clients.cli_acls import AclCommandError, bindings_to_add, filters
from services.common.security.acl import AclOperation, PatternType, PermissionType, ResourceType

ZK = ["--authorizer-properties", "zookeeper.connect=127.0.0.1:2181/odradek"]


def parse(*argv: str) -> argparse.Namespace:
    args = build_parser().parse_args(["acls", *ZK, *argv])
    args.check(args)
    return args


def summary(args: argparse.Namespace) -> set[tuple]:
    return {(b.pattern.resource_type, b.pattern.name, b.pattern.pattern_type, b.entry.principal, b.entry.host,
             b.entry.operation, b.entry.permission) for b in bindings_to_add(args)}


def test_add_with_operations_hosts_and_prefixes() -> None:
    args = parse("--add", "--allow-principal", "User:alice", "--allow-host", "10.0.0.1", "--deny-principal",
                 "User:bob", "--operation", "Read", "--operation", "describe-configs", "--topic", "logs-",
                 "--resource-pattern-type", "prefixed")
    T, P = ResourceType.TOPIC, PatternType.PREFIXED
    assert summary(args) == {
        (T, "logs-", P, "User:alice", "10.0.0.1", AclOperation.READ, PermissionType.ALLOW),
        (T, "logs-", P, "User:alice", "10.0.0.1", AclOperation.DESCRIBE_CONFIGS, PermissionType.ALLOW),
        (T, "logs-", P, "User:bob", "*", AclOperation.READ, PermissionType.DENY),
        (T, "logs-", P, "User:bob", "*", AclOperation.DESCRIBE_CONFIGS, PermissionType.DENY)}


def test_producer_and_consumer_shortcuts() -> None:
    producer = parse("--add", "--allow-principal", "User:p", "--producer", "--topic", "t", "--transactional-id", "x",
                     "--idempotent")
    assert {(r, n, o) for r, n, _, _, _, o, _ in summary(producer)} == {
        (ResourceType.TOPIC, "t", AclOperation.WRITE), (ResourceType.TOPIC, "t", AclOperation.DESCRIBE),
        (ResourceType.TOPIC, "t", AclOperation.CREATE), (ResourceType.TRANSACTIONAL_ID, "x", AclOperation.WRITE),
        (ResourceType.TRANSACTIONAL_ID, "x", AclOperation.DESCRIBE),
        (ResourceType.CLUSTER, "kafka-cluster", AclOperation.IDEMPOTENT_WRITE)}
    consumer = parse("--add", "--allow-principal", "User:c", "--consumer", "--topic", "t", "--group", "g")
    assert {(r, o) for r, _, _, _, _, o, _ in summary(consumer)} == {
        (ResourceType.TOPIC, AclOperation.READ), (ResourceType.TOPIC, AclOperation.DESCRIBE),
        (ResourceType.GROUP, AclOperation.READ)}


def test_list_and_remove_filters() -> None:
    everything = filters(parse("--list"))
    assert len(everything) == 1 and everything[0].resource_type == ResourceType.ANY
    assert everything[0].pattern_type == PatternType.ANY
    matching = filters(parse("--list", "--topic", "t", "--resource-pattern-type", "match", "--principal", "User:a"))
    assert [(f.name, f.pattern_type, f.principal) for f in matching] == [("t", PatternType.MATCH, "User:a")]
    removal = filters(parse("--remove", "--allow-principal", "User:a", "--operation", "Write", "--group", "g"))
    assert [(f.resource_type, f.operation, f.permission) for f in removal] == [
        (ResourceType.GROUP, AclOperation.WRITE, PermissionType.ALLOW)]


def test_refusals() -> None:
    with pytest.raises(SystemExit):
        parse("--add", "--allow-principal", "User:a", "--operation", "Read")  # no resource
    with pytest.raises(SystemExit):
        parse("--add", "--topic", "t")  # no principal
    with pytest.raises(AclCommandError):
        bindings_to_add(parse("--add", "--allow-principal", "alice", "--topic", "t"))
    with pytest.raises(AclCommandError):
        bindings_to_add(parse("--add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type",
                              "match"))
