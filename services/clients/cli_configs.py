"""`odradek configs`: kafka-configs.sh (--bootstrap-server mode) for topic and broker configs on the
admin client.

    configs --entity-type topics [--entity-name T] --describe [--all]
        `Dynamic configs for topic T are:` (`All configs ...` with --all), then one line per config
        `  k=v sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:k=v, DEFAULT_CONFIG:log.k=v}`;
        without --entity-name every topic is described.
    configs --entity-type topics --entity-name T --alter [--add-config k1=v1,k2=[a,b]] [--delete-config k1,k2]
        applied as one incremental change; prints `Completed updating config for topic T.`

    configs --entity-type brokers (--entity-name ID | --entity-default) --describe
        `Dynamic configs for broker ID are:` (`Default configs for brokers in the cluster are:`),
        then the broker's dynamic configs (or the cluster-wide defaults) as above, synonyms from
        DYNAMIC_BROKER_CONFIG and DYNAMIC_DEFAULT_BROKER_CONFIG; without either every live broker.
    configs --entity-type brokers (--entity-name ID | --entity-default) --alter [--add-config ...] [--delete-config ...]
        prints `Completed updating config for broker ID.` (`Completed updating default config for
        brokers in the cluster.`); keys a broker cannot change without a restart are refused.

    configs --zookeeper ZK --entity-type users --entity-name U --alter \
            --add-config 'SCRAM-SHA-512=[iterations=8192,password=secret]' [--delete-config SCRAM-SHA-256]
        writes the user's SCRAM credentials (salted, never the password) to `/config/users/U` in
        ZooKeeper with a change notification, as Kafka's `kafka-configs.sh --zookeeper` does; prints
        `Completed updating config for user U.`
    configs --zookeeper ZK --entity-type users [--entity-name U] --describe
        `Configs for user-principal 'U' are SCRAM-SHA-512=salt=...,stored_key=...,...`.
    --zk-tls-config-file FILE reaches ZooKeeper over TLS with the `zookeeper.ssl.*` keys in FILE.

Broker configs come from the controller, which holds the dynamic layers only: `--all` is for
topics (a broker's Kafka listener describes its every config). Other entity types answer with an
error. A failure prints `Error: <message>` and exits with 1.
"""

from __future__ import annotations

import argparse
import functools
import re
from collections.abc import Iterable
from typing import TextIO

from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from services.clients.admin import Admin
from services.clients.admin_types import BROKER_RESOURCE, CONFIG_SOURCES, TOPIC_RESOURCE, ConfigEntry
from services.clients.cli_groups import run_admin_command
from services.common.errors import Errors, KafkaError
from services.common.security.sasl import DEFAULT_SCRAM_ITERATIONS, SCRAM_MECHANISMS, make_scram_credential
from services.common.zk.client import OdradekZkClient
from services.common.zk.configs import entity_type_path
from services.common.zk.connect import zk_client, zk_tls_from_file

DYNAMIC_TOPIC_CONFIG_SOURCE = 1
DYNAMIC_BROKER_CONFIG_SOURCE, DYNAMIC_DEFAULT_BROKER_CONFIG_SOURCE = 2, 3
ENTITY_TYPES = ("topics", "brokers", "users", "clients", "broker-loggers", "ips")
_CONFIG_ITEM = re.compile(r"(?:[^,\[]|\[[^\]]*\])+")


class ConfigCommandError(Exception):
    """A user error reported before anything is changed."""


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("configs", help="describe or alter topic and broker configs",
                                   description="Describe or alter the dynamic configs of topics and brokers.")
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT")
    parser.add_argument("--zookeeper", metavar="HOST:PORT[/CHROOT]",
                        help="ZooKeeper, where users' SCRAM credentials are kept (with --entity-type users)")
    parser.add_argument("--zk-tls-config-file", metavar="FILE",
                        help="a properties file of zookeeper.ssl.* keys, to reach ZooKeeper over TLS")
    parser.add_argument("--command-config", metavar="FILE", help="a properties file of admin client configs")
    parser.add_argument("--timeout", type=int, default=30000, help="milliseconds to wait for answers")
    parser.add_argument("--entity-type", required=True, choices=ENTITY_TYPES)
    parser.add_argument("--entity-name", help="the topic or broker id (describe: every one when left out)")
    parser.add_argument("--entity-default", action="store_true",
                        help="the cluster-wide default broker configs (with --entity-type brokers)")
    parser.add_argument("--topic", dest="entity_topic", help="the same as --entity-type topics --entity-name T")
    actions = parser.add_mutually_exclusive_group(required=True)
    actions.add_argument("--describe", dest="action", action="store_const", const="describe")
    actions.add_argument("--alter", dest="action", action="store_const", const="alter")
    parser.add_argument("--all", action="store_true", help="describe every config, not only dynamic ones")
    parser.add_argument("--add-config", metavar="K=V,K=[V1,V2]", help="configs to set (alter)")
    parser.add_argument("--delete-config", metavar="K,K", help="configs to remove (alter)")
    parser.set_defaults(run=run, check=functools.partial(check_args, parser))
    return parser


def check_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.entity_type == "users":
        if not args.zookeeper:
            parser.error("--entity-type users needs --zookeeper (SCRAM credentials are kept in ZooKeeper)")
    elif not args.bootstrap_server:
        parser.error("--bootstrap-server is required")
    if args.entity_topic is not None:
        args.entity_name = args.entity_name or args.entity_topic
    if args.entity_default:
        if args.entity_type != "brokers":
            parser.error("--entity-default goes with --entity-type brokers")
        if args.entity_name:
            parser.error("--entity-name and --entity-default exclude each other")
        args.entity_name = ""
    if args.action == "alter":
        if args.entity_name is None or (not args.entity_name and not args.entity_default):
            parser.error("--entity-name (or --entity-default) is required with --alter")
        if args.add_config is None and args.delete_config is None:
            parser.error("--alter needs --add-config or --delete-config")
    elif args.add_config is not None or args.delete_config is not None:
        parser.error("--add-config and --delete-config go with --alter")


def run(args: argparse.Namespace, out: TextIO) -> int:
    if args.entity_type == "users":
        return run_users(args, out)
    return run_admin_command(args, out, COMMANDS[args.action], ConfigCommandError)


def _resource_type(args: argparse.Namespace) -> int:
    if args.entity_type == "topics":
        return TOPIC_RESOURCE
    if args.entity_type == "brokers":
        if args.all:
            raise ConfigCommandError("--all describes topics; a broker's every config is described by its "
                                     "Kafka listener (DescribeConfigs)")
        return BROKER_RESOURCE
    raise ConfigCommandError(f"--entity-type {args.entity_type} is not supported: the Odradek controller "
                             f"serves topic and broker configs (--entity-type topics or brokers)")


def _dynamic_source(resource_type: int, name: str) -> int:
    if resource_type == TOPIC_RESOURCE:
        return DYNAMIC_TOPIC_CONFIG_SOURCE
    return DYNAMIC_DEFAULT_BROKER_CONFIG_SOURCE if name == "" else DYNAMIC_BROKER_CONFIG_SOURCE


def _entity_text(resource_type: int, name: str) -> str:
    if resource_type == TOPIC_RESOURCE:
        return f"topic {name}"
    return "brokers in the cluster" if name == "" else f"broker {name}"


# --------------------------------------------------------------------------------------------- parsing

def parse_add_config(text: str) -> dict[str, str]:
    """"k1=v1,k2=[a,b]" -> {"k1": "v1", "k2": "a,b"} (brackets hold a list value)."""
    configs = {}
    for item in _CONFIG_ITEM.findall(text):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigCommandError(f'Invalid config: all configs to be added must be in the format "key=val", '
                                     f"not {item!r}")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        configs[key.strip()] = value
    return configs


def parse_delete_config(text: str) -> list[str]:
    return [key.strip() for key in text.split(",") if key.strip()]


# --------------------------------------------------------------------------------------------- output

def format_entry(entry: ConfigEntry) -> str:
    synonyms = ", ".join(f"{CONFIG_SOURCES.get(s.source, 'UNKNOWN')}:{s.name}={_value(s.value)}"
                         for s in entry.synonyms)
    value = "null" if entry.is_sensitive else _value(entry.value)
    return f"  {entry.name}={value} sensitive={str(entry.is_sensitive).lower()} synonyms={{{synonyms}}}"


def format_describe(name: str, entries: Iterable[ConfigEntry], describe_all: bool,
                    resource_type: int = TOPIC_RESOURCE) -> list[str]:
    source = _dynamic_source(resource_type, name)
    shown = sorted((e for e in entries if describe_all or e.source == source), key=lambda e: e.name)
    kind = "All" if describe_all else "Default" if resource_type == BROKER_RESOURCE and name == "" else "Dynamic"
    return [f"{kind} configs for {_entity_text(resource_type, name)} are:"] + [format_entry(e) for e in shown]


def _value(value: str | None) -> str:
    return "null" if value is None else value


# --------------------------------------------------------------------------------------------- actions

def describe(admin: Admin, args: argparse.Namespace, out: TextIO) -> None:
    resource_type = _resource_type(args)
    if args.entity_name is not None:
        names = [args.entity_name]
    elif resource_type == TOPIC_RESOURCE:
        names = admin.list_topics(include_internal=True)
    else:
        names = [str(node.node_id) for node in sorted(admin.describe_cluster().nodes, key=lambda n: n.node_id)]
    configs = admin.describe_configs(names, resource_type=resource_type, include_synonyms=True)
    for name in names:
        for line in format_describe(name, configs[name].values(), args.all, resource_type):
            print(line, file=out)


def alter(admin: Admin, args: argparse.Namespace, out: TextIO) -> None:
    resource_type = _resource_type(args)
    added = parse_add_config(args.add_config) if args.add_config is not None else {}
    deleted = parse_delete_config(args.delete_config) if args.delete_config is not None else []
    both = sorted(set(added) & set(deleted))
    if both:
        raise ConfigCommandError(f"Invalid config(s): {','.join(both)} are both added and deleted")
    if deleted:
        current = admin.describe_configs([args.entity_name], resource_type=resource_type)[args.entity_name]
        source = _dynamic_source(resource_type, args.entity_name)
        missing = [k for k in deleted if k not in current or current[k].source != source]
        if missing:
            raise KafkaError(f"Invalid config(s): {','.join(missing)}", error=Errors.INVALID_CONFIG)
    changes: dict[str, str | None] = {**added, **dict.fromkeys(deleted)}
    admin.incremental_alter_configs(args.entity_name, changes, resource_type=resource_type)
    if resource_type == BROKER_RESOURCE and args.entity_name == "":
        print("Completed updating default config for brokers in the cluster.", file=out)
    else:
        print(f"Completed updating config for {_entity_text(resource_type, args.entity_name)}.", file=out)


COMMANDS = {"describe": describe, "alter": alter}


# --------------------------------------------------------------------------------------------- users

def scram_changes(added: dict[str, str]) -> dict[str, str]:
    """`SCRAM-SHA-512` => `iterations=8192,password=secret` (iterations optional) as the stored
    credential of each mechanism."""
    credentials = {}
    for mechanism, value in added.items():
        if mechanism not in SCRAM_MECHANISMS:
            raise ConfigCommandError(f"Invalid config(s): {mechanism} (a user's configs here are "
                                     f"{', '.join(SCRAM_MECHANISMS)})")
        fields = dict(item.split("=", 1) for item in value.split(",") if "=" in item)
        if "password" not in fields:
            raise ConfigCommandError(f"{mechanism} needs password=... (and may give iterations=N)")
        try:
            iterations = int(fields.get("iterations", DEFAULT_SCRAM_ITERATIONS))
            credentials[mechanism] = make_scram_credential(mechanism, fields["password"], iterations).encode()
        except ValueError as exc:
            raise ConfigCommandError(str(exc)) from None
    return credentials


def run_users(args: argparse.Namespace, out: TextIO) -> int:
    try:
        tls = zk_tls_from_file(args.zk_tls_config_file)
    except (ValueError, OSError) as error:
        print(f"Error: {error}", file=out)
        return 1
    zk = zk_client(args.zookeeper, tls, timeout_s=max(args.timeout, 1000) / 1000)
    try:
        zk.start(timeout=max(args.timeout, 1000) / 1000)
        client = OdradekZkClient(zk)
        if args.action == "describe":
            users = [args.entity_name] if args.entity_name else sorted(
                zk.get_children(entity_type_path("users")) if zk.exists(entity_type_path("users")) else [])
            for user in users:
                config = client.get_user_config(user)
                shown = ",".join(f"{k}={v}" for k, v in sorted(config.items()))
                print(f"Configs for user-principal '{user}' are {shown}", file=out)
            return 0
        added = scram_changes(parse_add_config(args.add_config)) if args.add_config is not None else {}
        deleted = parse_delete_config(args.delete_config) if args.delete_config is not None else []
        config = {k: v for k, v in client.get_user_config(args.entity_name).items() if k not in deleted}
        client.set_user_config(args.entity_name, {**config, **added})
        print(f"Completed updating config for user {args.entity_name}.", file=out)
        return 0
    except (ConfigCommandError, KazooException, TimeoutError) as error:
        print(f"Error: {error.args[0] if error.args else error}", file=out)
        return 1
    except KazooTimeoutError:
        print(f"Error: no ZooKeeper session with {args.zookeeper} (a TLS port needs --zk-tls-config-file)", file=out)
        return 1
    finally:
        zk.stop()
        zk.close()
