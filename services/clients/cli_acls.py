"""`odradek acls`: Kafka's kafka-acls.sh over the ACLs in ZooKeeper (its
`--authorizer-properties zookeeper.connect=...` mode), with Kafka's flags.

    acls --authorizer-properties zookeeper.connect=ZK --add --allow-principal User:alice \\
         [--allow-host H] [--deny-principal P] [--deny-host H] --operation Read [--operation Describe] \\
         (--topic T | --group G | --cluster | --transactional-id X)... [--resource-pattern-type prefixed]
    acls ... --remove (same selection; a missing --operation or principal removes every matching ACL)
    acls ... --list [--topic T ...] [--principal P] [--resource-pattern-type any|match|literal|prefixed]
    acls ... --add --allow-principal P --producer --topic T [--transactional-id X] [--idempotent]
    acls ... --add --allow-principal P --consumer --topic T --group G

--producer grants WRITE, DESCRIBE and CREATE on the topics (WRITE and DESCRIBE on the transactional
ids, IDEMPOTENT_WRITE on the cluster with --idempotent); --consumer READ and DESCRIBE on the topics
and READ on the groups. Each resource is printed as kafka-acls.sh prints it (a tab before each entry):

    Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`:
        (principal=User:alice, host=*, operation=READ, permissionType=ALLOW)

`--zk-tls-config-file FILE` reaches ZooKeeper over TLS with the `zookeeper.ssl.*` keys in FILE.
The brokers' authorizers see a change within their ZooKeeper watch. A failure prints `Error: <message>`
and exits with 1.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Iterable
from typing import TextIO

from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from services.common.security.acl import (
    CLUSTER_NAME,
    WILDCARD_HOST,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
    by_name,
)
from services.common.security.authorizer import AclAuthorizer
from services.common.zk.connect import zk_client, zk_tls_from_file


class AclCommandError(Exception):
    """A user error reported before anything is changed."""


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("acls", help="add, remove or list Kafka ACLs",
                                   description="Add, remove or list the ACLs the Kafka listeners enforce.")
    parser.add_argument("--authorizer-properties", nargs="+", default=[], metavar="K=V",
                        help="zookeeper.connect=HOST:PORT[/CHROOT]: where the ACLs are kept")
    parser.add_argument("--zk-tls-config-file", metavar="FILE",
                        help="a properties file of zookeeper.ssl.* keys, to reach ZooKeeper over TLS")
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT",
                        help="not served: give --authorizer-properties zookeeper.connect=...")
    actions = parser.add_mutually_exclusive_group(required=True)
    for action in ("add", "remove", "list"):
        actions.add_argument(f"--{action}", dest="action", action="store_const", const=action)
    parser.add_argument("--topic", action="append", default=[])
    parser.add_argument("--group", action="append", default=[])
    parser.add_argument("--transactional-id", action="append", default=[])
    parser.add_argument("--cluster", action="store_true")
    parser.add_argument("--resource-pattern-type", default="literal",
                        help="literal (default), prefixed; with --list or --remove also any and match")
    parser.add_argument("--allow-principal", action="append", default=[])
    parser.add_argument("--deny-principal", action="append", default=[])
    parser.add_argument("--allow-host", action="append", default=[])
    parser.add_argument("--deny-host", action="append", default=[])
    parser.add_argument("--principal", action="append", default=[], help="--list: only these principals' ACLs")
    parser.add_argument("--operation", action="append", default=[])
    parser.add_argument("--producer", action="store_true")
    parser.add_argument("--consumer", action="store_true")
    parser.add_argument("--idempotent", action="store_true")
    parser.add_argument("--force", action="store_true", help="accepted: removal never prompts")
    parser.set_defaults(run=run, check=functools.partial(check_args, parser))
    return parser


def check_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.bootstrap_server and not args.authorizer_properties:
        parser.error("ACLs are managed in ZooKeeper here: give --authorizer-properties zookeeper.connect=...")
    if args.action in ("add", "remove") and not _resources(args, strict=False):
        parser.error("give at least one of --topic, --group, --transactional-id, --cluster")
    if args.action == "add" and not (args.allow_principal or args.deny_principal):
        parser.error("--add needs --allow-principal or --deny-principal")


def _zookeeper_connect(args: argparse.Namespace) -> str:
    for item in args.authorizer_properties:
        key, _, value = item.partition("=")
        if key.strip() == "zookeeper.connect" and value.strip():
            return value.strip()
    raise AclCommandError("--authorizer-properties zookeeper.connect=HOST:PORT is required")


def _pattern_type(args: argparse.Namespace) -> PatternType:
    try:
        pattern_type = by_name(PatternType, args.resource_pattern_type)
    except ValueError:
        raise AclCommandError(f"unknown --resource-pattern-type {args.resource_pattern_type}") from None
    if args.action == "add" and pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise AclCommandError("A '--resource-pattern-type' value of 'literal' or 'prefixed' is required with --add")
    return pattern_type


def _resources(args: argparse.Namespace, strict: bool = True) -> list[tuple[ResourceType, str]]:
    found = [(ResourceType.TOPIC, t) for t in args.topic] + [(ResourceType.GROUP, g) for g in args.group]
    found += [(ResourceType.TRANSACTIONAL_ID, x) for x in args.transactional_id]
    if args.cluster:
        found.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return found


def _operations(args: argparse.Namespace, resource_type: ResourceType) -> list[AclOperation]:
    if args.producer or args.consumer:
        chosen: list[AclOperation] = []
        if args.producer:
            chosen += {ResourceType.TOPIC: [AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE],
                       ResourceType.TRANSACTIONAL_ID: [AclOperation.WRITE, AclOperation.DESCRIBE],
                       ResourceType.CLUSTER: [AclOperation.IDEMPOTENT_WRITE]}.get(resource_type, [])
        if args.consumer:
            chosen += {ResourceType.TOPIC: [AclOperation.READ, AclOperation.DESCRIBE],
                       ResourceType.GROUP: [AclOperation.READ]}.get(resource_type, [])
        return chosen
    try:
        return [by_name(AclOperation, o) for o in args.operation] or [AclOperation.ALL]
    except ValueError as exc:
        raise AclCommandError(str(exc)) from None


def _entries(args: argparse.Namespace, resource_type: ResourceType) -> list[AccessControlEntry]:
    entries = []
    for principals, hosts, permission in ((args.allow_principal, args.allow_host, PermissionType.ALLOW),
                                          (args.deny_principal, args.deny_host, PermissionType.DENY)):
        for principal in principals:
            if ":" not in principal:
                raise AclCommandError(f"principal {principal!r} must be <type>:<name>, e.g. User:alice")
            for host in hosts or [WILDCARD_HOST]:
                entries += [AccessControlEntry(principal, host, op, permission)
                            for op in _operations(args, resource_type)]
    return entries


def bindings_to_add(args: argparse.Namespace) -> list[AclBinding]:
    pattern_type = _pattern_type(args)
    resources = _resources(args)
    if args.producer and args.idempotent:
        resources.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return [AclBinding(ResourcePattern(resource_type, name, pattern_type), entry)
            for resource_type, name in dict.fromkeys(resources) for entry in _entries(args, resource_type)]


def filters(args: argparse.Namespace) -> list[AclBindingFilter]:
    """--remove and --list: every selected resource (all of them when none is named), narrowed to
    the principals, hosts and operations given."""
    pattern_type = _pattern_type(args)
    resources = _resources(args) or [(ResourceType.ANY, None)]
    if args.action == "list" and args.resource_pattern_type == "literal" and not _resources(args):
        pattern_type = PatternType.ANY
    chosen = []
    for resource_type, name in resources:
        base = dict(resource_type=resource_type, name=name, pattern_type=pattern_type)
        principals = [(p, PermissionType.ALLOW) for p in args.allow_principal] + [
            (p, PermissionType.DENY) for p in args.deny_principal] + [(p, PermissionType.ANY) for p in args.principal]
        operations = ([by_name(AclOperation, o) for o in args.operation] if args.operation else [AclOperation.ANY])
        for principal, permission in principals or [(None, PermissionType.ANY)]:
            for operation in operations:
                chosen.append(AclBindingFilter(**base, principal=principal, operation=operation, permission=permission))
    return chosen


def format_bindings(bindings: Iterable[AclBinding], out: TextIO, heading: str = "Current ACLs for resource") -> None:
    grouped: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for binding in bindings:
        grouped.setdefault(binding.pattern, []).append(binding.entry)
    for pattern, entries in grouped.items():
        print(f"{heading} `ResourcePattern(resourceType={pattern.resource_type.name}, name={pattern.name}, "
              f"patternType={pattern.pattern_type.name})`: ", file=out)
        for e in entries:
            print(f" \t(principal={e.principal}, host={e.host}, operation={e.operation.name}, "
                  f"permissionType={e.permission.name})", file=out)
        print("", file=out)


def run(args: argparse.Namespace, out: TextIO) -> int:
    zk = None
    try:
        zk = zk_client(_zookeeper_connect(args), zk_tls_from_file(args.zk_tls_config_file))
        zk.start(timeout=15)
        authorizer = AclAuthorizer(zk)
        authorizer.store.ensure_paths()
        authorizer.reload()
        if args.action == "add":
            bindings = bindings_to_add(args)
            format_bindings(bindings, out, "Adding ACLs for resource")
            authorizer.create_acls(bindings)
        elif args.action == "remove":
            removed = authorizer.delete_acls(filters(args))
            format_bindings([b for found in removed for b in found], out, "Removed ACLs for resource")
        if args.action != "remove":
            shown = {b: None for f in filters(args) for b in authorizer.acls(f)} if args.action == "list" else {
                b: None for r_type, name in _resources(args)
                for b in authorizer.acls(AclBindingFilter(r_type, name, _pattern_type(args)))}
            format_bindings(list(shown), out)
        return 0
    except (AclCommandError, ValueError, OSError, KazooException, TimeoutError) as error:
        print(f"Error: {error.args[0] if error.args else error}", file=out)
        return 1
    except KazooTimeoutError:
        print("Error: no ZooKeeper session (a TLS port needs --zk-tls-config-file)", file=out)
        return 1
    finally:
        if zk is not None:
            zk.stop()
            zk.close()
