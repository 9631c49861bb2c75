"""`odradek reassign-partitions`: Kafka's kafka-reassign-partitions.sh on the admin client.

    --generate --topics-to-move-json-file F --broker-list 1,2,3
        F is {"topics": [{"topic": "t"}], "version": 1}; prints the current assignment of those
        topics and a proposed one over the listed brokers (each topic keeps its partition count and
        replication factor), both as reassignment JSON.
    --execute --reassignment-json-file F [--additional] [--throttle BYTES]
        F is {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2]}]}
        (`log_dirs`, if given, must be "any"); prints the current assignment to keep for a
        rollback, then `Successfully started partition reassignment(s) for t-0,...`. Refused while
        other reassignments are in progress, unless --additional. With --throttle, as Kafka's tool,
        first sets `leader.replication.throttled.rate` and `follower.replication.throttled.rate`
        on every broker of the moving partitions' current and target replicas, and on each topic
        `leader.replication.throttled.replicas` (the current replicas of its moving partitions,
        "partition:broker,...") and `follower.replication.throttled.replicas` (the replicas being
        added).
    --verify --reassignment-json-file F
        prints `Reassignment of partition t-0 is complete.` or `... is still in progress.` per
        partition; once every one is complete it removes the throttles (the rates from every
        broker, the throttled replicas from the file's topics) unless --preserve-throttles.
    --cancel --reassignment-json-file F
        cancels the reassignments of F's partitions that are in progress.
    --list
        prints every reassignment in progress: `t-0: replicas: 1,2,3. adding: 3. removing: 1.`

The proposal of --generate is the controller's own assignment (`services.common.replica_assignment`),
rack-aware when every broker has a rack. Each takes --bootstrap-server and --command-config; a
failure prints `Error: <message>` and exits with 1.
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from services.clients.admin import Admin
from services.clients.admin_types import BROKER_RESOURCE
from services.clients.cli_groups import run_admin_command
from services.clients.cli_partitions import _add_common, _format_tp, _load_json
from services.common.errors import KafkaError
from services.common.replica_assignment import BrokerMetadata, assign_replicas_to_brokers
from services.common.topic_partition import TopicPartition

ACTIONS = ("generate", "execute", "verify", "cancel", "list")


class ReassignCommandError(Exception):
    """A user error, or a refused reassignment, reported as the command's failure."""


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("reassign-partitions", help="move partition replicas between brokers",
                                   description="Generate, execute, verify, cancel or list partition "
                                               "reassignments.")
    _add_common(parser)
    for action in ACTIONS:
        parser.add_argument(f"--{action}", action="store_true")
    parser.add_argument("--reassignment-json-file", metavar="FILE",
                        help='{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2]}]}')
    parser.add_argument("--topics-to-move-json-file", metavar="FILE",
                        help='{"topics": [{"topic": "t"}], "version": 1}')
    parser.add_argument("--broker-list", metavar="1,2,3", help="the brokers --generate may assign to")
    parser.add_argument("--additional", action="store_true",
                        help="execute even while other reassignments are in progress")
    parser.add_argument("--throttle", type=int, default=-1, metavar="BYTES",
                        help="inter-broker replication throttle of the moving replicas, in bytes/s")
    parser.add_argument("--disable-rack-aware", action="store_true", help="(the proposal is never rack-aware)")
    parser.add_argument("--preserve-throttles", action="store_true",
                        help="--verify leaves the throttles in place")
    parser.set_defaults(run=lambda args, out: run_admin_command(args, out, run_reassign, ReassignCommandError),
                        check=lambda args: check_args(parser, args))


def check_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    chosen = [a for a in ACTIONS if getattr(args, a)]
    if len(chosen) != 1:
        parser.error("exactly one of --generate, --execute, --verify, --cancel or --list is required")
    action = chosen[0]
    if action in ("execute", "verify", "cancel") and not args.reassignment_json_file:
        parser.error(f"--{action} needs --reassignment-json-file")
    if action == "generate" and not (args.topics_to_move_json_file and args.broker_list):
        parser.error("--generate needs --topics-to-move-json-file and --broker-list")


def run_reassign(admin: Admin, args: argparse.Namespace, out: TextIO) -> None:
    if args.generate:
        run_generate(admin, args, out)
    elif args.execute:
        run_execute(admin, args, out)
    elif args.verify:
        run_verify(admin, args, out)
    elif args.cancel:
        run_cancel(admin, args, out)
    else:
        print(format_list(admin.list_partition_reassignments()), file=out)


# --------------------------------------------------------------------------------------------- JSON

def parse_reassignment_json(document: Any, path: str = "the reassignment JSON file") -> dict[TopicPartition, list[int]]:
    """The `partitions` of a reassignment file: partition -> target replicas."""
    entries = document.get("partitions") if isinstance(document, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ReassignCommandError(f"{path} has no \"partitions\" to reassign")
    targets: dict[TopicPartition, list[int]] = {}
    for entry in entries:
        try:
            tp = TopicPartition(str(entry["topic"]), int(entry["partition"]))
            replicas = [int(r) for r in entry["replicas"]]
        except (KeyError, TypeError, ValueError):
            raise ReassignCommandError(
                f'each entry of {path} needs "topic", "partition" and "replicas": {entry!r}') from None
        log_dirs = entry.get("log_dirs", ["any"] * len(replicas))
        if not isinstance(log_dirs, list) or len(log_dirs) != len(replicas):
            raise ReassignCommandError(f"the log_dirs of {_format_tp(tp)} must name one directory per replica")
        if any(d != "any" for d in log_dirs):
            raise ReassignCommandError(f"moving replicas between log directories is not served by Odradek "
                                       f"({_format_tp(tp)})")
        if tp in targets:
            raise ReassignCommandError(f"{path} contains duplicate topic partitions: {_format_tp(tp)}")
        if not replicas:
            raise ReassignCommandError(f"Partition replica list cannot be empty: {_format_tp(tp)}")
        if len(set(replicas)) != len(replicas):
            raise ReassignCommandError(f"Duplicate replica assignment found: {_format_tp(tp)} {replicas}")
        targets[tp] = replicas
    return targets


def format_reassignment_json(assignment: Mapping[TopicPartition, Sequence[int]]) -> str:
    partitions = [{"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas),
                   "log_dirs": ["any"] * len(replicas)}
                  for tp, replicas in sorted(assignment.items())]
    return json.dumps({"version": 1, "partitions": partitions}, separators=(",", ":"))


def _plural(count: int) -> str:
    return "" if count == 1 else "s"


def _partition_list(partitions) -> str:
    return ",".join(_format_tp(tp) for tp in sorted(partitions))


def current_assignment(admin: Admin, topics: Sequence[str]) -> dict[TopicPartition, list[int]]:
    """Each partition's replicas; an unknown topic is an error."""
    found: dict[TopicPartition, list[int]] = {}
    for topic, description in admin.describe_topics(topics, raise_errors=False).items():
        if isinstance(description, KafkaError):
            raise ReassignCommandError(f"Topic {topic} not found.")
        for p in description.partitions:
            found[TopicPartition(topic, p.partition)] = list(p.replicas)
    return found


# --------------------------------------------------------------------------------------------- generate

def propose_assignment(partition_count: int, replication_factor: int, brokers: Sequence[int],
                       rng: random.Random | None = None, racks: Mapping[int, str | None] | None = None
                       ) -> dict[int, list[int]]:
    """Kafka's assignment of `partition_count` partitions over `brokers` (rack-aware when every
    broker has a rack), as the controller assigns a new topic's replicas."""
    metadata = [BrokerMetadata(broker, (racks or {}).get(broker)) for broker in sorted(brokers)]
    if any(m.rack is None for m in metadata):
        metadata = [BrokerMetadata(m.broker_id) for m in metadata]
    try:
        proposed = assign_replicas_to_brokers(metadata, partition_count, replication_factor, rand=rng)
    except KafkaError as exc:
        raise ReassignCommandError(str(exc)) from None
    return {partition: list(replicas) for partition, replicas in proposed.items()}


def parse_topics_json(document: Any, path: str) -> list[str]:
    entries = document.get("topics") if isinstance(document, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ReassignCommandError(f"{path} has no \"topics\" to move")
    try:
        topics = [str(entry["topic"]) for entry in entries]
    except (KeyError, TypeError):
        raise ReassignCommandError(f'each entry of {path} needs "topic"') from None
    duplicates = sorted({t for t in topics if topics.count(t) > 1})
    if duplicates:
        raise ReassignCommandError(f"List of topics to reassign contains duplicate entries: {','.join(duplicates)}")
    return topics


def parse_broker_list(text: str) -> list[int]:
    try:
        brokers = [int(b) for b in text.split(",") if b.strip()]
    except ValueError:
        raise ReassignCommandError(f"--broker-list must be comma-separated broker ids, not {text!r}") from None
    duplicates = sorted({b for b in brokers if brokers.count(b) > 1})
    if duplicates:
        raise ReassignCommandError(f"Broker list contains duplicate entries: {','.join(map(str, duplicates))}")
    return brokers


def run_generate(admin: Admin, args: argparse.Namespace, out: TextIO) -> None:
    topics = parse_topics_json(_load_json(args.topics_to_move_json_file), args.topics_to_move_json_file)
    wanted = parse_broker_list(args.broker_list)
    racks = {n.node_id: n.rack for n in admin.describe_cluster().nodes}
    brokers = [b for b in wanted if b in racks]
    if not brokers:
        raise ReassignCommandError(f"none of the brokers {args.broker_list} is registered")
    current = current_assignment(admin, topics)
    proposed: dict[TopicPartition, list[int]] = {}
    for topic in topics:
        partitions = sorted(tp for tp in current if tp.topic == topic)
        factor = len(current[partitions[0]]) if partitions else 0
        for partition, replicas in propose_assignment(len(partitions), factor, brokers, racks=racks).items():
            proposed[TopicPartition(topic, partition)] = replicas
    print(f"Current partition replica assignment\n{format_reassignment_json(current)}\n", file=out)
    print(f"Proposed partition reassignment configuration\n{format_reassignment_json(proposed)}", file=out)


# --------------------------------------------------------------------------------------------- execute

def run_execute(admin: Admin, args: argparse.Namespace, out: TextIO) -> None:
    targets = parse_reassignment_json(_load_json(args.reassignment_json_file), args.reassignment_json_file)
    if not args.additional and admin.list_partition_reassignments():
        raise ReassignCommandError("Cannot execute because there is an existing partition assignment. "
                                   "Use --additional to override this and interrupt the reassignment in progress.")
    registered = {n.node_id for n in admin.describe_cluster().nodes}
    unknown = sorted({b for replicas in targets.values() for b in replicas} - registered)
    if unknown:
        raise ReassignCommandError(f"Unknown broker id(s) {','.join(map(str, unknown))}")
    current = current_assignment(admin, sorted({tp.topic for tp in targets}))
    missing = sorted(set(targets) - set(current))
    if missing:
        raise ReassignCommandError(f"Topic partition(s) {_partition_list(missing)} not found.")
    print(f"Current partition replica assignment\n\n{format_reassignment_json({tp: current[tp] for tp in targets})}"
          "\n\nSave this to use as the --reassignment-json-file option during rollback", file=out)
    if args.throttle >= 0:
        apply_throttles(admin, targets, current, args.throttle, out)
    errors = {tp: e for tp, e in admin.alter_partition_reassignments(targets).items() if e is not None}
    if errors:
        raise ReassignCommandError("Error reassigning partition(s):\n" + "\n".join(
            f"{_format_tp(tp)}: {error.args[0] if error.args else error}" for tp, error in sorted(errors.items())))
    print(f"Successfully started partition reassignment{_plural(len(targets))} for {_partition_list(targets)}",
          file=out)


# --------------------------------------------------------------------------------------------- throttles

LEADER_RATE, FOLLOWER_RATE = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
LEADER_REPLICAS, FOLLOWER_REPLICAS = "leader.replication.throttled.replicas", "follower.replication.throttled.replicas"


def throttled_replicas(targets: Mapping[TopicPartition, Sequence[int]],
                       current: Mapping[TopicPartition, Sequence[int]]) -> dict[str, dict[str, str]]:
    """Each topic's throttled-replicas configs for the moving partitions of `targets`: as leaders
    the current replicas, as followers the replicas being added ("partition:broker,...")."""
    leaders: dict[str, list[str]] = {}
    followers: dict[str, list[str]] = {}
    for tp in sorted(targets):
        now, target = list(current[tp]), list(targets[tp])
        if now == target:
            continue
        leaders.setdefault(tp.topic, []).extend(f"{tp.partition}:{b}" for b in now)
        followers.setdefault(tp.topic, []).extend(f"{tp.partition}:{b}" for b in target if b not in now)
    return {topic: {LEADER_REPLICAS: ",".join(leaders[topic]), FOLLOWER_REPLICAS: ",".join(followers.get(topic, []))}
            for topic in leaders}


def apply_throttles(admin: Admin, targets: Mapping[TopicPartition, Sequence[int]],
                    current: Mapping[TopicPartition, Sequence[int]], rate_bytes_per_s: int, out: TextIO) -> None:
    topics = throttled_replicas(targets, current)
    brokers = sorted({b for tp in targets if list(current[tp]) != list(targets[tp])
                      for b in [*current[tp], *targets[tp]]})
    for broker in brokers:
        admin.incremental_alter_configs(str(broker), {LEADER_RATE: str(rate_bytes_per_s),
                                                      FOLLOWER_RATE: str(rate_bytes_per_s)},
                                        resource_type=BROKER_RESOURCE)
    for topic, configs in sorted(topics.items()):
        admin.incremental_alter_configs(topic, {k: v or None for k, v in configs.items()})
    print(f"The inter-broker replication throttle is {rate_bytes_per_s} B/s on brokers "
          f"{','.join(map(str, brokers))} for the moving replicas of {','.join(sorted(topics))}.\n"
          "Run --verify until the reassignment is complete: it removes the throttle.", file=out)


def clear_throttles(admin: Admin, topics: Sequence[str], out: TextIO) -> None:
    """Removes the throttle rates from every broker and the throttled replicas from `topics`."""
    brokers = sorted(n.node_id for n in admin.describe_cluster().nodes)
    for broker in brokers:
        admin.incremental_alter_configs(str(broker), {LEADER_RATE: None, FOLLOWER_RATE: None},
                                        resource_type=BROKER_RESOURCE)
    print(f"Removed the replication throttle rates of brokers {','.join(map(str, brokers))}", file=out)
    for topic in topics:
        admin.incremental_alter_configs(topic, {LEADER_REPLICAS: None, FOLLOWER_REPLICAS: None})
        print(f"Removed the throttled replicas of topic {topic}", file=out)


# --------------------------------------------------------------------------------------------- verify

def format_verify(targets: Mapping[TopicPartition, Sequence[int]], ongoing: Mapping[TopicPartition, Any],
                  current: Mapping[TopicPartition, Sequence[int]]) -> list[str]:
    lines = ["Status of partition reassignment:"]
    for tp in sorted(targets):
        if tp in ongoing:
            lines.append(f"Reassignment of partition {_format_tp(tp)} is still in progress.")
        elif list(current.get(tp, [])) == list(targets[tp]):
            lines.append(f"Reassignment of partition {_format_tp(tp)} is complete.")
        else:
            now = ",".join(map(str, current.get(tp, [])))
            lines.append(f"There is no active reassignment of partition {_format_tp(tp)}, but replica set is "
                         f"{now} rather than {','.join(map(str, targets[tp]))}.")
    return lines


def run_verify(admin: Admin, args: argparse.Namespace, out: TextIO) -> None:
    targets = parse_reassignment_json(_load_json(args.reassignment_json_file), args.reassignment_json_file)
    ongoing = admin.list_partition_reassignments()
    topics = sorted({tp.topic for tp in targets})
    current: dict[TopicPartition, list[int]] = {}
    for topic, description in admin.describe_topics(topics, raise_errors=False).items():
        if not isinstance(description, KafkaError):
            current.update({TopicPartition(topic, p.partition): list(p.replicas) for p in description.partitions})
    lines = format_verify(targets, ongoing, current)
    for line in lines:
        print(line, file=out)
    complete = all(line.endswith(" is complete.") for line in lines[1:])
    if complete and not args.preserve_throttles:
        clear_throttles(admin, topics, out)


# --------------------------------------------------------------------------------------------- cancel and list

def run_cancel(admin: Admin, args: argparse.Namespace, out: TextIO) -> None:
    targets = parse_reassignment_json(_load_json(args.reassignment_json_file), args.reassignment_json_file)
    active = sorted(admin.list_partition_reassignments(list(targets)))
    if not active:
        print("None of the specified partition reassignments are active.", file=out)
        return
    errors = {tp: e for tp, e in admin.alter_partition_reassignments(dict.fromkeys(active)).items()
              if e is not None}
    if errors:
        raise ReassignCommandError(f"Error cancelling partition reassignment{_plural(len(errors))} for:\n" + "\n".join(
            f"{_format_tp(tp)}: {error.args[0] if error.args else error}" for tp, error in sorted(errors.items())))
    print(f"Successfully cancelled partition reassignment{_plural(len(active))} for: {_partition_list(active)}",
          file=out)


def format_list(ongoing: Mapping[TopicPartition, Any]) -> str:
    if not ongoing:
        return "No partition reassignments found."
    lines = ["Current partition reassignments:"]
    for tp, assignment in sorted(ongoing.items()):
        adding = f" adding: {','.join(map(str, assignment.adding_replicas))}." if assignment.adding_replicas else ""
        removing = (f" removing: {','.join(map(str, assignment.removing_replicas))}."
                    if assignment.removing_replicas else "")
        lines.append(f"{_format_tp(tp)}: replicas: {','.join(map(str, assignment.replicas))}.{adding}{removing}")
    return "\n".join(lines)
