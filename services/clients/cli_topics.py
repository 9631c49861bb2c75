"""`odradek topics`: kafka-topics.sh (Kafka 2.8, --bootstrap-server mode) on the admin client.

Actions --create, --list, --describe, --alter and --delete; `--topic` is a regular expression
matched against whole names (commas separate alternatives), as Kafka's include list. Output
formats are Kafka's: `--describe` prints a topic line

    Topic: t<TAB>PartitionCount: 6<TAB>ReplicationFactor: 1<TAB>Configs: k=v,...

(a `TopicId:` field follows the name when the cluster reports topic ids) and one line per
partition `<TAB>Topic: t<TAB>Partition: 0<TAB>Leader: 1<TAB>Replicas: 1<TAB>Isr: 1`. A failure
prints `Error while executing topic command : <message>` and exits with 1. Unlike Kafka 2.8,
`--alter --config k=v` is accepted and applied as an incremental config change.
"""

from __future__ import annotations

import argparse
import functools
import re
from collections.abc import Callable, Iterable, Mapping
from typing import TextIO

from services.clients.admin import Admin
from services.clients.admin_types import ConfigEntry, NewPartitions, NewTopic, TopicDescription
from services.clients.cluster import PartitionInfo
from services.common.config import load_properties
from services.common.errors import Errors, KafkaError

MAX_REPLICATION_FACTOR = 32767
COLLISION_WARNING = ("WARNING: Due to limitations in metric names, topics with a period ('.') or underscore "
                     "('_') could collide. To avoid issues it is best to use either, but not both.")
ACTIONS = ("create", "list", "describe", "alter", "delete")


class TopicCommandError(Exception):
    """A user error Kafka reports as IllegalArgumentException."""


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("topics", help="create, list, describe, alter or delete topics",
                                   description="Create, list, describe, alter or delete topics.")
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT",
                        help="the broker(s) to connect to, comma-separated")
    parser.add_argument("--command-config", metavar="FILE", help="a properties file of admin client configs")
    actions = parser.add_mutually_exclusive_group(required=True)
    for action in ACTIONS:
        actions.add_argument(f"--{action}", dest="action", action="store_const", const=action,
                             help=f"{action} topics")
    parser.add_argument("--topic", help="topic name, or a regular expression except with --create")
    parser.add_argument("--partitions", type=int, help="number of partitions (create, or grow with --alter)")
    parser.add_argument("--replication-factor", type=int, help="replicas of each partition (create)")
    parser.add_argument("--replica-assignment", metavar="B1:B2,B3:B4",
                        help="broker ids per partition, partitions separated by commas")
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                        help="a topic config override (repeatable)")
    parser.add_argument("--if-not-exists", action="store_true", help="create only if the topic is missing")
    parser.add_argument("--if-exists", action="store_true",
                        help="alter, describe or delete only existing topics")
    parser.add_argument("--exclude-internal", action="store_true", help="leave internal topics out")
    parser.add_argument("--under-replicated-partitions", action="store_true",
                        help="describe only partitions whose ISR is smaller than their replica set")
    parser.add_argument("--unavailable-partitions", action="store_true",
                        help="describe only partitions without a live leader")
    parser.add_argument("--topics-with-overrides", action="store_true",
                        help="describe only topics with config overrides")
    parser.set_defaults(run=run, check=functools.partial(check_args, parser))
    return parser


def check_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Kafka's option combination rules (a usage error exits through argparse)."""
    action = args.action
    if action in ("create", "alter", "delete") and not args.topic:
        parser.error(f"--topic is required with --{action}")
    if action == "alter" and args.partitions is None and not args.config:
        parser.error("--alter needs --partitions or --config")
    only = {
        "replication_factor": ("create",), "if_not_exists": ("create",),
        "partitions": ("create", "alter"), "replica_assignment": ("create", "alter"),
        "config": ("create", "alter"), "if_exists": ("alter", "delete", "describe"),
        "exclude_internal": ("list", "describe"), "under_replicated_partitions": ("describe",),
        "unavailable_partitions": ("describe",), "topics_with_overrides": ("describe",),
    }
    for option, allowed in only.items():
        if getattr(args, option) not in (None, False, []) and action not in allowed:
            flag = "--" + option.replace("_", "-")
            parser.error(f"option {flag} can't be used with --{action}")
    if action == "create" and args.replica_assignment and (
            args.partitions is not None or args.replication_factor is not None):
        parser.error("--replica-assignment can't be used with --partitions or --replication-factor")
    if action == "alter" and args.replica_assignment and args.partitions is None:
        parser.error("--replica-assignment with --alter needs --partitions")


def run(args: argparse.Namespace, out: TextIO) -> int:
    config = load_properties(args.command_config) if args.command_config else {}
    try:
        with Admin(config, bootstrap_servers=args.bootstrap_server) as admin:
            COMMANDS[args.action](admin, args, out)
        return 0
    except (KafkaError, TopicCommandError, ValueError, TimeoutError) as error:
        message = error.args[0] if isinstance(error, KafkaError) else str(error)
        print(f"Error while executing topic command : {message}", file=out)
        return 1


# --------------------------------------------------------------------------------------------- actions

def create(admin: Admin, args: argparse.Namespace, out: TextIO) -> None:
    if args.replication_factor is not None and not 1 <= args.replication_factor <= MAX_REPLICATION_FACTOR:
        raise TopicCommandError(
            f"The replication factor must be between 1 and {MAX_REPLICATION_FACTOR} inclusive")
    if args.partitions is not None and args.partitions < 1:
        raise TopicCommandError("The partitions must be greater than 0")
    if "." in args.topic or "_" in args.topic:
        print(COLLISION_WARNING, file=out)
    topic = NewTopic(
        args.topic,
        num_partitions=-1 if args.partitions is None else args.partitions,
        replication_factor=-1 if args.replication_factor is None else args.replication_factor,
        replica_assignment=(parse_replica_assignment(args.replica_assignment)
                            if args.replica_assignment else None),
        configs=parse_configs(args.config) or None,
    )
    try:
        admin.create_topics([topic])
    except KafkaError as error:
        if error.code == Errors.TOPIC_ALREADY_EXISTS and args.if_not_exists:
            return
        raise
    print(f"Created topic {args.topic}.", file=out)


def list_(admin: Admin, args: argparse.Namespace, out: TextIO) -> None:
    for name in matching_topics(admin, args.topic, args.exclude_internal):
        print(name, file=out)


def describe(admin: Admin, args: argparse.Namespace, out: TextIO) -> None:
    names = matching_topics(admin, args.topic, args.exclude_internal)
    ensure_topic_exists(names, args.topic, not args.if_exists)
    if not names:
        return
    descriptions = admin.describe_topics(names)
    configs = admin.describe_configs(names)
    live = set(admin.metadata.cluster.nodes)
    reporting = args.under_replicated_partitions or args.unavailable_partitions
    for name in names:
        description, entries = descriptions[name], configs[name]
        if not reporting:
            has_override = any(not e.is_default for e in entries.values())
            if not args.topics_with_overrides or has_override:
                print(format_topic_line(description, entries.values()), file=out)
        if args.topics_with_overrides:
            continue
        for partition in description.partitions:
            if reporting and not (
                    (args.under_replicated_partitions and is_under_replicated(partition))
                    or (args.unavailable_partitions and is_unavailable(partition, live))):
                continue
            print(format_partition_line(partition), file=out)


def alter(admin: Admin, args: argparse.Namespace, out: TextIO) -> None:
    names = matching_topics(admin, args.topic, exclude_internal=False)
    ensure_topic_exists(names, args.topic, not args.if_exists)
    if not names:
        return
    if args.partitions is not None:
        admin.create_partitions({name: new_partitions(admin, name, args) for name in names})
    configs = parse_configs(args.config)
    if configs:
        for name in names:
            admin.incremental_alter_configs(name, configs)


def new_partitions(admin: Admin, name: str, args: argparse.Namespace) -> NewPartitions:
    """The new total; with --replica-assignment, the replicas of the partitions beyond the current ones."""
    if not args.replica_assignment:
        return NewPartitions(args.partitions)
    existing = len(admin.describe_topics([name])[name].partitions)
    assignment = parse_replica_assignment(args.replica_assignment)
    return NewPartitions(args.partitions, [assignment[p] for p in sorted(assignment) if p >= existing])


def delete(admin: Admin, args: argparse.Namespace, out: TextIO) -> None:
    names = matching_topics(admin, args.topic, args.exclude_internal)
    ensure_topic_exists(names, args.topic, not args.if_exists)
    if names:
        admin.delete_topics(names)


COMMANDS: Mapping[str, Callable[[Admin, argparse.Namespace, TextIO], None]] = {
    "create": create, "list": list_, "describe": describe, "alter": alter, "delete": delete,
}


# ---------------------------------------------------------------------------------------- parsing and output

def topic_pattern(raw: str) -> re.Pattern[str]:
    """Kafka's IncludeList: commas mean "or", blanks and surrounding quotes are dropped."""
    regex = raw.strip().replace(",", "|").replace(" ", "")
    regex = re.sub(r"""^["']+""", "", regex)
    regex = re.sub(r"""["']+$""", "", regex)
    try:
        return re.compile(regex)
    except re.error:
        raise TopicCommandError(f"{raw} is an invalid regex.") from None


def filter_topics(names: Iterable[str], raw_pattern: str | None) -> list[str]:
    if raw_pattern is None:
        return sorted(names)
    pattern = topic_pattern(raw_pattern)
    return sorted(n for n in names if pattern.fullmatch(n))


def matching_topics(admin: Admin, raw_pattern: str | None, exclude_internal: bool) -> list[str]:
    return filter_topics(admin.list_topics(include_internal=not exclude_internal), raw_pattern)


def ensure_topic_exists(found: list[str], requested: str | None, require: bool) -> None:
    if requested is not None and require and not found:
        raise TopicCommandError(f"Topic '{requested}' does not exist as expected")


def parse_configs(items: Iterable[str]) -> dict[str, str]:
    configs = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key or "=" in value:
            raise TopicCommandError(
                'Invalid topic config: all configs to be added must be in the format "key=val".')
        configs[key.strip()] = value.strip()
    return configs


def parse_replica_assignment(text: str) -> dict[int, list[int]]:
    """"1:2,2:3" -> {0: [1, 2], 1: [2, 3]}."""
    assignment = {}
    for partition, part in enumerate(text.split(",")):
        try:
            replicas = [int(b.strip()) for b in part.split(":") if b.strip()]
        except ValueError:
            raise TopicCommandError(f"Invalid replica assignment {text!r}") from None
        if len(set(replicas)) != len(replicas):
            raise TopicCommandError(
                f"Partition replica lists may not contain duplicate entries: {', '.join(map(str, replicas))}")
        if not replicas:
            raise TopicCommandError(
                f"Invalid replica assignment {text!r}: partition {partition} has no replicas")
        assignment[partition] = replicas
    return assignment


def is_under_replicated(partition: PartitionInfo) -> bool:
    return len(partition.isr) < len(partition.replicas)


def is_unavailable(partition: PartitionInfo, live_brokers: set[int]) -> bool:
    return not partition.has_leader or partition.leader not in live_brokers


def format_topic_line(description: TopicDescription, entries: Iterable[ConfigEntry],
                      topic_id: str | None = None) -> str:
    configs = ",".join(f"{e.name}={e.value if e.value is not None else 'null'}" for e in entries
                       if not e.is_default)
    line = f"Topic: {description.name}"
    if topic_id:
        line += f"\tTopicId: {topic_id}"
    return (f"{line}\tPartitionCount: {len(description.partitions)}"
            f"\tReplicationFactor: {description.replication_factor}\tConfigs: {configs}")


def format_partition_line(partition: PartitionInfo) -> str:
    leader = partition.leader if partition.has_leader else "none"
    return (f"\tTopic: {partition.topic}\tPartition: {partition.partition}\tLeader: {leader}"
            f"\tReplicas: {_ids(partition.replicas)}\tIsr: {_ids(partition.isr)}")


def _ids(ids: Iterable[int]) -> str:
    return ",".join(map(str, ids))
