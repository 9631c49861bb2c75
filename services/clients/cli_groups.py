"""`odradek consumer-groups`: kafka-consumer-groups.sh (Kafka 2.8) on the admin client.

    --list [--state]                       group ids (with --state: GROUP and STATE columns)
    --describe --group G [--members | --state]
        default (offsets): GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST
        CLIENT-ID, one row per partition the group has an offset for or a member is assigned;
        --members: GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS;
        --state: GROUP COORDINATOR (ID) ASSIGNMENT-STRATEGY STATE #MEMBERS
    --reset-offsets --group G (--topic T[:P,P...] ... | --all-topics)
        (--to-earliest | --to-latest | --to-current | --to-offset N | --shift-by N)
        [--dry-run | --execute]             prints GROUP TOPIC PARTITION NEW-OFFSET; only --execute
                                            commits, and only for a group with no active members
    --delete --group G                      deletes an empty group and its offsets

Columns are padded as Kafka pads them (each as wide as its widest cell). A failure prints
`Error: <message>` and exits with 1.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple, TextIO

from services.clients.admin import Admin
from services.clients.admin_types import ConsumerGroupDescription, MemberDescription
from services.common.config import load_properties
from services.common.errors import KafkaError
from services.common.topic_partition import TopicPartition

if TYPE_CHECKING:
    from services.clients.consumer.records import OffsetAndMetadata

ACTIONS = ("list", "describe", "reset-offsets", "delete")
RESET_SPECS = ("to-earliest", "to-latest", "to-current", "to-offset", "shift-by")
INACTIVE_STATES = ("Empty", "Dead")


class GroupCommandError(Exception):
    """A user error the Kafka tool reports before doing anything."""


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("consumer-groups", help="list, describe, reset or delete consumer groups",
                                   description="List, describe, reset offsets of, or delete consumer groups.")
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    parser.add_argument("--command-config", metavar="FILE", help="a properties file of admin client configs")
    actions = parser.add_mutually_exclusive_group(required=True)
    for action in ACTIONS:
        actions.add_argument(f"--{action}", dest="action", action="store_const", const=action)
    parser.add_argument("--group", action="append", default=[], help="the group (repeatable)")
    parser.add_argument("--all-groups", action="store_true", help="every group (describe, delete)")
    parser.add_argument("--members", action="store_true", help="describe the members")
    parser.add_argument("--state", action="store_true", help="describe or list the groups' states")
    parser.add_argument("--offsets", action="store_true", help="describe the offsets (the default)")
    parser.add_argument("--topic", action="append", default=[], metavar="T[:P,P]",
                        help="topic (and partitions) to reset")
    parser.add_argument("--all-topics", action="store_true", help="reset every topic the group has offsets for")
    specs = parser.add_mutually_exclusive_group()
    specs.add_argument("--to-earliest", dest="reset", action="store_const", const=("to-earliest", None))
    specs.add_argument("--to-latest", dest="reset", action="store_const", const=("to-latest", None))
    specs.add_argument("--to-current", dest="reset", action="store_const", const=("to-current", None))
    specs.add_argument("--to-offset", dest="reset", type=lambda v: ("to-offset", int(v)), metavar="N")
    specs.add_argument("--shift-by", dest="reset", type=lambda v: ("shift-by", int(v)), metavar="N")
    parser.add_argument("--execute", action="store_true", help="commit the new offsets")
    parser.add_argument("--dry-run", action="store_true", help="only show the new offsets (the default)")
    parser.add_argument("--timeout", type=int, default=5000, help="milliseconds to wait for answers")
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace, out: TextIO) -> int:
    return run_admin_command(args, out, COMMANDS[args.action], GroupCommandError)


def run_admin_command(args: argparse.Namespace, out: TextIO,
                      command: Callable[[Admin, argparse.Namespace, TextIO], None],
                      user_error: type[Exception]) -> int:
    """Runs an admin tool's `command` with an Admin from --bootstrap-server, --command-config and
    --timeout; a failure prints `Error: <message>` and returns 1, as Kafka's tools do."""
    config = load_properties(args.command_config) if args.command_config else {}
    try:
        with Admin(config, bootstrap_servers=args.bootstrap_server,
                   default_api_timeout_ms=max(args.timeout, 1000)) as admin:
            command(admin, args, out)
        return 0
    except (KafkaError, user_error, ValueError, TimeoutError) as error:
        message = error.args[0] if error.args else str(error)
        print(f"Error: {message}", file=out)
        return 1


def print_table(rows: Sequence[Sequence[object]], out: TextIO) -> None:
    cells = [["-" if value is None else str(value) for value in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    for row in cells:
        print(" ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip(), file=out)


def _groups(admin: Admin, args: argparse.Namespace) -> list[str]:
    if args.all_groups:
        return [g.group_id for g in admin.list_consumer_groups()]
    if not args.group:
        raise GroupCommandError("Option [--group] or [--all-groups] is required.")
    return args.group


# --------------------------------------------------------------------------------------------- list

def run_list(admin: Admin, args: argparse.Namespace, out: TextIO) -> None:
    listings = admin.list_consumer_groups()
    if args.state:
        print_table([("GROUP", "STATE")] + [(g.group_id, g.state) for g in listings], out)
        return
    for listing in listings:
        print(listing.group_id, file=out)


# --------------------------------------------------------------------------------------------- describe

def run_describe(admin: Admin, args: argparse.Namespace, out: TextIO) -> None:
    for group_id in _groups(admin, args):
        description = admin.describe_consumer_groups([group_id])[group_id]
        if args.state:
            coordinator = description.coordinator
            where = f"{coordinator.host}:{coordinator.port} ({coordinator.node_id})" if coordinator else "-"
            print_table([("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"),
                         (group_id, where, description.partition_assignor or "", description.state,
                          len(description.members))], out)
        elif args.members:
            if not description.members:
                print(f"\nConsumer group '{group_id}' has no active members.", file=out)
                continue
            rows = [("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS")]
            rows += [(group_id, m.member_id, m.host, m.client_id, len(m.assignment)) for m in description.members]
            print_table(rows, out)
        else:
            _describe_offsets(admin, group_id, description, out)
        print(file=out)


class PartitionOffsets(NamedTuple):
    """One row of `--describe`: a partition the group has an offset for or a member is assigned."""

    partition: TopicPartition
    current_offset: int | None  # None: nothing committed
    log_end_offset: int | None  # None: the partition's leader did not answer
    member: MemberDescription | None

    @property
    def lag(self) -> int | None:
        """The log end offset less the committed offset, as kafka-consumer-groups.sh shows it."""
        if self.log_end_offset is None or self.current_offset is None:
            return None
        return self.log_end_offset - self.current_offset


def described_partitions(committed: Mapping[TopicPartition, object],
                         description: ConsumerGroupDescription) -> list[TopicPartition]:
    """The partitions `--describe` shows: committed to or assigned, in partition order."""
    return sorted(set(committed) | {tp for member in description.members for tp in member.assignment})


def partition_offsets(description: ConsumerGroupDescription, committed: Mapping[TopicPartition, OffsetAndMetadata],
                      log_end: Mapping[TopicPartition, object]) -> list[PartitionOffsets]:
    """The rows of `--describe` from the group, its committed offsets and the partitions' log end
    offsets (`Admin.list_offsets(..., raise_errors=False)` results: a KafkaError is no offset)."""
    owners = {tp: member for member in description.members for tp in member.assignment}
    rows = []
    for tp in described_partitions(committed, description):
        result = log_end.get(tp)
        end = None if result is None or isinstance(result, KafkaError) else result.offset
        current = committed[tp].offset if tp in committed else None
        rows.append(PartitionOffsets(tp, current, end, owners.get(tp)))
    return rows


def describe_partition_offsets(admin: Admin, group_id: str,
                               description: ConsumerGroupDescription) -> list[PartitionOffsets]:
    """`--describe`'s rows of one group, read from the cluster."""
    committed = admin.list_consumer_group_offsets(group_id)
    partitions = described_partitions(committed, description)
    log_end = admin.list_offsets(dict.fromkeys(partitions, "latest"), raise_errors=False) if partitions else {}
    return partition_offsets(description, committed, log_end)


def _describe_offsets(admin: Admin, group_id: str, description: ConsumerGroupDescription, out: TextIO) -> None:
    offsets = describe_partition_offsets(admin, group_id, description)
    if description.state == "Dead" and not offsets:
        raise GroupCommandError(f"Consumer group '{group_id}' does not exist.")
    if not description.members:
        print(f"\nConsumer group '{group_id}' has no active members.", file=out)
    if not offsets:
        return
    rows: list[tuple[object, ...]] = [("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                                       "CONSUMER-ID", "HOST", "CLIENT-ID")]
    for row in offsets:
        member = row.member
        rows.append((group_id, row.partition.topic, row.partition.partition, row.current_offset,
                     row.log_end_offset, row.lag, member.member_id if member else None,
                     member.host if member else None, member.client_id if member else None))
    print_table(rows, out)


# --------------------------------------------------------------------------------------------- reset

def parse_topic_partitions(values: Iterable[str]) -> tuple[list[str], list[TopicPartition]]:
    """`--topic t` (whole topics) and `--topic t:0,2` (some partitions)."""
    topics, partitions = [], []
    for value in values:
        topic, sep, indexes = value.partition(":")
        if not sep:
            topics.append(topic)
            continue
        partitions.extend(TopicPartition(topic, int(i)) for i in indexes.split(",") if i.strip())
    return topics, partitions


def run_reset_offsets(admin: Admin, args: argparse.Namespace, out: TextIO) -> None:
    if args.reset is None:
        raise GroupCommandError("One of the reset scenarios must be given: " +
                                ", ".join(f"--{s}" for s in RESET_SPECS))
    if not args.topic and not args.all_topics:
        raise GroupCommandError("One of [--topic] or [--all-topics] is required with --reset-offsets.")
    for group_id in _groups(admin, args):
        description = admin.describe_consumer_groups([group_id])[group_id]
        if args.execute and description.state not in INACTIVE_STATES:
            raise GroupCommandError(f"Assignments can only be reset if the group '{group_id}' is inactive, "
                                    f"but the current state is {description.state}.")
        committed = admin.list_consumer_group_offsets(group_id)
        partitions = _reset_partitions(admin, args, committed)
        new_offsets = _new_offsets(admin, args.reset, partitions, committed)
        if args.execute:
            admin.alter_consumer_group_offsets(group_id, new_offsets)
        rows: list[tuple[object, ...]] = [("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")]
        rows += [(group_id, tp.topic, tp.partition, offset) for tp, offset in sorted(new_offsets.items())]
        print_table(rows, out)
        print(file=out)


def _reset_partitions(admin: Admin, args: argparse.Namespace, committed) -> list[TopicPartition]:
    if args.all_topics:
        return sorted(committed)
    topics, partitions = parse_topic_partitions(args.topic)
    if topics:
        described = admin.describe_topics(topics)
        for topic in topics:
            partitions.extend(TopicPartition(topic, p.partition) for p in described[topic].partitions)
    return sorted(set(partitions))


def _new_offsets(admin: Admin, reset: tuple[str, int | None], partitions: list[TopicPartition],
                 committed) -> dict[TopicPartition, int]:
    kind, value = reset
    earliest = {tp: r.offset for tp, r in admin.list_offsets({tp: "earliest" for tp in partitions}).items()}
    latest = {tp: r.offset for tp, r in admin.list_offsets({tp: "latest" for tp in partitions}).items()}

    def clamp(tp: TopicPartition, offset: int) -> int:
        return max(earliest[tp], min(latest[tp], offset))

    offsets = {}
    for tp in partitions:
        current = committed[tp].offset if tp in committed else latest[tp]
        if kind == "to-earliest":
            offsets[tp] = earliest[tp]
        elif kind == "to-latest":
            offsets[tp] = latest[tp]
        elif kind == "to-current":
            offsets[tp] = current
        elif kind == "to-offset":
            offsets[tp] = clamp(tp, value)
        else:
            offsets[tp] = clamp(tp, current + value)
    return offsets


# --------------------------------------------------------------------------------------------- delete

def run_delete(admin: Admin, args: argparse.Namespace, out: TextIO) -> None:
    groups = _groups(admin, args)
    results = admin.delete_consumer_groups(groups, raise_errors=False)
    failed = {g: e for g, e in results.items() if e is not None}
    succeeded = [g for g in groups if g not in failed]
    if succeeded:
        names = ", ".join(f"'{g}'" for g in succeeded)
        print(f"Deletion of requested consumer groups ({names}) was successful.", file=out)
    for group_id, error in failed.items():
        print(f"Deletion of some consumer groups failed:\n* Group '{group_id}' could not be deleted due to: "
              f"{error.error_name}", file=out)
    if failed:
        raise GroupCommandError("some groups could not be deleted")


COMMANDS = {"list": run_list, "describe": run_describe, "reset-offsets": run_reset_offsets, "delete": run_delete}
